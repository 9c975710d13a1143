"""Every document of the golden stores (tests/fixtures/store/record.sh) read as its record.

test_suite_results.py checks the results; this checks the rest of the store boundary:
each run's plan, each test's parameters and verdicts, each round's cells, each step's
and event's detail. A document reads as its record (plan/results.py, or the suite's own
that its SuiteSpec declares: ``params``, ``plan_type``, ``cells``, ``verdicts``,
``details``) and writes back byte for byte, both as read (the document's own keys and
order) and as a run builds it (every field in declared order): what a run stores now is
what it stored when the golden stores were recorded.

The steps and events the shared run code records (plan/results.py's STEP_DETAILS and
EVENT_DETAILS) are checked for every run. A suite's own documents are checked once the
suite declares its records: until then it is in PENDING, which may only shrink (a suite
there that declares records fails, so that it is taken out and checked).

The example suite of docs/adding-a-suite.md, which declares its records as a new suite
does, has its own golden store (example.sqlite): test_example_suite.py reads it with these
checks, with the suite registered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.hostbound import HostBoundVerdict
from ssdlab.analysis.numa import NumaCheck
from ssdlab.jsonrecord import JsonObject, Record, StoredDataError, is_json
from ssdlab.plan.op_sweep import OpSweepParams
from ssdlab.plan.pts import PtsParams
from ssdlab.plan.results import (
    EVENT_DETAILS,
    STEP_DETAILS,
    WARNING_DETAILS,
    FioCell,
    ProcessEvent,
    RoundParams,
    SteadyVerdict,
    StoredPlan,
    TestParams,
    Verdict,
)
from ssdlab.plan.suite import SuiteSpec
from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunData, RunHead, TestState
from ssdlab.store.schema import SCHEMA_VERSION
from ssdlab.suites import SUITES, find
from tests.support.golden import FIXTURES, STORES, load_golden_runs
from tests.support.records import ExampleCell, ExampleParams, ExamplePlan, fresh

#: the registered suites that do not declare their records yet (issue 31: WP3 the PTS
#: family and published, WP4 the other device suites, WP5 file presets, db and matrix).
#: It may only shrink: take a suite out when its SuiteSpec declares its records.
PENDING: frozenset[str] = frozenset()  # every registered suite declares them now


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RunData]]:
    yield load_golden_runs(tmp_path_factory)


def check_document(record: type[Record] | None, document: object, where: str) -> None:
    """``document`` reads as ``record`` and writes back byte for byte, as read and as
    built (None: a JSON value kept as it is)."""
    if record is None:
        assert is_json(document), f"{where}: not JSON"
        return
    read = record.from_json(document, where)
    text = json.dumps(document)
    assert json.dumps(read.to_json()) == text, f"{where}: as read"
    assert json.dumps(fresh(read).to_json()) == text, f"{where}: as built"


def check_warning(detail: object, spec: SuiteSpec[Any], where: str) -> None:
    """A warning's detail reads as the record of what it warns about: one the shared run
    code records (WARNING_DETAILS) or one of the suite's own."""
    candidates = [*WARNING_DETAILS, *(t for t in spec.details.values() if t is not None)]
    for record in candidates:
        with contextlib.suppress(AssertionError, StoredDataError):
            check_document(record, detail, where)
            return
    raise AssertionError(f"{where}: {detail!r} is none of {[t.__name__ for t in candidates]}")


def _declared(types: Mapping[str, type[Record] | None], name: str, where: str
              ) -> type[Record] | None:
    """The type ``types`` declares for ``name`` (or for "*": any other name)."""
    found = name if name in types else "*"
    assert found in types, where
    return types[found]


def _spec(name: str) -> SuiteSpec[Any]:
    suite = find(name)
    assert suite is not None, f"{name} is not registered"
    return suite.spec


def _declares(spec: SuiteSpec[Any]) -> bool:
    return bool(spec.params or spec.plan_type or spec.cells or spec.verdicts or spec.details)


def test_the_store_schema_is_version_2_and_the_golden_stores_are_at_1_and_2() -> None:
    """No stored shape changed (issue 31): the stores of both versions read (the
    fixture below loads every run of them)."""
    assert SCHEMA_VERSION == 2
    versions = set()
    for name in STORES:  # immutable: not even a WAL's shared memory is made beside it
        with closing(sqlite3.connect(f"file:{FIXTURES / name}?immutable=1", uri=True)) as c:
            versions.add(c.execute("PRAGMA user_version").fetchone()[0])
    assert versions == {1, 2}


def test_pending_names_only_registered_suites_that_declare_nothing() -> None:
    declared = sorted(name for name in PENDING if _declares(_spec(name)))
    assert not declared, f"these declare their records: take them out of PENDING: {declared}"


def test_the_shared_steps_and_events_are_their_records(golden_runs: list[RunData]) -> None:
    checked: set[str] = set()
    for run in golden_runs:
        checked |= check_shared_details(run)
    # what the golden stores hold of them (a kind recorded later has no golden document)
    assert checked >= {"purge", "precondition", "process", "health", "members",
                       "emulator-stats", "members-off"}


def check_shared_details(run: RunData) -> set[str]:
    """The steps and events of ``run`` that the shared run code records (the kinds its
    suite does not declare itself) read as their records; the kinds checked."""
    suite = find(run.suite)
    own = suite.spec.details if suite is not None else {}
    checked = set()
    for step in run.steps:
        if step.kind in STEP_DETAILS and step.kind not in own:
            check_document(STEP_DETAILS[step.kind], step.detail, f"{run.suite} {step.kind} step")
            checked.add(step.kind)
    for event in run.events:
        if event.kind in EVENT_DETAILS and event.kind not in own:
            check_document(EVENT_DETAILS[event.kind], event.detail,
                           f"{run.suite} {event.kind} event")
            checked.add(event.kind)
    return checked


def test_every_declared_suites_documents_are_its_records(golden_runs: list[RunData]) -> None:
    declared = {suite.name for suite in SUITES} - PENDING
    checked = set()
    for run in golden_runs:
        if run.suite in declared:
            check_suite_documents(run, _spec(run.suite))
            checked.add(run.suite)
    assert checked == declared, f"no golden run of {sorted(declared - checked)}"


def check_suite_documents(run: RunData, spec: SuiteSpec[Any]) -> None:
    """Every document of ``run`` reads as the record ``spec`` declares for it."""
    assert spec.plan_type is not None, f"{run.suite} declares no plan record"
    check_document(spec.plan_type, run.plan, f"{run.suite} plan")
    for test in run.tests:
        where = f"{run.suite} {test.name}"
        params = _declared(spec.params, test.name, f"{where}: no params record")
        check_document(params, test.params, f"{where} params")
        for name, verdict in test.verdicts.items():
            record = _declared(spec.verdicts, name, f"{where}: no record for verdict {name}")
            check_document(record, verdict, f"{where} verdict {name}")
        for rnd in test.rounds:
            for i, cell in enumerate(rnd.cells):
                assert spec.cells is not None, f"{where}: no cells record"
                check_document(spec.cells, cell, f"{where} round {rnd.round_no} cells[{i}]")
    for kind, detail in [(s.kind, s.detail) for s in run.steps] + [
            (e.kind, e.detail) for e in run.events]:
        if detail is None or (kind not in spec.details and (
                kind in STEP_DETAILS or kind in EVENT_DETAILS)):
            continue  # none, or a shared kind's (the test of the shared ones)
        if kind == "warning" and kind not in spec.details:
            check_warning(detail, spec, f"{run.suite} warning")
            continue
        assert kind in spec.details, f"{run.suite}: no record for the detail of {kind}"
        check_document(spec.details[kind], detail, f"{run.suite} {kind}")


# -- the check itself, on a run written through the store's typed API ---------------------


@dataclass(frozen=True)
class _PlanOtherOrder(StoredPlan):
    tests: tuple[str, ...] = ()
    args: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class _Wait(Record):
    seconds: float = 0.0
    waited_s: float = 0.0


_SPEC = dataclasses.replace(SUITES[0].spec, params={"*": ExampleParams},
                            plan_type=ExamplePlan, cells=ExampleCell,
                            verdicts={"primary": Verdict, "outliers": None},
                            details={"wait": _Wait})


@pytest.fixture
def typed_run(tmp_path: Path) -> RunData:
    with Store.open(tmp_path / "results.sqlite") as store:
        run_id = store.new_run(RunHead(_SPEC.name, "default", False, {"path": "/dev/x"}, {},
                                       ExamplePlan(_SPEC.name, {"size": "1G"}, ("t",)),
                                       {"ssdlab": "0"}, ["ssdlab", "run"]))
        store.add_event(run_id, None, "process", "running", ProcessEvent(7, "h", "b"))
        store.set_test(run_id, "t", TestState("complete", ExampleParams("T", 4096),
                                              {"primary": Verdict("fine"), "outliers": []}))
        cell = ExampleCell("c", 4096, 0, "random", 1, 4, iops=10.0, written_bytes=8)
        store.add_round(run_id, "t", RoundRecord(1, "ok", {"iops": 10.0}, [cell], None,
                                                 1.0, 2.0))
        store.add_step(run_id, "t", "wait", _Wait(1.0, 1.5), None)
        return store.load(run_id)


def test_a_run_of_declared_records_passes_the_check(typed_run: RunData) -> None:
    check_suite_documents(typed_run, _SPEC)
    assert typed_run.plan == {"suite": _SPEC.name, "args": {"size": "1G"}, "tests": ["t"]}
    assert typed_run.tests[0].rounds[0].cells[0]["written_bytes"] == 8


def test_the_stores_own_resumed_event_is_its_record(tmp_path: Path) -> None:
    """``ssdlab resume`` reopens a run with a ``resumed`` event (store/db.py): its detail
    reads as the shared record (a multi-host run resumed in the VM lab showed it had
    none)."""
    with Store.open(tmp_path / "results.sqlite") as store:
        run_id = store.new_run(RunHead(_SPEC.name, "default", False, {"path": "/dev/x"}, {},
                                       ExamplePlan(_SPEC.name, {"size": "1G"}, ("t",)),
                                       {"ssdlab": "0"}, ["ssdlab", "run"]))
        store.finish_run(run_id, "interrupted", "stopped")
        store.reopen_run(run_id, ["ssdlab", "resume", run_id])
        run = store.load(run_id)
    assert check_shared_details(run) == {"resumed"}


@pytest.mark.parametrize(("detail", "passes"), [
    ({"after_round": 3, "idle_s": 12.5}, True),  # ResumedAfter (pts: resumed)
    ({"why": "the drive is smaller than asked"}, True),  # Reason
    ({"after": 3}, False),
])
def test_a_warnings_detail_is_one_of_the_warning_records(detail: JsonObject,
                                                         passes: bool) -> None:
    if passes:
        check_warning(detail, _SPEC, "pts warning")
    else:
        with pytest.raises(AssertionError, match="is none of"):
            check_warning(detail, _SPEC, "pts warning")


@pytest.mark.parametrize(("change", "message"), [
    ({"plan_type": _PlanOtherOrder}, "plan: as built"),
    ({"plan_type": None}, "declares no plan record"),
    ({"params": {}}, "no params record"),
    ({"cells": None}, "no cells record"),
    ({"verdicts": {"other": Verdict}}, "no record for verdict primary"),
    ({"verdicts": {"*": Verdict}}, "verdict outliers: expected a JSON object"),
    ({"details": {}}, "no record for the detail of wait"),
    ({"details": {"wait": ExampleParams}}, "wait: as built"),
])
def test_the_check_finds_a_document_that_is_not_its_declared_record(
        typed_run: RunData, change: dict[str, Any], message: str) -> None:
    with pytest.raises((AssertionError, StoredDataError), match=message):
        check_suite_documents(typed_run, dataclasses.replace(_SPEC, **change))


# -- the shared records (plan/results.py) against the golden documents --------------------


#: the verdicts of each suite that are the shared ones, by name ("*": any other name)
SHARED_VERDICTS: dict[str, dict[str, type[Record] | None]] = {
    "pts": {"*": SteadyVerdict},
    "latency-iops": {"host_bound": HostBoundVerdict, "numa": NumaCheck},
    "peak": {"primary": Verdict, "host_bound": HostBoundVerdict},
    "curves": {"*": Verdict},
    **{name: {"primary": Verdict} for name in (
        "op-sweep", "verify", "slc-probe", "cdm", "atto", "iometer", "replay", "db")},
}


def test_every_test_params_reads_as_the_shared_params(golden_runs: list[RunData]) -> None:
    shared: dict[str, type[RoundParams]] = {"pts": PtsParams, "op-sweep": OpSweepParams}
    seen = set()
    for run in golden_runs:
        for test in run.tests:
            where = f"{run.suite} {test.name} params"
            read = TestParams.from_json(test.params, where)
            assert json.dumps(read.to_json()) == json.dumps(test.params), where
            assert read.title == test.params.get("title", ""), where
            if run.suite in shared:
                check_document(shared[run.suite], test.params, where)
                seen.add(run.suite)
    assert seen == set(shared)


def test_the_shared_verdicts_are_the_stored_ones(golden_runs: list[RunData]) -> None:
    seen = set()
    for run in golden_runs:
        shared = SHARED_VERDICTS.get(run.suite, {})
        for test in run.tests:
            for name, verdict in test.verdicts.items():
                if name in shared or "*" in shared:
                    record = _declared(shared, name, name)
                    check_document(record, verdict, f"{run.suite} {test.name} {name}")
                    seen.add(run.suite)
    assert seen == set(SHARED_VERDICTS)


def test_every_fio_measured_cell_starts_with_the_fio_cells_keys(
        golden_runs: list[RunData]) -> None:
    """A stored cell fio measured has FioCell's keys first, in its order (the suite's own
    after them: its record derives from FioCell); PTS's have nothing else."""
    keys = list(FioCell("").to_json())
    suites = set()
    for run in golden_runs:
        for test in run.tests:
            for rnd in test.rounds:
                for cell in rnd.cells:
                    if "runtime_ms" not in cell:
                        continue  # not measured by fio (a wait, a database's, a copy's)
                    where = f"{run.suite} {test.name} round {rnd.round_no}"
                    assert list(cell)[:len(keys)] == keys, where
                    if run.suite == "pts":
                        check_document(FioCell, cell, where)
                    suites.add(run.suite)
    assert suites == {"pts", "op-sweep", "latency-iops", "saturation", "cdm", "atto",
                      "iometer", "curves", "replay", "peak"}


def test_every_runs_plan_starts_with_its_suite(golden_runs: list[RunData]) -> None:
    for run in golden_runs:
        if run.read_only:
            assert "suite" not in run.plan  # a published run's: its source
            continue
        assert next(iter(run.plan)) == "suite"
        assert run.plan_as(StoredPlan).suite == run.suite
