"""Published review results: read a results file and store it as read-only reference runs.

The file is CSV with the header :data:`COLUMNS` (docs/reference-data.md). Every row is
validated before anything is written; the first bad value is a one-line UserError naming
the file, the line and the value. Rows are grouped into one reference run per (source,
device), and mapped to tests shaped like ssdlab's own (``iops``, ``throughput-128k``,
...), so reports can show a measured drive beside reviewed ones. Rows no ssdlab test
holds go, unchanged, to a test named ``published``: nothing in the file is dropped.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ssdlab import __version__
from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan.results import CellData, TestParams
from ssdlab.plan.specs import KIB, block_label, cell_name
from ssdlab.plan.suite import SuiteSpec, TargetKind
from ssdlab.store.db import Store
from ssdlab.store.records import ReferenceTest as StoredTest
from ssdlab.store.records import RunHead, TestState

COLUMNS = (
    "source",
    "device",
    "capacity_gb",
    "test",
    "block_kib",
    "read_pct",
    "threads",
    "queue_depth",
    "active_range_pct",
    "metric",
    "value",
    "notes",
)
SUITE = "published"
PROFILE = "reference"
RUN_STATUS = "reference"
TEST_STATUS = "published"
MIB = 2**20


@dataclass(frozen=True)
class PublishedRow:
    """One validated row of a published-results file."""

    line: int
    source: str  # the document the figure was published in
    device: str
    capacity_gb: float  # decimal GB
    test: str  # pts_iops, pts_throughput, pts_write_saturation, ... or anything else
    block_kib: float | None
    read_pct: int | None
    threads: int | None
    queue_depth: int | None
    active_range_pct: float | None
    metric: str
    value: float
    notes: str

    @property
    def block_bytes(self) -> int | None:
        return None if self.block_kib is None else int(self.block_kib * KIB)


@dataclass(frozen=True)
class PublishedCells(Record):
    """A PTS test's published figures: one cell each, as an ssdlab test's result cells."""

    cells: list[CellData] = field(default_factory=list)
    steady: bool = True
    published: bool = True


@dataclass(frozen=True)
class PublishedSaturation(Record):
    """Write saturation as published: IOPS fresh out of box and saturated (the keys in the
    order the file gives them)."""

    published: bool = True
    iops_fob: float | None = None
    iops_steady: float | None = None


@dataclass(frozen=True)
class PublishedFigure(Record):
    """A published figure no ssdlab test holds, as the file gives it."""

    test: str
    metric: str
    value: float
    block_kib: float | None
    read_pct: int | None
    threads: int | None
    queue_depth: int | None
    active_range_pct: float | None
    notes: str


@dataclass(frozen=True)
class PublishedRows(Record):
    rows: list[PublishedFigure] = field(default_factory=list)
    published: bool = True


@dataclass(frozen=True)
class PublishedPlan(Record):
    """A reference run's stored plan: where its figures come from (it has no suite)."""

    source_file: str = ""
    source_document: str = ""
    imported_rows: int = 0
    content_sha256: str = ""


@dataclass(frozen=True)
class PublishedParams(TestParams):
    """A PTS-shaped test's parameters: the load its rows share (None: they differ)."""

    threads: int | None = None
    iodepth: int | None = None
    active_range_pct: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PublishedSaturationParams(PublishedParams):
    block_bytes: int | None = None
    read_pct: int | None = None


SPEC: SuiteSpec[JsonObject] = SuiteSpec(
    name=SUITE,
    help="published review results, imported as read-only reference runs",
    description="Figures published by reviews (ssdlab import published FILE): PTS tests "
    "shaped like ssdlab's own, and every other figure as it was published.",
    target=TargetKind.DEVICE,
    options=(),
    args_type=dict,
    results={"iops": PublishedCells, "throughput": PublishedCells,
             "write-saturation": PublishedSaturation, "published": PublishedRows},
    report_title="published reference report",
    runnable=False,
    params={"write-saturation": PublishedSaturationParams, "published": TestParams,
            "*": PublishedParams}, plan_type=PublishedPlan,
)


@dataclass(frozen=True)
class ReferenceTest:
    """A test of a reference run, shaped like an ssdlab test (see docs/reference-data.md)."""

    name: str
    params: TestParams
    result: Record


@dataclass(frozen=True)
class ReferenceRun:
    """The rows of one (source, device) of a file, and the tests they map to."""

    source: str
    device: str
    capacity_gb: float
    rows: tuple[PublishedRow, ...]
    tests: tuple[ReferenceTest, ...]
    content_sha256: str  # of the rows' values: the same figures give the same hash

    def target(self) -> JsonObject:
        return {
            "path": f"published:{self.source}",
            "kind": "reference",
            "model": self.device,
            "capacity_bytes": int(self.capacity_gb * 1e9),
            "device_class": "reference",
        }

    def plan(self, source_file: str) -> PublishedPlan:
        return PublishedPlan(source_file, self.source, len(self.rows), self.content_sha256)


# -- parsing and validation ----------------------------------------------------------


class _Bad(ValueError):
    """A value that does not fit its column; the message completes "<column> 'v' ..."."""


def _show(value: str) -> str:
    shown = value if len(value) <= 40 else value[:37] + "..."
    return repr(shown)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Bad("is not a number") from None
    if not math.isfinite(value):
        raise _Bad("is not a number")
    return value


def _positive(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise _Bad("is not a number > 0")
    return value


def _required(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        if not text:
            raise _Bad("is empty")
        return parse(text)

    return check


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda text: parse(text) if text else None


def _text(text: str) -> str:
    return text


def _block_kib(text: str) -> float:
    value = _positive(text)
    if value * KIB != int(value * KIB):
        raise _Bad("is not a whole number of bytes in KiB (e.g. 0.5, 4, 128)")
    return value


def _read_pct(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise _Bad("is not a number 0-100") from None
    if not 0 <= value <= 100:
        raise _Bad("is not a number 0-100")
    if value != int(value):
        raise _Bad("is not a whole number 0-100")
    return int(value)


def _count(text: str) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise _Bad("is not a whole number >= 1")
    return int(text)


def _range_pct(text: str) -> float:
    value = _number(text)
    if not 0 < value <= 100:
        raise _Bad("is not a number > 0 and <= 100")
    return value


def _name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", text):
        raise _Bad("is not a name (a letter, then letters, digits or _)")
    return text


#: Column -> parser of its (stripped) text; the header must be exactly these columns.
PARSERS: dict[str, Callable[[str], Any]] = {
    "source": _required(_text),
    "device": _required(_text),
    "capacity_gb": _required(_positive),
    "test": _required(_name),
    "block_kib": _optional(_block_kib),
    "read_pct": _optional(_read_pct),
    "threads": _optional(_count),
    "queue_depth": _optional(_count),
    "active_range_pct": _optional(_range_pct),
    "metric": _required(_name),
    "value": _required(_number),
    "notes": _text,
}
assert tuple(PARSERS) == COLUMNS


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{name} line {line}: not UTF-8 text") from None


def _check_header(header: list[str] | None, name: str) -> None:
    if header is None:
        raise UserError(f"{name} is empty; expected the header {','.join(COLUMNS)}")
    got = [h.strip() for h in header]
    if got == list(COLUMNS):
        return
    for number, (have, want) in enumerate(zip(got, COLUMNS, strict=False), start=1):
        if have != want:
            raise UserError(
                f"{name} line 1: column {number} is {_show(have)}, expected {want!r} "
                f"(the header must be {','.join(COLUMNS)})"
            )
    raise UserError(
        f"{name} line 1: {len(got)} columns, expected {len(COLUMNS)} "
        f"(the header must be {','.join(COLUMNS)})"
    )


def _row(fields: list[str], name: str, line: int) -> PublishedRow:
    if len(fields) != len(COLUMNS):
        raise UserError(f"{name} line {line}: {len(fields)} fields, expected {len(COLUMNS)}")
    values: dict[str, Any] = {}
    for column, raw in zip(COLUMNS, fields, strict=True):
        text = raw.strip()
        try:
            values[column] = PARSERS[column](text)
        except _Bad as exc:
            raise UserError(f"{name} line {line}: {column} {_show(text)} {exc}") from None
    row = PublishedRow(line=line, **values)
    _check_test_row(row, name)
    return row


#: Metrics each mapped PTS test accepts (every other test keeps any metric).
TEST_METRICS = {
    "pts_iops": ("iops",),
    "pts_throughput": ("bw_mibps",),
    "pts_write_saturation": ("iops_fob", "iops_steady"),
}


def _check_test_row(row: PublishedRow, name: str) -> None:
    """What the tests mapped to ssdlab's own shapes need beyond each column's format."""
    where = f"{name} line {row.line}"
    metrics = TEST_METRICS.get(row.test)
    if metrics is None:
        return
    if row.metric not in metrics:
        allowed = " or ".join(repr(m) for m in metrics)
        raise UserError(f"{where}: metric {_show(row.metric)} for {row.test} must be {allowed}")
    if row.value < 0:
        raise UserError(f"{where}: value {row.value:g} for {row.metric} must be >= 0")
    if row.test == "pts_write_saturation":
        return
    if row.block_kib is None or row.read_pct is None:
        raise UserError(f"{where}: {row.test} needs block_kib and read_pct")
    if row.test == "pts_throughput":
        if row.read_pct not in (0, 100):
            raise UserError(f"{where}: read_pct {row.read_pct} for pts_throughput must be 100 or 0")
        if row.block_kib != int(row.block_kib):
            raise UserError(
                f"{where}: block_kib {row.block_kib:g} for pts_throughput must be whole"
            )


def parse_rows(text: str, name: str) -> list[PublishedRow]:
    """Every row of a published-results file, validated; UserError at the first bad one."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        _check_header(next(reader, None), name)
        start = reader.line_num + 1  # a quoted value may span lines: name the row's first
        for fields in reader:
            if fields:
                rows.append(_row(fields, name, start))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{name} line {reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        raise UserError(f"{name} has a header but no rows")
    return rows


# -- grouping and mapping --------------------------------------------------------------


def _common(values: Sequence[Any]) -> Any:
    """The value all rows share, None if they differ or have none."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _notes(rows: Sequence[PublishedRow]) -> list[str]:
    return list(dict.fromkeys(r.notes for r in rows if r.notes))


def _params(title: str, rows: Sequence[PublishedRow]) -> PublishedParams:
    return PublishedParams(title, _common([r.threads for r in rows]),
                           _common([r.queue_depth for r in rows]),
                           _common([r.active_range_pct for r in rows]), _notes(rows))


def _cell(test: str, row: PublishedRow, pattern: str) -> CellData:
    assert row.block_bytes is not None and row.read_pct is not None
    return {
        "cell": cell_name(test, row.block_bytes, row.read_pct),
        "block_bytes": row.block_bytes,
        "read_pct": row.read_pct,
        "pattern": pattern,
        "threads": row.threads,
        "iodepth": row.queue_depth,
    }


def _unique_cells(rows: Sequence[PublishedRow], name: str) -> None:
    seen: dict[tuple[int | None, int | None], int] = {}
    for row in rows:
        key = (row.block_bytes, row.read_pct)
        if key in seen:
            raise UserError(
                f"{name} line {row.line}: {row.test} {block_label(row.block_bytes or 0)} "
                f"read_pct {row.read_pct} for {row.device!r} is already on line {seen[key]}"
            )
        seen[key] = row.line


def _iops_test(rows: Sequence[PublishedRow], name: str) -> ReferenceTest:
    _unique_cells(rows, name)
    cells = [{**_cell("iops", r, "random"), "iops": r.value} for r in rows]
    return ReferenceTest("iops", _params("IOPS", rows), PublishedCells(cells))


def _throughput_tests(rows: Sequence[PublishedRow], name: str) -> list[ReferenceTest]:
    _unique_cells(rows, name)
    tests = []
    for kib in dict.fromkeys(int(r.block_kib or 0) for r in rows):
        mine = [r for r in rows if r.block_kib == kib]
        test = f"throughput-{kib}k"
        cells = [{**_cell(test, r, "sequential"), "bw_bytes_per_s": r.value * MIB} for r in mine]
        tests.append(ReferenceTest(test, _params(f"Throughput {kib} KiB", mine),
                                   PublishedCells(cells)))
    return tests


def _saturation_test(rows: Sequence[PublishedRow], name: str) -> ReferenceTest:
    result: JsonObject = {"published": True}
    for row in rows:
        if row.metric in result:
            raise UserError(
                f"{name} line {row.line}: {row.metric} for {row.device!r} is given twice"
            )
        result[row.metric] = row.value
    common = _params("Write saturation", rows)
    params = PublishedSaturationParams(
        common.title, common.threads, common.iodepth, common.active_range_pct, common.notes,
        _common([r.block_bytes for r in rows]), _common([r.read_pct for r in rows]))
    # checked as its record; the metrics stay in the order the file gives them
    return ReferenceTest("write-saturation", params, PublishedSaturation.from_json(result))


def _figure(row: PublishedRow) -> PublishedFigure:
    return PublishedFigure(row.test, row.metric, row.value, row.block_kib, row.read_pct,
                           row.threads, row.queue_depth, row.active_range_pct, row.notes)


def _other_test(rows: Sequence[PublishedRow]) -> ReferenceTest:
    result = PublishedRows([_figure(r) for r in rows])
    return ReferenceTest("published", TestParams("Other published figures"), result)


def _map_tests(rows: Sequence[PublishedRow], name: str) -> tuple[ReferenceTest, ...]:
    """The tests of one (source, device), in the order their rows first appear."""
    by_test: dict[str, list[PublishedRow]] = {}
    for row in rows:
        key = row.test if row.test in TEST_METRICS else "published"
        by_test.setdefault(key, []).append(row)
    tests: list[ReferenceTest] = []
    for key, mine in by_test.items():
        if key == "pts_iops":
            tests.append(_iops_test(mine, name))
        elif key == "pts_throughput":
            tests.extend(_throughput_tests(mine, name))
        elif key == "pts_write_saturation":
            tests.append(_saturation_test(mine, name))
        else:
            tests.append(_other_test(mine))
    return tuple(tests)


def _content_hash(rows: Sequence[PublishedRow]) -> str:
    """sha256 of the rows' values (not their line numbers), in a stable order."""
    values = sorted(
        json.dumps([v for k, v in vars(r).items() if k != "line"], sort_keys=True) for r in rows
    )
    return hashlib.sha256("\n".join(values).encode()).hexdigest()


def group_runs(rows: Sequence[PublishedRow], name: str) -> list[ReferenceRun]:
    """One reference run per (source, device), in the order they first appear."""
    groups: dict[tuple[str, str], list[PublishedRow]] = {}
    for row in rows:
        groups.setdefault((row.source, row.device), []).append(row)
    runs = []
    for (source, device), mine in groups.items():
        first = mine[0]
        for row in mine:
            if row.capacity_gb != first.capacity_gb:
                raise UserError(
                    f"{name} line {row.line}: capacity_gb {row.capacity_gb:g} for "
                    f"{device!r} differs from {first.capacity_gb:g} on line {first.line}"
                )
        runs.append(
            ReferenceRun(
                source=source,
                device=device,
                capacity_gb=first.capacity_gb,
                rows=tuple(mine),
                tests=_map_tests(mine, name),
                content_sha256=_content_hash(mine),
            )
        )
    return runs


def read_published(path: Path) -> list[ReferenceRun]:
    """The reference runs of a published-results file, all validated; UserError if not."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    name = path.name
    return group_runs(parse_rows(_decode(data, name), name), name)


# -- importing into the store ---------------------------------------------------------


@dataclass(frozen=True)
class ImportOutcome:
    run: ReferenceRun
    run_id: str
    created: bool  # False: the same figures were imported before, as ``run_id``


def import_runs(
    store: Store, runs: Sequence[ReferenceRun], source_file: str, argv: Sequence[str]
) -> list[ImportOutcome]:
    """Store each validated run not stored before, each in one transaction with its tests.

    A run whose figures are already in the store (same content hash) is not written again.
    """
    outcomes = []
    for run in runs:
        existing = store.find_reference_run(run.content_sha256)
        if existing is not None:
            outcomes.append(ImportOutcome(run, existing, created=False))
            continue
        # published figures are never a quick run's (stored as 0, as always)
        head = RunHead(SUITE, PROFILE, False, run.target(), {}, run.plan(source_file),
                       {"ssdlab": __version__}, list(argv))
        tests = [StoredTest(t.name, TestState(TEST_STATUS, t.params, {}, t.result))
                 for t in run.tests]
        run_id = store.import_reference_run(head, tests, status=RUN_STATUS)
        outcomes.append(ImportOutcome(run, run_id, created=True))
    return outcomes


def import_published(store: Store, path: Path, argv: Sequence[str]) -> list[ImportOutcome]:
    """Validate the whole file, then import it (:func:`import_runs`)."""
    return import_runs(store, read_published(path), Path(path).name, argv)
