"""Every suite's typed result against the golden store (tests/fixtures/store/record.sh):
one run of every suite recorded by real fio before the results were typed.

* The JSON export of every stored run is byte for byte what the recording ssdlab wrote,
  although it now goes through the suites' typed records.
* Every stored result reads as its suite's record, and writes back exactly: read from the
  store (the document's own keys) and as a run builds it (every field, in the declared
  order): what a run stores now is what it stored before.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator

import pytest

from ssdlab.jsonrecord import Record
from ssdlab.store.export import write_export
from ssdlab.store.records import RunData
from ssdlab.suites import find, result_json, result_type
from tests.support.golden import FIXTURES, load_golden_runs


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RunData]]:
    yield load_golden_runs(tmp_path_factory)


def test_the_golden_store_has_a_run_of_every_runnable_suite(golden_runs: list[RunData]
                                                             ) -> None:
    from ssdlab.suites import runnable
    stored = {run.suite for run in golden_runs}
    assert {s.name for s in runnable()} <= stored
    assert "published" in stored


def test_the_export_of_every_golden_run_is_unchanged(golden_runs: list[RunData]) -> None:
    for run in golden_runs:
        out = io.StringIO()
        write_export(run, "json", out, result_json)
        expected = (FIXTURES / f"{run.run_id}.json").read_text(encoding="utf-8")
        assert out.getvalue() == expected, f"{run.suite} run {run.run_id}"


def _fresh(record: Record) -> Record:
    """The record as a run builds it: the same values, nothing remembered of a document."""
    values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.init}
    return type(record)(**{k: _fresh(v) if isinstance(v, Record) else
                           [_fresh(x) if isinstance(x, Record) else x for x in v]
                           if isinstance(v, list) else v for k, v in values.items()})


def test_every_stored_result_is_its_suites_record(golden_runs: list[RunData]) -> None:
    typed = 0
    for run in golden_runs:
        suite = find(run.suite)
        if suite is None:
            continue  # not yet in the registry
        for test in run.tests:
            record = result_type(run, test)
            assert record is not None, f"{run.suite} has no result type for {test.name}"
            read = record.from_json(test.result)
            document = json.dumps(test.result)
            assert json.dumps(read.to_json()) == document, f"{run.suite} {test.name}"
            assert json.dumps(_fresh(read).to_json()) == document, f"{run.suite} {test.name}"
            typed += 1
    assert typed > 0


def test_every_suites_show_reads_right(golden_runs: list[RunData]) -> None:
    """`ssdlab show` of every suite: no missing value printed as None, and the PTS line
    (rule, round window, seconds per cell) only for tests judged by a steady-state rule
    (an SLC-probe run once printed "(--round window)" and "None s per cell")."""
    from ssdlab.report.terminal import render_run
    for run in golden_runs:
        shown = render_run(run)
        assert shown.splitlines()[0].startswith(f"run {run.run_id}  suite {run.suite}  ")
        assert "None" not in shown, f"{run.suite}: {shown}"
        assert "(-" not in shown and "--round" not in shown, f"{run.suite}: {shown}"
        judged = any(isinstance(test.params.get("window"), int) for test in run.tests)
        assert ("round window" in shown) == judged, f"{run.suite}: {shown}"
