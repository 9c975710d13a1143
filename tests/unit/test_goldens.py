"""What ssdlab prints and writes, byte for byte as recorded before issue 31's refactoring:
the reports, `show`, `runs`, `--print-config` and `--dry-run` of every runnable suite,
and the dashboard's JSON and metrics (tests/fixtures/golden/record.py says what each
golden is, how it is made, and the little that is normalised).

Every output is made again, the way the recorder made it, and compared with its file.
A difference means behaviour changed: find why; never re-record to make this pass. The
sanctioned differences are the reports' titles (issue 31, WP2): :data:`EXPECTED_TITLES`,
and what their covers say they hold: :data:`EXPECTED_COVERS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.golden import record

GOLDEN = record.HERE
#: the title every report but the database suite's has had
PTS_TITLE = "SNIA PTS report"
#: the reports' new titles (issue 31, WP2): "SNIA PTS report" in a golden report is
#: expected as this instead, in its <title> and its cover's <h1> and nowhere else. Keys:
#: a suite's name for the report of one run of it (report/RUN.html), "compare/NAME" for
#: a report of several runs (compare/NAME.html). Empty: every title as recorded.
EXPECTED_TITLES: dict[str, str] = {
    # each suite's report says what it is (the spec's report_title); pts and db as before
    "atto": "ATTO-like report",
    "cdm": "CrystalDiskMark-like report",
    "iometer": "IOmeter-like report",
    "aja": "AJA System Test-like report",
    "diskfill": "DiskFill-like report",
    "smallfiles": "small files report",
    "copy": "file copy report",
    "curves": "latency curves report",
    "latency-iops": "latency against IOPS report",
    "op-sweep": "over-provisioning sweep report",
    "peak": "peak IOPS report",
    "replay": "trace replay report",
    "saturation": "write saturation report",
    "slc-probe": "SLC cache probe report",
    "verify": "data integrity report",
    "matrix": "RAID matrix report",
    # a published reference run alone; compared with a PTS run it takes the PTS kind
    "published": "published reference report",
    # runs of suites with different kinds: a matrix with its PTS children, cdm + atto
    "compare/matrix": "comparison report",
    "compare/cdm-atto": "comparison report",
}

#: what every recorded report's cover said it holds, whatever its suite (issue 31)
PTS_COVER = "SNIA Solid State Storage Performance Test Specification pages per run"
#: what the covers say instead: the kinds of their runs' pages (each suite's
#: report_title, once each, in the runs' order); keys as :data:`EXPECTED_TITLES`'s
EXPECTED_COVERS: dict[str, str] = {
    # a report of one run: its suite's kind, its new title's (pts and db: their titles')
    "pts": f"Pages per run: {PTS_TITLE}",
    "db": "Pages per run: database benchmark report",
    **{key: f"Pages per run: {title}" for key, title in EXPECTED_TITLES.items()
       if not key.startswith("compare/")},
    "compare/pts-published": f"Pages per run: {PTS_TITLE}, published reference report",
    "compare/matrix": f"Pages per run: RAID matrix report, {PTS_TITLE}",
    "compare/cdm-atto": "Pages per run: CrystalDiskMark-like report, ATTO-like report",
}


def _params() -> list[object]:
    return [pytest.param(name, id=name,
                         marks=[getattr(pytest.mark, need) for need in record.needs(name)])
            for name in record.recorded()]


@pytest.fixture(scope="module")
def made() -> Iterator[dict[str, str]]:
    with record.workspace() as ws:
        yield record.outputs(ws)


def _suite_of(run_id: str) -> str:
    """A golden run's suite, from its JSON export beside the golden stores."""
    export = json.loads((record.STORES_DIR / f"{run_id}.json").read_text(encoding="utf-8"))
    return str(export["run"]["suite"])


def _title_key(name: str) -> str | None:
    kind, _, file = name.partition("/")
    stem = file.rsplit(".", 1)[0]
    if kind == "report":
        return _suite_of(stem)
    return f"compare/{stem}" if kind == "compare" else None


def titled(name: str, text: str, titles: dict[str, str] | None = None) -> str:
    """The golden ``text`` of ``name`` with its report title as :data:`EXPECTED_TITLES`
    (or ``titles``) expects it."""
    key = _title_key(name)
    title = (EXPECTED_TITLES if titles is None else titles).get(key or "")
    if title is None:
        return text

    def swap(match: re.Match[str]) -> str:
        return match.group(0).replace(PTS_TITLE, title)

    text, in_title = re.subn(r"<title>[^<]*</title>", swap, text, count=1)
    text, on_cover = re.subn(r'<section class="page" id="cover"><h1>[^<]*</h1>', swap, text,
                             count=1)
    assert in_title == on_cover == 1, f"{name}: no <title> or cover <h1>"
    return text


def covered(name: str, text: str) -> str:
    """The golden ``text`` of ``name`` with its cover saying what it holds as
    :data:`EXPECTED_COVERS` expects (the one sentence that says it)."""
    key = _title_key(name)
    if key is None:
        return text
    said = f"from the results store. {PTS_COVER};"
    assert text.count(PTS_COVER) == text.count(said) == 1, f"{name}: not one cover sentence"
    return text.replace(said, f"from the results store. {EXPECTED_COVERS[key]};")


def _first_difference(got: str, expected: str) -> str:
    """Where ``got`` first differs from ``expected``: line, column and both texts there."""
    at = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
              min(len(got), len(expected)))
    line = got.count("\n", 0, at) + 1
    return (f"line {line}, character {at - got.rfind(chr(10), 0, at)}:\n"
            f"  made:     {got[max(0, at - 60):at + 60]!r}\n"
            f"  recorded: {expected[max(0, at - 60):at + 60]!r}")


def test_every_output_is_recorded(made: dict[str, str]) -> None:
    """What is made now is what was recorded: no output lost, none new and unpinned
    (those that need what this machine lacks are not made, and skipped below)."""
    recorded = record.recorded()
    possible = {name for name in recorded if all(record.can(n) for n in record.needs(name))}
    assert set(made) - set(recorded) == set(), (
        "outputs without a golden (a suite registered since: record.py --new records them)")
    assert possible - set(made) == set(), "goldens no longer made"
    kinds = {name.split("/")[0] for name in recorded}
    assert kinds == set(record.KINDS)


@pytest.mark.parametrize("name", _params())
def test_the_output_is_as_recorded(name: str, made: dict[str, str]) -> None:
    expected = covered(name, titled(name, (GOLDEN / name).read_text(encoding="utf-8")))
    got = made[name]
    assert got == expected, f"{name} differs from its golden: {_first_difference(got, expected)}"


def test_a_new_title_replaces_the_old_in_the_title_and_on_the_cover_only() -> None:
    name = next(n for n in record.recorded()
                if n.startswith("report/") and _title_key(n) == "cdm")
    text = (GOLDEN / name).read_text(encoding="utf-8")
    assert text.count(PTS_TITLE) == 2
    swapped = titled(name, text, {"cdm": "CrystalDiskMark-like report"})
    assert swapped.count(PTS_TITLE) == 0
    assert "<title>t.img 1125-0726: CrystalDiskMark-like report</title>" in swapped
    assert swapped.replace("CrystalDiskMark-like report", PTS_TITLE) == text
    assert titled(name, text, {"atto": "ATTO-like report"}) == text
    compare = titled("compare/cdm-atto.html",
                     (GOLDEN / "compare/cdm-atto.html").read_text(encoding="utf-8"),
                     {"compare/cdm-atto": "comparison report"})
    assert "<h1>2 runs compared: comparison report</h1>" in compare


def test_the_recorder_does_not_overwrite_goldens_without_force() -> None:
    said: list[str] = []
    before = {name: (GOLDEN / name).stat().st_mtime_ns for name in record.recorded()}
    assert record.record(force=False, say=said.append) == 2
    assert "--force" in said[0]
    assert {name: (GOLDEN / name).stat().st_mtime_ns for name in record.recorded()} == before


def test_the_reports_have_their_titles_recorded() -> None:
    """The titles as recorded (before WP2): every report but the database suite's is
    titled "SNIA PTS report"."""
    titles = {}
    for name in record.recorded():
        if name.startswith(("report/", "compare/")):
            text = (GOLDEN / name).read_text(encoding="utf-8")
            found = re.search(r"<title>([^<]*)</title>", text)
            assert found is not None, name
            titles[name] = found.group(1)
    db = {n for n in titles if n.startswith("report/") and _title_key(n) == "db"}
    assert len(db) == 1 and titles[db.pop()].endswith(": database benchmark report")
    assert sum(t.endswith(f": {PTS_TITLE}") for t in titles.values()) == len(titles) - 1
    assert titles["compare/pts-published.html"] == f"7 runs compared: {PTS_TITLE}"


def test_golden_paths_are_normalised() -> None:
    """No golden names the machine it was recorded on: its work directories, loop
    devices made for the dry run, or the rendering time."""
    for name in record.recorded():
        text = (GOLDEN / name).read_text(encoding="utf-8")
        assert "ssdlab-golden-" not in text, name
        if name.startswith("dry-run/"):
            assert re.search(r"/dev/loop\d", text) is None, name
        if name.startswith(("report/", "compare/")):
            assert "Generated <stamp> by ssdlab <version> " in text, name


def test_the_golden_directory_holds_nothing_else() -> None:
    files = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert files == {"record.py", *record.recorded()}
    assert Path(record.__file__).resolve() == GOLDEN / "record.py"
