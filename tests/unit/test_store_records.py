"""The store's typed API: what a run hands in as records (RunHead, TestState, RoundRecord,
a step's or an event's detail) is stored exactly as the JSON objects they stand for; the
typed views read a stored document as a record, keeping its keys, their order and the
keys the record does not know."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.jsonrecord import JsonObject, StoredDataError
from ssdlab.plan.results import (
    FioCell,
    PreconditionStep,
    ProcessEvent,
    SteadyVerdict,
    StoredPlan,
    Verdict,
)
from ssdlab.store.db import Store
from ssdlab.store.records import (
    FioRecord,
    ReferenceTest,
    RoundRecord,
    RunData,
    RunHead,
    TestState,
)
from tests.support.records import ExampleCell, ExampleParams, ExamplePlan, doc

TARGET = {"path": "/dev/loop7", "model": "Loop Device"}
VERSIONS = {"ssdlab": "0.1.0", "fio": "fio-3.36"}
ARGV = ["ssdlab", "run", "x", "--token", "s3cret"]
FIO = FioRecord("round", "[job]\n", ("fio", "-"), "{}", "", 0, 1.0, 2.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "results.sqlite") as opened:
        yield opened


def _typed(store: Store) -> str:
    run_id = store.new_run(RunHead("x", "quick", True, TARGET, {"host": "lab"},
                                   ExamplePlan("x", {"password": "p", "size": 1}, ("t",)),
                                   VERSIONS, ARGV))
    store.add_event(run_id, None, "process", "running", ProcessEvent(7, "lab", "b"))
    store.set_test(run_id, "t", TestState("running", ExampleParams("T", 4096)))
    store.add_step(run_id, "t", "precondition",
                   PreconditionStep(None, 131072, True, None, 1.5), FIO)
    cell = FioCell("c", 4096, 70, "random", 2, 8, iops=10.0)
    for n in (1, 2):
        store.add_round(run_id, "t", RoundRecord(n, "ok", {"iops": 10.0}, [cell], FIO,
                                                 n, n + 0.5))
    store.set_test(run_id, "t", TestState(
        "complete", ExampleParams("T", 4096), {"primary": Verdict("fine")},
        ExampleCell("c", iops=10.0, written_bytes=8)))
    return run_id


def _documents(store: Store) -> str:
    """The same run, handed in as the JSON objects the records stand for (read as records
    of no fields of their own, which write them back as they are; an event's detail as
    the object itself)."""
    run_id = store.new_run(RunHead(
        "x", "quick", True, TARGET, {"host": "lab"},
        doc({"suite": "x", "args": {"password": "p", "size": 1}, "tests": ["t"]}),
        VERSIONS, ARGV))
    store.add_event(run_id, None, "process", "running",
                    {"pid": 7, "host": "lab", "boot_id": "b"})
    store.set_test(run_id, "t", TestState("running", doc({"title": "T", "block_bytes": 4096})))
    store.add_step(run_id, "t", "precondition", doc({"io_bytes": None, "block_bytes": 131072,
                                                     "ok": True, "error": None,
                                                     "seconds": 1.5}), FIO)
    cell = FioCell("c", 4096, 70, "random", 2, 8, iops=10.0).to_json()
    for n in (1, 2):
        store.add_round(run_id, "t", RoundRecord(
            n, "ok", {"iops": 10.0}, [doc(cell)], FIO, n, n + 0.5))
    store.set_test(run_id, "t", TestState(
        "complete", doc({"title": "T", "block_bytes": 4096}),
        {"primary": doc({"message": "fine"})},
        doc(ExampleCell("c", iops=10.0, written_bytes=8).to_json())))
    return run_id


def _stored(store: Store, run_id: str) -> list[tuple[object, ...]]:
    """Every stored column of the run but its id and times."""
    c = store._conn
    return [
        *c.execute("SELECT suite, profile, quick, status, target_path, target_model,"
                   " target_json, host_json, plan_json, versions_json, argv_json FROM runs"
                   " WHERE id = ?", (run_id,)).fetchall(),
        *c.execute("SELECT name, status, params_json, verdicts_json, result_json FROM tests"
                   " WHERE run_id = ? ORDER BY id", (run_id,)).fetchall(),
        *c.execute("SELECT test, round_no, status, tracking_json, cells_json, started_at,"
                   " ended_at FROM rounds WHERE run_id = ? ORDER BY round_no",
                   (run_id,)).fetchall(),
        *c.execute("SELECT test, kind, detail_json FROM steps WHERE run_id = ? ORDER BY id",
                   (run_id,)).fetchall(),
        *c.execute("SELECT test, kind, message, detail_json FROM events WHERE run_id = ?"
                   " ORDER BY id", (run_id,)).fetchall(),
    ]


def test_records_are_stored_as_the_json_objects_they_stand_for(store: Store) -> None:
    typed, documents = _typed(store), _documents(store)
    assert _stored(store, typed) == _stored(store, documents)
    row = _stored(store, typed)[0]
    assert json.loads(str(row[8]))["args"]["password"] == "***"  # masked as a record too
    assert "s3cret" not in str(row[10])


def test_the_typed_views_read_what_was_stored(store: Store) -> None:
    run = store.load(_typed(store))
    assert run.plan_as(ExamplePlan) == ExamplePlan("x", {"password": "***", "size": 1}, ("t",))
    test = run.tests[0]
    assert test.params_as(ExampleParams) == ExampleParams("T", 4096)
    assert test.verdict_as("primary", Verdict) == Verdict("fine")
    assert test.verdict_as("v1.1", SteadyVerdict) is None
    assert test.result_as(ExampleCell).written_bytes == 8
    assert [c.iops for c in test.rounds[1].cells_as(FioCell)] == [10.0]
    assert test.steps[0].detail_as(PreconditionStep).block_bytes == 131072
    assert run.events[0].detail_as(ProcessEvent) == ProcessEvent(7, "lab", "b")


def test_a_view_keeps_the_documents_own_keys(store: Store) -> None:
    """A document written by an older or a newer ssdlab (fewer or more keys, another
    order) reads as the record and writes back exactly."""
    run_id = store.new_run(RunHead(
        "x", "p", False, TARGET, {}, doc({"tests": ["t"], "suite": "x", "new": {"k": 1}}),
        VERSIONS, []))
    params: JsonObject = {"block_bytes": 512, "future": True}  # no title, a key it lacks
    store.set_test(run_id, "t", TestState("complete", doc(params)))
    run = store.load(run_id)
    assert run.plan_as(ExamplePlan).to_json() == run.plan
    assert list(run.plan_as(ExamplePlan).to_json()) == ["tests", "suite", "new"]
    read = run.tests[0].params_as(ExampleParams)
    assert (read.title, read.block_bytes) == ("", 512)
    assert json.dumps(read.to_json()) == json.dumps(params)


def _stored_tests(run: RunData) -> list[tuple[str, str, object, object, object]]:
    return [(t.name, t.status, t.params, t.verdicts, t.result) for t in run.tests]


def test_a_reference_run_is_imported_from_records_as_from_json_objects(store: Store) -> None:
    head = RunHead("published", "reference", False, {"path": "review"}, {},
                   doc({"source_file": "r.csv"}), {"ssdlab": "0"}, ["ssdlab", "import"])
    typed = store.import_reference_run(
        head, [ReferenceTest("iops", TestState("published", ExampleParams("IOPS", 4096), {},
                                               ExampleCell("c")))], status="reference")
    documents = store.import_reference_run(
        head, [ReferenceTest("iops", TestState(
            "published", doc({"title": "IOPS", "block_bytes": 4096}), {},
            doc(ExampleCell("c").to_json())))], status="reference")
    assert _stored(store, typed) == _stored(store, documents)
    loaded = store.load(typed)
    assert loaded.read_only and loaded.status == "reference" and not loaded.quick
    assert _stored_tests(loaded) == _stored_tests(store.load(documents))


def test_a_document_that_is_not_the_record_is_one_line_naming_where(store: Store) -> None:
    run_id = store.new_run(RunHead("x", "p", False, TARGET, {}, doc({"suite": 3}), VERSIONS, []))
    store.set_test(run_id, "t", TestState("complete", doc({"block_bytes": "big"})))
    run = store.load(run_id)
    with pytest.raises(StoredDataError, match=rf"run {run_id} plan\.suite: expected text"):
        run.plan_as(StoredPlan)
    with pytest.raises(StoredDataError, match=r"test t params\.block_bytes: expected a whole"):
        run.tests[0].params_as(ExampleParams)


def test_a_round_record_is_checked_as_the_keyword_form_was(store: Store) -> None:
    run_id = _typed(store)
    with pytest.raises(ValueError, match="round status must be one of"):
        store.add_round(run_id, "t", RoundRecord(3, "done", {}, [], None, 1.0, 2.0))
    with pytest.raises(ValueError, match=rf"round 1 of t in run {run_id} is already stored"):
        store.add_round(run_id, "t", RoundRecord(1, "ok", {}, [], None, 1.0, 2.0))


def test_a_set_records_its_detail_as_a_record(store: Store) -> None:
    set_id = store.new_set(suite="x", argv=["ssdlab"], targets=["/dev/a"])
    store.finish_set(set_id, Verdict("2 runs"))
    assert store.load_set(set_id).detail == {"message": "2 runs"}
