"""A large report is printed in parts by several Chromium processes at once and joined.

The joined PDF must be the PDF Chromium prints from the whole report: the same pages
with the same words, and every link (the cover's contents, the run tables) going to the
same place, also the links from one part to another. Failures of one part stop all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import time
from pathlib import Path

import pytest
from pypdf import PdfReader
from pypdf.generic import ArrayObject, DictionaryObject

from ssdlab.errors import EnvironmentProblem
from ssdlab.plan.pts import PtsArgs
from ssdlab.report import build
from ssdlab.report.build import ReportRequest, write_report
from ssdlab.report.html import Page, print_parts
from ssdlab.report.pdf import CHROMIUM_ENV, PRINT_JOBS_ENV, htmls_to_pdf
from ssdlab.store.db import Store
from tests.support.browser import artifact_dir, pdf_text, require_chromium
from tests.unit.test_report_build import noisy, stored_run

Link = tuple[int, tuple[int, ...], str, int, int]  # page, rect, name, target page, target y


class _FrozenDatetime(dt.datetime):
    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _FrozenDatetime:
        return cls(2026, 1, 2, 3, 4, tzinfo=tz)


class _FrozenClock:
    """``datetime`` for :mod:`ssdlab.report.build` with a clock that stands still."""

    UTC = dt.UTC
    datetime = _FrozenDatetime


def links(pdf: Path) -> list[Link]:
    """Every link of the PDF: where it is, and the page and height it goes to."""
    reader = PdfReader(pdf)
    numbers = {page.indirect_reference.idnum: n for n, page in enumerate(reader.pages)
               if page.indirect_reference is not None}
    table = reader.root_object.get("/Dests")
    dests = table.get_object() if table is not None else DictionaryObject()
    assert isinstance(dests, DictionaryObject)
    found = []
    for n, page in enumerate(reader.pages):
        for annot in page.get("/Annots", None) or []:
            annot = annot.get_object()
            if annot.get("/Subtype") != "/Link":
                continue
            name = str(annot["/Dest"])
            target = dests.get(name)
            assert target is not None, f"page {n + 1}: the link to {name} goes nowhere"
            where = target.get_object()
            assert isinstance(where, ArrayObject)
            rect = tuple(round(float(v)) for v in annot["/Rect"])
            found.append((n, rect, name, numbers[where[0].idnum], round(float(where[3]))))
    return found


@pytest.mark.browser
def test_a_report_printed_in_parts_is_the_report_printed_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    require_chromium()
    # both reports carry one generation time (minutes): the two prints take seconds and
    # could straddle a minute (page 1 once read "11:06" against "11:07")
    monkeypatch.setattr(build, "dt", _FrozenClock)
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False,
                   block_sizes="4,64", mixes="100/0,65/35,0/100", max_rounds=5)
    with Store.open(tmp_path / "store.sqlite") as store:
        ids = tuple(stored_run(store, tmp_path, noisy(1000 + 150 * s, s), args)
                    for s in range(4))
        printed = {}
        for jobs in ("1", "3"):
            monkeypatch.setenv(PRINT_JOBS_ENV, jobs)
            out = artifact_dir(request.node.name) / f"jobs-{jobs}"
            for old in out.glob("*"):
                old.unlink()
            files = write_report(store, ReportRequest(ids, out))
            assert files.pdf is not None
            assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.pdf"]
            printed[jobs] = files.pdf
    whole, parts = printed["1"], printed["3"]
    whole_pages, part_pages = pdf_text(whole), pdf_text(parts)
    assert len(part_pages) == len(whole_pages) > 30
    for n, (a, b) in enumerate(zip(whole_pages, part_pages, strict=True)):
        assert sorted(a.split()) == sorted(b.split()), f"page {n + 1} differs"
    whole_links, part_links = links(whole), links(parts)
    assert part_links == whole_links
    # the contents on page 1 link to sections that the second and third parts printed
    assert max(target for page, _, _, target, _ in whole_links if page == 0) > len(
        whole_pages) * 2 // 3
    targets = set(re.findall(r'href="#([^"]*)"', (whole.parent / "report.html").read_text()))
    assert {name[1:] for _, _, name, _, _ in whole_links} == targets  # every link in the HTML
    info = PdfReader(parts).metadata
    assert info is not None and info.title == PdfReader(whole).metadata.title  # type: ignore[union-attr]


@pytest.mark.browser
def test_links_back_to_an_earlier_part_go_to_the_section_not_to_its_stand_in(
    tmp_path: Path,
) -> None:
    require_chromium()
    pages = [
        Page("first", "First", '<p>FIRST</p><p><a href="#second">on to the second</a></p>'),
        Page("second", "Second", '<p>SECOND</p><p><a href="#first">back to the first</a></p>'
             '<p><a href="#cover">back to the cover</a></p>'),
    ]
    pdfs = {}
    for count in (1, 3):
        parts = print_parts("links", pages, "<h1>COVER</h1>", count)
        files = []
        for n, part in enumerate(parts):
            files.append(tmp_path / f"part-{count}-{n}.html")
            files[-1].write_text(part.html)
        pdfs[count] = tmp_path / f"joined-{count}.pdf"
        htmls_to_pdf(files, pdfs[count], stand_ins=[p.stand_ins for p in parts], settle=False)
    found = links(pdfs[3])
    assert found == links(pdfs[1])
    goes = {(page, name): target for page, _, name, target, _ in found}
    assert goes[(1, "/second")] == 2 and goes[(2, "/first")] == 1 and goes[(2, "/cover")] == 0
    cover, first, second = pdf_text(pdfs[3])
    assert "COVER" in cover and "FIRST" in first and "SECOND" in second


def _fake_chromium(tmp_path: Path, body: str) -> Path:
    """A script standing in for Chromium: it notes its pid, then runs ``body`` (where
    ``$page`` is the file it was asked to print and ``$out`` the PDF to write)."""
    script = tmp_path / "fake-chromium"
    script.write_text(
        "#!/bin/sh\n"
        f'echo $$ >> "{tmp_path}/pids"\n'
        'for arg; do case "$arg" in --print-to-pdf=*) out="${arg#*=}";; file:*) page="$arg";;'
        " esac; done\n"
        f"{body}\n"
    )
    script.chmod(0o755)
    return script


def _parts(tmp_path: Path, count: int) -> tuple[list[Path], Path]:
    pages = []
    for n in range(count):
        pages.append(tmp_path / f"part-{n}.html")
        pages[-1].write_text(f"<p>part {n}</p>")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"previous report")
    return pages, out / "report.pdf"


def _alive(pid: int) -> bool:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


def _failed_print(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str, parts: int, timeout_s: float
) -> tuple[str, float]:
    """Print ``parts`` pages with a fake Chromium running ``body``, which must fail: its
    one-line message and how long it took, once checked that every fake Chromium is gone
    and that the previous PDF is still there, alone."""
    monkeypatch.setenv(CHROMIUM_ENV, str(_fake_chromium(tmp_path, body)))
    pages, pdf = _parts(tmp_path, parts)
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem) as excinfo:
        htmls_to_pdf(pages, pdf, timeout_s=timeout_s)
    took = time.monotonic() - started
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert pids and not any(_alive(p) for p in pids)  # (one may be stopped before it notes)
    assert [p.name for p in pdf.parent.iterdir()] == ["report.pdf"]
    assert pdf.read_bytes() == b"previous report"
    assert "\n" not in excinfo.value.message
    return excinfo.value.message, took


def _hang_but(part: int, action: str) -> str:
    """A fake Chromium's body: part ``part`` does ``action``, every other part hangs."""
    return f'case "$page" in\n  *part-{part}.html) {action};;\nesac\nexec sleep 600'


def test_one_part_failing_stops_the_others_at_once_and_leaves_no_pdf(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    body = _hang_but(1, "echo '[1:1:1124/0600.1:FATAL:renderer.cc:7] renderer crashed' >&2; "
                        "exit 6")
    message, took = _failed_print(monkeypatch, tmp_path, body, 3, timeout_s=60)
    assert message == (
        f"Chromium could not print {tmp_path} to PDF: part 2 of 3: exit status 6: "
        "renderer crashed"
    )
    assert took < 30  # at once, not after the others' time ran out


def test_parts_that_do_not_finish_in_time_are_all_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    quick_then_hang = _hang_but(0, """printf '%%PDF-1.4\\n%%%%EOF\\n' > "$out"; exit 0""")
    message, _ = _failed_print(monkeypatch, tmp_path, quick_then_hang, 2, timeout_s=1)
    assert message.endswith("did not finish within 1 s and was stopped")


def test_parts_that_cannot_be_joined_leave_no_pdf_and_say_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # each part a "complete" PDF by its header and end marker, but not one a reader takes
    garbage = """printf '%%PDF-1.4\\ngarbage\\n%%%%EOF\\n' > "$out" """
    message, _ = _failed_print(monkeypatch, tmp_path, garbage, 2, timeout_s=60)
    pdf = tmp_path / "out" / "report.pdf"
    assert re.match(rf"the 2 parts Chromium printed could not be joined into {pdf}: \w+", message)
