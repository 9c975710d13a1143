"""Print an HTML report to PDF with headless Chromium.

Chromium prints inline SVG as vector paths and real text: chart labels stay searchable
(``pdftotext`` reads them) and no chart becomes an image. The page's own CSS decides
the paper: ``@page`` size and margins, ``break-before: page`` between sections.

What the print waits for (Chromium 156, measured): the ``load`` event, the handlers of
``load`` and zero-delay timers they start. Longer timers and ``requestAnimationFrame``
callbacks would run after the print; :data:`SETTLE_FLAGS` lets them run first, on
virtual time, so a page that is idle after ``load`` is not slowed down.

Cost (2 cores): about 0.3 s to start Chromium and print a small page. Nearly all the
rest is one renderer process laying out and painting (the SVG text and marks, the
tables) on one CPU, so a large report is printed in parts by several Chromium processes
at once, one per CPU, and the parts' PDFs are joined with their links intact
(:func:`htmls_to_pdf`, :func:`print_jobs`). A 20-run report (5.8 MB, 466 inline SVG
charts, 374 A4 pages), measured side by side: one process of the full browser 7.2 s,
one ``chromium-headless-shell`` 5.8 s, two of them at once 4.6 s (bench/report_speed.py).
Chromium scales a whole document down to fit its widest element onto the paper, so
report pages must never be wider than A4 (a 20-column table once printed every page of
a report at 38 %).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem, UserError
from ssdlab.report.files import shared_mode

#: an explicit Chromium (or Chrome) binary; overrides the search on PATH
CHROMIUM_ENV = "SSDLAB_CHROMIUM"
#: Debian's chromium-headless-shell: preferred for printing (see :func:`find_chromium`)
HEADLESS_SHELL = "chromium-headless-shell"
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
#: how often the printers are looked at while they run
POLL_S = 0.05

#: parallel printing (:func:`print_jobs`): Chromium lays out and paints on one CPU, so a
#: large report printed in two parts by two processes on a 2-CPU machine takes about a
#: third less time; a part smaller than this is not worth a second Chromium's start
#: (measured, one process vs two: 0.27 MB 0.50 vs 0.64 s, 0.60 MB 0.83 vs 0.84 s,
#: 1.2 MB 1.26 vs 0.98 s)
BYTES_PER_JOB = 1_000_000
MAX_PRINT_JOBS = 4
MAX_PRINT_JOBS_ENV = 16
PRINT_JOBS_ENV = "SSDLAB_PRINT_JOBS"

# stderr lines that never explain a failure: D-Bus is absent on servers, Debian's
# launcher script trips over a duplicated /dev/shm mount, and the success message
_NOISE = ("dbus/", "unexpected operator", "bytes written to file")
_LOG_PREFIX = re.compile(r"^\[[\d:/.]+:[A-Z]+:[^\]]*\]\s*")


def find_chromium(*, printing: bool = False) -> str:
    """The Chromium binary: ``$SSDLAB_CHROMIUM``, else the first known name on PATH.

    ``printing``: Debian's ``chromium-headless-shell`` first (Chromium's old headless
    mode, the same engine without the browser around it): it prints a large report
    about 15 % faster on its own and, unlike the full browser, gains from a second
    printer running beside it (see :func:`print_jobs`)."""
    explicit = os.environ.get(CHROMIUM_ENV)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise EnvironmentProblem(
                f"{CHROMIUM_ENV}={explicit} is not an executable program; {INSTALL_HINT}"
            )
        return found
    names = (HEADLESS_SHELL, *CHROMIUM_NAMES) if printing else CHROMIUM_NAMES
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    raise EnvironmentProblem(
        f"Chromium is needed for PDF reports and was not found "
        f"(tried {', '.join(names)}); {INSTALL_HINT}"
    )


def print_jobs(html_bytes: int) -> int:
    """How many Chromium processes print a report of ``html_bytes`` at once: one per
    CPU (at most :data:`MAX_PRINT_JOBS`), each with at least :data:`BYTES_PER_JOB` of
    HTML, and one when the parts could not be joined (no ``pypdf``).
    ``$SSDLAB_PRINT_JOBS`` sets the number (1 prints in one process)."""
    explicit = os.environ.get(PRINT_JOBS_ENV)
    if explicit is not None:
        if not explicit.isdigit() or not 1 <= int(explicit) <= MAX_PRINT_JOBS_ENV:
            raise UserError(
                f"{PRINT_JOBS_ENV}={explicit!r}: give a whole number from 1 to "
                f"{MAX_PRINT_JOBS_ENV}"
            )
        wanted = int(explicit)
    else:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        wanted = min(cpus, MAX_PRINT_JOBS, html_bytes // BYTES_PER_JOB)
    return max(1, wanted) if _can_join() else 1


def _can_join() -> bool:
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return False
    return True


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
    htmls_to_pdf([html_path], pdf_path, timeout_s=timeout_s, settle=settle)


def htmls_to_pdf(
    html_paths: Sequence[Path],
    pdf_path: Path,
    *,
    stand_ins: Sequence[frozenset[str]] = (),
    timeout_s: float = 120,
    settle: bool = True,
) -> None:
    """Print each file with its own Chromium, all at once, and join the PDFs in order.

    As :func:`html_to_pdf`, for the parts of one document: each part starts a new page,
    and the links between parts are kept (the join rebuilds the named destinations;
    ``stand_ins[i]`` names the destinations of part ``i`` that are stand-ins for a
    section printed in another part, see :class:`ssdlab.report.html.PrintPart`). One
    part failing or running out of time stops them all and leaves no PDF.
    """
    if not html_paths:
        raise ValueError("no HTML to print")
    chromium = find_chromium(printing=True)
    sources = [p.resolve(strict=True) for p in html_paths]  # a missing input is a bug
    parts: list[Path] = []
    try:
        for _ in range(len(sources) + (len(sources) > 1)):
            fd, name = tempfile.mkstemp(
                prefix=f".{pdf_path.name}.", suffix=".part", dir=pdf_path.parent
            )
            os.close(fd)
            parts.append(Path(name).absolute())
        printed = parts[: len(sources)]
        flags = SETTLE_FLAGS if settle else ()
        problem = _print_all(chromium, sources, printed, timeout_s, flags)
        if problem is not None:
            source = html_paths[0] if len(html_paths) == 1 else html_paths[0].parent
            raise EnvironmentProblem(f"Chromium could not print {source} to PDF: {problem}")
        final = parts[-1]
        if len(printed) > 1:
            try:
                _join(printed, list(stand_ins) or [frozenset()] * len(printed), final)
            except Exception as exc:  # pypdf's errors on a part Chromium wrote
                raise EnvironmentProblem(
                    f"the {len(printed)} parts Chromium printed could not be joined into "
                    f"{pdf_path}: {type(exc).__name__}: {exc}"
                ) from exc
        final.chmod(shared_mode())
        os.replace(final, pdf_path)
    finally:
        for part in parts:
            part.unlink(missing_ok=True)


def _print_all(
    chromium: str,
    sources: Sequence[Path],
    outputs: Sequence[Path],
    timeout_s: float,
    settle: tuple[str, ...],
) -> str | None:
    """Run one Chromium per source, all at once; None when every one printed a complete
    PDF, else why one failed (one line). The first failure stops the others."""
    with tempfile.TemporaryDirectory(
        prefix="ssdlab-chromium-", ignore_cleanup_errors=True
    ) as scratch:
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for n, (source, output) in enumerate(zip(sources, outputs, strict=True)):
                procs.append(_start(chromium, source, output, Path(scratch) / f"profile-{n}",
                                    Path(scratch) / f"stderr-{n}.log", settle))
            deadline = time.monotonic() + timeout_s
            running = set(range(len(procs)))
            while running:
                for n in sorted(running):
                    if procs[n].poll() is None:
                        continue
                    running.discard(n)
                    problem = _outcome(procs[n].returncode, outputs[n],
                                       Path(scratch) / f"stderr-{n}.log")
                    if problem is not None:
                        _stop(procs)
                        which = f"part {n + 1} of {len(procs)}: " if len(procs) > 1 else ""
                        return which + problem
                if running:
                    if time.monotonic() >= deadline:
                        _stop(procs)
                        return f"it did not finish within {timeout_s:g} s and was stopped"
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        procs[min(running)].wait(timeout=POLL_S)
        except BaseException:  # Ctrl-C, or a failure to start one of them
            _stop(procs)
            raise
        finally:
            for proc in procs:
                _kill_group(proc.pid)  # helpers left behind by a normal exit too
        return None


def _outcome(returncode: int, output: Path, log: Path) -> str | None:
    """None when Chromium printed a complete PDF, else why not (one line)."""
    if returncode != 0:
        status = f"exit status {returncode}" if returncode > 0 else f"signal {-returncode}"
        last = _last_stderr_line(log)
        return f"{status}: {last}" if last else status
    if not _is_complete_pdf(output):  # it exits 0 when the page or the file failed
        return _last_stderr_line(log) or "no complete PDF was written"
    return None


def _start(
    chromium: str, source: Path, output: Path, profile: Path, log: Path,
    settle: tuple[str, ...],
) -> subprocess.Popen[bytes]:
    command = [
        chromium,
        *HEADLESS_FLAGS,
        *settle,
        f"--user-data-dir={profile}",
        *PRINT_FLAGS,
        f"--print-to-pdf={output}",
        source.as_uri(),
    ]
    # stderr goes to a file, not a pipe: Chromium's helpers may outlive it holding a pipe
    with open(log, "wb") as stderr:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,  # its own process group, killed as a whole
            preexec_fn=die_with_parent,
        )


def _join(parts: Sequence[Path], stand_ins: Sequence[frozenset[str]], out: Path) -> None:
    """Concatenate the parts' pages into ``out`` with one table of named destinations.

    Chromium's links point at named destinations (``/Dest /run3``) listed in the
    catalogue's ``/Dests``; a link in one part to a section of another part works again
    once every real destination is in one table and points at the joined pages. The
    document information (title, creator) is the first part's."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject

    writer = PdfWriter()
    dests = DictionaryObject()
    for n, (part, fake) in enumerate(zip(parts, stand_ins, strict=True)):
        reader = PdfReader(part)
        placed = {}
        for page in reader.pages:
            new = writer.add_page(page)
            assert page.indirect_reference is not None  # pages of a file are indirect
            placed[page.indirect_reference.idnum] = new.indirect_reference
        root = reader.root_object
        if n == 0:
            if reader.metadata:
                writer.add_metadata(dict(reader.metadata))
            viewer = root.get("/ViewerPreferences")
            if viewer is not None:
                prefs = cast(DictionaryObject, viewer.get_object()).clone(writer)
                writer.root_object[NameObject("/ViewerPreferences")] = prefs
        table = root.get("/Dests")
        if table is None:
            continue
        for name, target in cast(DictionaryObject, table.get_object()).items():
            if name[1:] in fake:
                continue
            where = cast(ArrayObject, target.get_object())
            dests[NameObject(name)] = ArrayObject([placed[where[0].idnum], *where[1:]])
    if dests:
        writer.root_object[NameObject("/Dests")] = dests
    with open(out, "wb") as fh:
        writer.write(fh)


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


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop each Chromium's process group: SIGTERM, then SIGKILL after a grace period."""
    for proc in procs:
        _kill_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
