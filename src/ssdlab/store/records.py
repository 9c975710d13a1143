"""The store's typed records (what callers hand in, what ``Store.load`` returns) and the
helpers that encode them and build them from rows.

What a run hands in: :class:`RunHead` (a new run), :class:`TestState` (a test's status,
parameters, verdicts and result), :class:`RoundRecord` (a round), a step's or an event's
detail. The documents among them (the plan, the params, each verdict, the result, each
cell, a detail) are :class:`~ssdlab.jsonrecord.Record` s, written as their ``to_json()``;
only an event's detail may be a :data:`~ssdlab.jsonrecord.JsonObject` instead, for a
document kept verbatim (the emulated SSD's own statistics). The target and host are
facts (JSON objects shown as key/value).

What a read gives back keeps each stored document as it is (a dict); the typed views
(``test.params_as(T)``, ``test.verdict_as(name, T)``, ``rnd.cells_as(T)``,
``run.plan_as(T)``, ``detail_as(T)``) read one as the record type ``T``, which keeps the
document's own key order and the keys ``T`` does not know, so that it writes back exactly.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ssdlab.jsonrecord import JsonObject, JsonValue, Record
from ssdlab.store.masking import mask_argv, mask_json, mask_text

if TYPE_CHECKING:
    from ssdlab.store.backend import Conn

#: a stored document as read (the typed views read it as a record); transitional: the
#: readers still index it, until they read it typed (issue 31)
JSONDict = dict[str, Any]
_SURROGATE = re.compile("[\ud800-\udfff]")
R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class RunHead:
    """What a run records when it starts (``Store.new_run``): its suite, profile and
    quick, the target and host as facts (JSON objects, shown as key/value), its plan,
    the versions of what it runs, and its command line."""

    suite: str
    profile: str
    quick: bool
    target: Mapping[str, object]
    host: Mapping[str, object]
    plan: Record
    versions: Mapping[str, str]
    argv: Sequence[str]


@dataclass(frozen=True)
class NoResult(Record):
    """The result of a test that has none yet (a running test's): stored as ``{}``."""


@dataclass(frozen=True)
class TestState:
    """A test as stored (``Store.set_test``): its status, parameters, verdicts by name
    (a record each, or a JSON value a suite declares so: matrix's list of outliers) and
    result (none yet: :class:`NoResult`)."""

    __test__ = False  # not a pytest test class

    status: str
    params: Record
    verdicts: Mapping[str, Record | JsonValue] = field(default_factory=dict)
    result: Record = field(default_factory=NoResult)

    def documents(self) -> tuple[JsonObject, JsonObject, JsonObject]:
        """The params, verdicts and result as the store writes them."""
        verdicts: JsonObject = {name: v.to_json() if isinstance(v, Record) else v
                                for name, v in self.verdicts.items()}
        return self.params.to_json(), verdicts, self.result.to_json()


@dataclass(frozen=True)
class ReferenceTest:
    """One test of an imported reference run (``Store.import_reference_run``)."""

    name: str
    state: TestState


@dataclass(frozen=True)
class RoundRecord:
    """One measurement round (``Store.add_round``): its number and status ("ok" or
    "failed"), the tracking variables' values, its cells, its fio invocation and times."""

    round_no: int
    status: str
    tracking: Mapping[str, float]
    cells: Sequence[Record]
    fio: FioRecord | None
    started_at: float
    ended_at: float


@dataclass(frozen=True)
class FioRecord:
    """One fio invocation, kept verbatim (stdout is stored zlib-compressed)."""

    phase: str  # "precondition" | "round" | "purge" | ...
    job_text: str
    command: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    started_at: float  # unix seconds
    ended_at: float


@dataclass(frozen=True)
class RunSummary:
    """One line of ``ssdlab runs``: the run row without its tests' data."""

    run_id: str
    created_at: float
    finished_at: float | None
    suite: str
    profile: str
    quick: bool
    status: str  # "running" | "complete" | "interrupted" | "failed"
    target_path: str
    target_model: str | None
    tests: tuple[str, ...]  # in the order they were first recorded
    message: str
    read_only: bool  # imported reference runs are read-only


@dataclass(frozen=True)
class FioData:
    """A stored fio invocation as loaded; ``stdout`` is None unless loaded with raw data."""

    phase: str
    job_text: str
    command: tuple[str, ...]
    returncode: int
    stderr: str
    started_at: float
    ended_at: float
    stdout_bytes: int  # size of the uncompressed stdout (UTF-8)
    stdout: str | None = None


@dataclass(frozen=True)
class RoundData:
    """One measurement round of one test."""

    round_no: int
    status: str  # "ok" | "failed"
    tracking: dict[str, float]
    cells: list[JSONDict]
    started_at: float
    ended_at: float
    job_text: str | None  # None when the round had no fio invocation
    fio_returncode: int | None
    stderr: str | None
    stdout: str | None = None  # only when loaded with_raw
    command: tuple[str, ...] = ()

    def cells_as(self, record: type[R]) -> list[R]:
        """The round's cells read as ``record`` (StoredDataError when one does not fit)."""
        return [record.from_json(c, f"round {self.round_no} cells[{i}]")
                for i, c in enumerate(self.cells)]


@dataclass(frozen=True)
class StepData:
    """A purge / precondition / other non-round step of a test."""

    test: str
    kind: str
    detail: JSONDict
    created_at: float
    fio: FioData | None

    def detail_as(self, record: type[R]) -> R:
        return record.from_json(self.detail, f"{self.kind} step of {self.test}")


@dataclass(frozen=True)
class EventData:
    """Something worth telling: purge outcome, preconditioning, a skipped cell, a warning."""

    test: str | None
    kind: str
    message: str
    detail: JSONDict | None
    created_at: float

    def detail_as(self, record: type[R]) -> R | None:
        """The detail read as ``record``; None for an event without one."""
        where = f"{self.kind} event" + (f" of {self.test}" if self.test else "")
        return None if self.detail is None else record.from_json(self.detail, where)


@dataclass(frozen=True)
class TestData:
    """One test of a run with its rounds and steps."""

    name: str
    status: str
    params: JSONDict
    verdicts: JSONDict
    result: JSONDict
    rounds: list[RoundData] = field(default_factory=list)
    steps: list[StepData] = field(default_factory=list)

    def params_as(self, record: type[R]) -> R:
        return record.from_json(self.params, f"test {self.name} params")

    def result_as(self, record: type[R]) -> R:
        return record.from_json(self.result, f"test {self.name} result")

    def verdict_as(self, name: str, record: type[R]) -> R | None:
        """The verdict ``name`` read as ``record``; None when the test has none so named."""
        found = self.verdicts.get(name)
        return None if found is None else record.from_json(
            found, f"test {self.name} verdict {name}")


@dataclass(frozen=True)
class RunData:
    """A whole run as stored."""

    run_id: str
    created_at: float
    finished_at: float | None
    suite: str
    profile: str
    quick: bool
    status: str
    message: str
    target_path: str
    target_model: str | None
    read_only: bool
    target: JSONDict
    host: JSONDict
    plan: JSONDict
    versions: JSONDict
    argv: list[str]
    tests: list[TestData] = field(default_factory=list)
    events: list[EventData] = field(default_factory=list)
    steps: list[StepData] = field(default_factory=list)  # all tests' steps, in order
    set_id: str | None = None  # the set it ran in (several targets at once), if any

    @property
    def status_text(self) -> str:
        """``complete``, or ``complete, 1 test(s) failed: iops``: the status and its note."""
        return f"{self.status}, {self.message}" if self.message else self.status

    def plan_as(self, record: type[R]) -> R:
        return record.from_json(self.plan, f"run {self.run_id} plan")

    def test(self, name: str) -> TestData:
        for test in self.tests:
            if test.name == name:
                return test
        raise KeyError(name)


@dataclass(frozen=True)
class SetData:
    """A set: several targets run at once by one command, each in a run of its own."""

    set_id: str
    created_at: float
    finished_at: float | None
    suite: str
    argv: list[str]
    targets: list[str]  # as given, in order
    detail: JSONDict  # what the set recorded when it ended (fio runs, host check, errors)
    runs: list[tuple[int, str]]  # (position among the targets, run id), in order


# -- encoding helpers (used by db.py) ------------------------------------------------


def dumps(value: object) -> str:
    """JSON text of a caller's JSON-able value (NaN/inf kept; export converts them)."""
    return json.dumps(value, ensure_ascii=True)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def encode_raw(text: str) -> bytes:
    """UTF-8, with lone surrogates (from undecodable output) kept: round-trips any str."""
    return text.encode("utf-8", "surrogatepass")


def compress(raw: bytes) -> bytes:
    return zlib.compress(raw, 6)


def decompress(blob: bytes | None) -> str | None:
    if blob is None:
        return None
    return zlib.decompress(blob).decode("utf-8", "surrogatepass")


def safe_text(text: str) -> str:
    """``text`` with each lone surrogate (undecodable byte) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


# -- row -> record (used by db.py) ---------------------------------------------------


def summary_from_row(row: Sequence[Any], tests: tuple[str, ...]) -> RunSummary:
    """A RunSummary from the ``_SUMMARY_COLS`` columns of a runs row."""
    return RunSummary(
        run_id=row[0],
        created_at=row[1],
        finished_at=row[2],
        suite=row[3],
        profile=row[4],
        quick=bool(row[5]),
        status=row[6],
        target_path=mask_text(row[7]),
        target_model=row[8],
        tests=tests,
        message=mask_text(row[9]),
        read_only=bool(row[10]),
    )


_FIO_COLS = (
    "f.phase, f.job_text, f.command_json, f.returncode, f.stderr, f.started_at,"
    " f.ended_at, f.stdout_bytes"
)


def _raw_col(with_raw: bool) -> str:
    return "f.stdout_z" if with_raw else "NULL"


def _fio(cols: Sequence[Any]) -> FioData | None:
    """FioData from ``_FIO_COLS`` + raw column (all NULL when there was no invocation)."""
    if cols[0] is None:
        return None
    return FioData(
        phase=cols[0],
        job_text=cols[1],
        command=tuple(loads(cols[2])),
        returncode=cols[3],
        stderr=cols[4],
        started_at=cols[5],
        ended_at=cols[6],
        stdout_bytes=cols[7],
        stdout=decompress(cols[8]),
    )


def _steps(conn: Conn, run_id: str, with_raw: bool) -> list[StepData]:
    sql = (
        f"SELECT s.test, s.kind, s.detail_json, s.created_at, {_FIO_COLS}, {_raw_col(with_raw)}"
        " FROM steps s LEFT JOIN fio_invocations f ON f.id = s.fio_id"
        " WHERE s.run_id = ? ORDER BY s.id"
    )
    return [
        StepData(test=r[0], kind=r[1], detail=loads(r[2]), created_at=r[3], fio=_fio(r[4:]))
        for r in conn.execute(sql, (run_id,))
    ]


def _round(r: Sequence[Any]) -> RoundData:
    fio = _fio(r[6:])
    return RoundData(
        round_no=r[0],
        status=r[1],
        tracking=loads(r[2]),
        cells=loads(r[3]),
        started_at=r[4],
        ended_at=r[5],
        job_text=None if fio is None else fio.job_text,
        fio_returncode=None if fio is None else fio.returncode,
        stderr=None if fio is None else fio.stderr,
        stdout=None if fio is None else fio.stdout,
        command=() if fio is None else fio.command,
    )


def _rounds(conn: Conn, run_id: str, with_raw: bool) -> dict[str, list[RoundData]]:
    sql = (
        "SELECT r.test, r.round_no, r.status, r.tracking_json, r.cells_json, r.started_at,"
        f" r.ended_at, {_FIO_COLS}, {_raw_col(with_raw)}"
        " FROM rounds r LEFT JOIN fio_invocations f ON f.id = r.fio_id"
        " WHERE r.run_id = ? ORDER BY r.test, r.round_no"
    )
    by_test: dict[str, list[RoundData]] = {}
    for r in conn.execute(sql, (run_id,)):
        by_test.setdefault(r[0], []).append(_round(r[1:]))
    return by_test


def _events(conn: Conn, run_id: str) -> list[EventData]:
    sql = (
        "SELECT test, kind, message, detail_json, created_at FROM events"
        " WHERE run_id = ? ORDER BY id"
    )
    return [
        EventData(test=r[0], kind=r[1], message=mask_text(r[2]), detail=mask_json(loads(r[3])),
                  created_at=r[4])
        for r in conn.execute(sql, (run_id,))
    ]


def load_run(conn: Conn, row: Sequence[Any], *, with_raw: bool) -> RunData:
    """The whole run whose runs row (summary columns + five JSON columns) is ``row``."""
    summary = summary_from_row(row, ())
    steps = _steps(conn, summary.run_id, with_raw)
    rounds = _rounds(conn, summary.run_id, with_raw)
    sql = (
        "SELECT name, status, params_json, verdicts_json, result_json FROM tests"
        " WHERE run_id = ? ORDER BY id"
    )
    tests = [
        TestData(
            name=t[0],
            status=t[1],
            params=loads(t[2]),
            verdicts=loads(t[3]),
            result=loads(t[4]),
            rounds=rounds.get(t[0], []),
            steps=[s for s in steps if s.test == t[0]],
        )
        for t in conn.execute(sql, (summary.run_id,))
    ]
    fields = {k: v for k, v in vars(summary).items() if k != "tests"}
    return RunData(
        **fields,
        target=mask_json(loads(row[11])),
        host=mask_json(loads(row[12])),
        plan=mask_json(loads(row[13])),
        versions=loads(row[14]),
        argv=mask_argv(loads(row[15])),
        tests=tests,
        events=_events(conn, summary.run_id),
        steps=steps,
        set_id=_set_of(conn, summary.run_id),
    )


def _set_of(conn: Conn, run_id: str) -> str | None:
    row = conn.execute("SELECT set_id FROM set_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else str(row[0])


def insert_fio(c: Conn, run_id: str, fio: FioRecord | None) -> int | None:
    """Insert ``fio`` (stdout compressed) into fio_invocations; its id, None for None."""
    if fio is None:
        return None
    raw = encode_raw(fio.stdout)
    return c.insert_id(
        "INSERT INTO fio_invocations (run_id, phase, job_text, command_json, stdout_z,"
        " stdout_bytes, stderr, returncode, started_at, ended_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            fio.phase,
            safe_text(fio.job_text),
            dumps(list(fio.command)),
            compress(raw),
            len(raw),
            safe_text(fio.stderr),
            fio.returncode,
            fio.started_at,
            fio.ended_at,
        ),
    )
