"""Headless Chromium for tests: load a report, read its console, poke it, screenshot it.

The driver is a small Chrome DevTools Protocol (CDP) client over
``--remote-debugging-pipe``: Chromium reads JSON commands on fd 3 and writes replies
and events on fd 4, NUL-separated. Why this and not the alternatives:

* no dependency and nothing to download: only Debian's ``chromium`` (the same binary
  and flags :mod:`ssdlab.report.pdf` prints with), so it works offline by construction;
* it speaks the protocol of the installed browser, so Debian's security updates of
  Chromium cannot outrun a pinned driver (Playwright targets particular Chromium
  builds; selenium needs a chromedriver of exactly the browser's version);
* fastest to start: no Node driver process (Python Playwright 1.65 drives Debian's
  Chromium 156 fine via ``executable_path``, but its import and Node driver cost
  ~0.4 s per start and ~165 MB in the venv), no websocket, no port to pick.

The price is that this is not Playwright: ``hover`` and ``click`` dispatch real mouse
events at the element's centre, after scrolling it into view and checking that it is the
topmost element there, and do not wait for elements to appear. Reports are static once
``load`` has fired, which is what :meth:`Browser.open_page` waits for.

Use one :class:`Browser` per test module (a module-scoped fixture) and one page per
test; tests that need Chromium call :func:`require_chromium` and are marked ``browser``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import itertools
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem
from ssdlab.report.pdf import HEADLESS_FLAGS, find_chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
COMMAND_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 60.0
CLOSE_GRACE_S = 5.0
VIEWPORT = (1280, 900)
_PIPE_READ_FD, _PIPE_WRITE_FD = 3, 4  # fixed by --remote-debugging-pipe

Event = dict[str, Any]


class BrowserError(Exception):
    """Chromium failed, exited, timed out, or a page did something the test did not expect."""


@dataclass(frozen=True)
class ConsoleMessage:
    """``kind``: console.error, console.warning, exception, log.error or log.warning."""

    kind: str
    text: str

    @property
    def is_error(self) -> bool:
        return not self.kind.endswith("warning")

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


def require_chromium() -> str:
    """Chromium's path, or skip the calling test with the reason and how to install it."""
    try:
        return find_chromium()
    except EnvironmentProblem as exc:
        pytest.skip(exc.message)


def require_tool(name: str, package: str = "poppler-utils") -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed; install it with: apt-get install {package}")
    return path


def artifact_dir(test_name: str) -> Path:
    """``tests/artifacts/<test_name>/`` (created): where screenshots and PDFs are kept."""
    path = ARTIFACTS / re.sub(r"[^A-Za-z0-9._-]+", "_", test_name).strip("_")
    path.mkdir(parents=True, exist_ok=True)
    return path


def pdf_info(pdf: Path) -> dict[str, str]:
    """``pdfinfo``'s fields: "Pages", "Page size" ("419.52 x 595.2 pts (A5)"), "Producer"..."""
    out = _run([require_tool("pdfinfo"), str(pdf)])
    return dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in out.splitlines())
        if sep
    )


def pdf_page_count(pdf: Path) -> int:
    return int(pdf_info(pdf)["Pages"])


def pdf_text(pdf: Path) -> list[str]:
    """The text of each page (``pdftotext -layout``), one string per page."""
    out = _run([require_tool("pdftotext"), "-layout", "-enc", "UTF-8", str(pdf), "-"])
    pages = out.split("\f")  # pdftotext ends every page, even an empty one, with a form feed
    return pages[:-1] if pages and pages[-1] == "" else pages


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise BrowserError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result.stdout


class _Connection:
    """CDP messages over the two pipes: send a command, wait for its reply, route events."""

    def __init__(self, read_fd: int, write_fd: int, describe_exit: Callable[[], str]) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._describe_exit = describe_exit
        self._buffer = b""
        self._ids = itertools.count(1)
        self.listeners: dict[str | None, Callable[[str, Event], None]] = {}

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> dict[str, Any]:
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write_fd, data) :]
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._next(deadline, method)
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def wait_for(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            self._next(deadline, what)

    def _next(self, deadline: float, what: str) -> Event:
        """The next message; events are handed to their listener on the way."""
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._read_fd], [], [], remaining)[0]:
                raise BrowserError(f"Chromium did not answer {what} in time")
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited during {what}: {self._describe_exit()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: Event = json.loads(raw)
        if "method" in message:
            listener = self.listeners.get(message.get("sessionId"))
            if listener is not None:
                listener(message["method"], message.get("params", {}))
        return message


class Browser:
    """One headless Chromium process; :meth:`open_page` opens a fresh tab per call.

    Without ``chromium``, the calling test is skipped when Chromium is not installed.
    """

    def __init__(self, chromium: str | None = None) -> None:
        self.chromium = chromium or require_chromium()
        self._scratch = Path(tempfile.mkdtemp(prefix="ssdlab-browser-"))
        self._stderr_path = self._scratch / "stderr.log"
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        command = [
            self.chromium,
            *HEADLESS_FLAGS,
            "--remote-debugging-pipe",
            f"--user-data-dir={self._scratch / 'profile'}",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]

        def child_setup() -> None:  # runs in the child between fork and exec
            read_fd = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            write_fd = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(read_fd, _PIPE_READ_FD)
            os.dup2(write_fd, _PIPE_WRITE_FD)
            die_with_parent()

        try:
            with open(self._stderr_path, "wb") as stderr:
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    start_new_session=True,
                    close_fds=False,  # keep fds 3 and 4; every other fd is non-inheritable
                    preexec_fn=child_setup,
                )
        finally:
            os.close(to_chrome_r)
            os.close(from_chrome_w)
        self._connection = _Connection(from_chrome_r, to_chrome_w, self._stderr_tail)
        self._fds: tuple[int, ...] = (from_chrome_r, to_chrome_w)
        try:
            self.version: str = self._connection.send("Browser.getVersion")["product"]
        except BrowserError:
            self.close()
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def open_page(self, html_path: Path, viewport: tuple[int, int] = VIEWPORT) -> Iterator[Page]:
        """A new tab showing ``html_path``, after its ``load`` event; closed afterwards."""
        with self.open_url(html_path.resolve().as_uri(), viewport) as page:
            yield page

    @contextlib.contextmanager
    def open_url(self, url: str, viewport: tuple[int, int] = VIEWPORT) -> Iterator[Page]:
        """A new tab showing ``url`` (e.g. a page ``ssdlab serve`` serves), after its
        ``load`` event; closed afterwards."""
        target = self._connection.send("Target.createTarget", {"url": "about:blank"})
        target_id = target["targetId"]
        attached = self._connection.send(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}
        )
        page = Page(self._connection, attached["sessionId"])
        try:
            page._navigate(url, viewport)
            yield page
        finally:
            self._connection.listeners.pop(page.session, None)
            with contextlib.suppress(BrowserError):
                self._connection.send("Target.closeTarget", {"targetId": target_id})

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(BrowserError, OSError):
                self._connection.send("Browser.close", timeout_s=CLOSE_GRACE_S)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=CLOSE_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)  # helpers, or a Chromium that hung
        self._proc.wait()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = ()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self._stderr_path.read_text(errors="replace").splitlines()
            useful = [line for line in lines if "dbus/" not in line]
            return " | ".join(useful[-3:]) or "no message"
        return "no message"


class Page:
    """A loaded tab: console messages since navigation, JavaScript, mouse, screenshots."""

    def __init__(self, connection: _Connection, session: str) -> None:
        self._connection = connection
        self.session = session
        self.url = ""
        self._messages: list[ConsoleMessage] = []
        self._requests: list[str] = []
        self._loaded = False
        connection.listeners[session] = self._on_event

    def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._connection.send(method, params, self.session)

    def _navigate(self, url: str, viewport: tuple[int, int]) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            self._send(f"{domain}.enable")
        width, height = viewport
        self._send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.url = url
        self._loaded = False
        result = self._send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"could not load {url}: {result['errorText']}")
        self._connection.wait_for(lambda: self._loaded, LOAD_TIMEOUT_S, f"the load of {url}")

    def _on_event(self, method: str, params: Event) -> None:
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning"):
            text = " ".join(_describe(arg) for arg in params.get("args", []))
            self._messages.append(ConsoleMessage(f"console.{params['type']}", text))
        elif method == "Runtime.exceptionThrown":
            self._messages.append(ConsoleMessage("exception", _exception_text(params)))
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            entry = params["entry"]
            where = f" ({entry['url']})" if entry.get("url") else ""
            self._messages.append(ConsoleMessage(f"log.{entry['level']}", entry["text"] + where))
        elif method == "Network.requestWillBeSent":
            self._requests.append(params["request"]["url"])

    def console_messages(self) -> list[ConsoleMessage]:
        """Every error and warning since navigation: console calls, exceptions, browser log."""
        self._send("Runtime.evaluate", {"expression": "0"})  # events queued before now arrive
        return list(self._messages)

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads, as ``kind: text`` lines."""
        return [str(m) for m in self.console_messages() if m.is_error]

    def console_warnings(self) -> list[str]:
        return [str(m) for m in self.console_messages() if not m.is_error]

    def requested_urls(self) -> list[str]:
        """Every URL the page requested, itself first (a self-contained report: only that)."""
        self._send("Runtime.evaluate", {"expression": "0"})
        return list(self._requests)

    def evaluate(self, js: str) -> Any:
        """The value of a JavaScript expression (JSON-like; a promise is awaited)."""
        result = self._send(
            "Runtime.evaluate",
            {"expression": js, "returnByValue": True, "awaitPromise": True, "userGesture": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{js!r} threw {_exception_text(result)}")
        return result["result"].get("value")

    def emulate_print(self) -> None:
        """Lay the page out for print (``@media print``), as Chromium does for a PDF."""
        self._send("Emulation.setEmulatedMedia", {"media": "print"})

    def hover(self, selector: str) -> None:
        x, y = self._centre_of(selector)
        self._mouse("mouseMoved", x, y)

    def click(self, selector: str) -> None:
        x, y = self._centre_of(selector)
        self._mouse("mouseMoved", x, y)
        self._mouse("mousePressed", x, y, button="left", clickCount=1)
        self._mouse("mouseReleased", x, y, button="left", clickCount=1)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """Save a PNG of the viewport, or of the whole page; returns ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self._send("Page.getLayoutMetrics")["cssContentSize"]
            width, height = math.ceil(size["width"]), math.ceil(size["height"])
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self._send("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def _centre_of(self, selector: str) -> tuple[float, float]:
        """Scroll the element into view; its centre, if nothing else covers it there."""
        found = self.evaluate(
            f"""(() => {{
            const el = document.querySelector({json.dumps(selector)});
            if (!el) return "no element matches";
            el.scrollIntoView({{block: "center", inline: "center"}});
            const r = el.getBoundingClientRect();
            if (r.width === 0 || r.height === 0) return "the element has no size";
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const top = document.elementFromPoint(x, y);
            if (!top) return "the element is outside the page";
            if (el !== top && !el.contains(top))
                return "the element is covered by " + top.outerHTML.slice(0, 80);
            return [x, y];
            }})()"""
        )
        if isinstance(found, str):
            raise BrowserError(f"cannot point at {selector!r}: {found}")
        return float(found[0]), float(found[1])

    def _mouse(self, kind: str, x: float, y: float, **extra: Any) -> None:
        self._send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **extra})


def _describe(arg: Event) -> str:
    if "value" in arg:
        value = arg["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(arg.get("description") or arg.get("unserializableValue") or arg.get("type"))


def _exception_text(params: Event) -> str:
    details = params["exceptionDetails"]
    exception = details.get("exception", {})
    text = str(exception.get("description") or details.get("text", "exception"))
    first = text.splitlines()[0] if text else "exception"
    where = details.get("url") or ""
    return f"{first} ({where}:{details.get('lineNumber', 0) + 1})" if where else first


@contextlib.contextmanager
def open_page(html_path: Path, viewport: tuple[int, int] = VIEWPORT) -> Iterator[Page]:
    """A page in a browser of its own (one Chromium start); prefer a shared :class:`Browser`."""
    with Browser() as browser, browser.open_page(html_path, viewport) as page:
        yield page
