"""Print an HTML report to PDF with headless Chromium.

Chromium prints inline SVG as vector paths and real text: chart labels stay searchable
(``pdftotext`` reads them) and no chart becomes an image. The page's own CSS decides
the paper: ``@page`` size and margins, ``break-before: page`` between sections.

What the print waits for (Chromium 156, measured): the ``load`` event, the handlers of
``load`` and zero-delay timers they start. Longer timers and ``requestAnimationFrame``
callbacks would run after the print; :data:`SETTLE_FLAGS` lets them run first, on
virtual time, so a page that is idle after ``load`` is not slowed down.

Cost (2 cores): about 0.5 s to start Chromium and print a small page; a 20-run report
(5.8 MB, 466 inline SVG charts, 374 A4 pages) takes about 9 s, most of it layout and
painting of the SVG text and marks. Chromium scales a whole document down to fit its
widest element onto the paper, so report pages must never be wider than A4 (a
20-column table once printed every page of a report at 38 %).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem
from ssdlab.report.files import shared_mode

#: an explicit Chromium (or Chrome) binary; overrides the search on PATH
CHROMIUM_ENV = "SSDLAB_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = f"install it with: apt-get install chromium (or set {CHROMIUM_ENV})"

#: headless, as root, on a machine without network: no sandbox (root), no GPU, and no
#: background connections (they would be refused and delay or clutter the run)
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: an untagged PDF: Chromium's tagging (the accessibility structure tree) made a 290-page
#: report's PDF 2x larger and its printing about a third slower (measured: 8.9 -> 4.2 MB,
#: 17.4 -> 13.2 s); the text stays text, searchable and extractable
PRINT_FLAGS = ("--no-pdf-header-footer", "--disable-pdf-tagging")
#: run timers and animation frames started on load before printing (virtual time)
SETTLE_FLAGS = ("--run-all-compositor-stages-before-draw", "--virtual-time-budget=2000")

KILL_GRACE_S = 5.0

# stderr lines that never explain a failure: D-Bus is absent on servers, Debian's
# launcher script trips over a duplicated /dev/shm mount, and the success message
_NOISE = ("dbus/", "unexpected operator", "bytes written to file")
_LOG_PREFIX = re.compile(r"^\[[\d:/.]+:[A-Z]+:[^\]]*\]\s*")


def find_chromium() -> str:
    """The Chromium binary: ``$SSDLAB_CHROMIUM``, else the first known name on PATH."""
    explicit = os.environ.get(CHROMIUM_ENV)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise EnvironmentProblem(
                f"{CHROMIUM_ENV}={explicit} is not an executable program; {INSTALL_HINT}"
            )
        return found
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise EnvironmentProblem(
        f"Chromium is needed for PDF reports and was not found "
        f"(tried {', '.join(CHROMIUM_NAMES)}); {INSTALL_HINT}"
    )


def html_to_pdf(
    html_path: Path, pdf_path: Path, *, timeout_s: float = 120, settle: bool = True
) -> None:
    """Print a local HTML file to ``pdf_path``; a failure leaves no PDF (and no part file).

    The PDF is written to a temporary name next to ``pdf_path`` and renamed only when
    Chromium finished and the file is a complete PDF, so an existing ``pdf_path`` is
    either replaced whole or left alone. ``settle=False`` prints a page without scripts
    right after ``load``, without running its timers first (:data:`SETTLE_FLAGS` cost a
    20-run report about 2 s). Raises :class:`EnvironmentProblem` when Chromium
    is missing, fails or does not finish within ``timeout_s`` (it is then killed, with
    every process it started); Ctrl-C stops Chromium the same way and is re-raised.
    """
    chromium = find_chromium()
    source = html_path.resolve(strict=True)  # a missing input is the caller's bug
    fd, part_name = tempfile.mkstemp(
        prefix=f".{pdf_path.name}.", suffix=".part", dir=pdf_path.parent
    )
    os.close(fd)
    part = Path(part_name).absolute()
    try:
        problem = _print(chromium, source, part, timeout_s, SETTLE_FLAGS if settle else ())
        if problem is not None:
            raise EnvironmentProblem(f"Chromium could not print {html_path} to PDF: {problem}")
        part.chmod(shared_mode())
        os.replace(part, pdf_path)
    finally:
        part.unlink(missing_ok=True)


def _print(
    chromium: str, source: Path, part: Path, timeout_s: float, settle: tuple[str, ...]
) -> str | None:
    """Run Chromium once; None when it exited normally, else why it failed (one line)."""
    with tempfile.TemporaryDirectory(
        prefix="ssdlab-chromium-", ignore_cleanup_errors=True
    ) as scratch:
        profile = Path(scratch) / "profile"
        stderr_path = Path(scratch) / "stderr.log"
        command = [
            chromium,
            *HEADLESS_FLAGS,
            *settle,
            f"--user-data-dir={profile}",
            *PRINT_FLAGS,
            f"--print-to-pdf={part}",
            source.as_uri(),
        ]
        # stderr goes to a file, not a pipe: Chromium's helpers may outlive it holding a pipe
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # its own process group, killed as a whole
                preexec_fn=die_with_parent,
            )
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop(proc)
                return f"it did not finish within {timeout_s:g} s and was stopped"
            except KeyboardInterrupt:
                _stop(proc)
                raise
            finally:
                _kill_group(proc.pid)  # helpers left behind by a normal exit too
        if returncode != 0:
            status = f"exit status {returncode}" if returncode > 0 else f"signal {-returncode}"
            last = _last_stderr_line(stderr_path)
            return f"{status}: {last}" if last else status
        if not _is_complete_pdf(part):  # it exits 0 when the page or the file failed
            return _last_stderr_line(stderr_path) or "no complete PDF was written"
        return None


def _is_complete_pdf(path: Path) -> bool:
    """Starts with the PDF header and ends with the end-of-file marker."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(5)
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 1024))
            tail = fh.read()
    except OSError:
        return False
    return head == b"%PDF-" and b"%%EOF" in tail


def _last_stderr_line(path: Path) -> str:
    """The last line of Chromium's stderr that says something, without its log prefix."""
    with contextlib.suppress(OSError):
        lines = path.read_text(errors="replace").splitlines()
        for line in reversed(lines):
            if line.strip() and not any(noise in line for noise in _NOISE):
                return _LOG_PREFIX.sub("", line.strip())
    return ""


def _kill_group(pgid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop Chromium's whole process group: SIGTERM, then SIGKILL after a grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
