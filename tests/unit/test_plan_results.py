"""The shared records at the store's boundary (plan/results.py) write what the run code
writes today: the steady-state, host-bound and NUMA verdicts as the analysis' own
serialisers wrote them, a cell as run/cells.py writes it. (Against the golden stores'
documents: test_store_records_golden.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ssdlab.analysis.hostbound import (
    CpuPoint,
    HostBoundRule,
    HostBoundVerdict,
    HostCpuPoint,
    host_bound,
)
from ssdlab.analysis.numa import NumaCheck, numa_check
from ssdlab.analysis.steady import REVIEW_RULE, SNIA_RULE, evaluate, verdict_to_dict
from ssdlab.engine.parser import parse_fio_output
from ssdlab.jsonrecord import StoredDataError
from ssdlab.plan.results import (
    FioCell,
    LittleLaw,
    SteadyVerdict,
    StoredPlan,
    TestParams,
    Verdict,
)
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.run.cells import cell_from_job
from tests.support.records import fresh

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"


def _text(document: object) -> str:
    return json.dumps(document)


@pytest.mark.parametrize("series", [
    {"iops": [100.0, 101.0, 99.0, 100.0, 100.5, 100.2]},  # steady from round 1
    {"iops": [10.0, 50.0, 90.0, 130.0, 170.0], "bw": [1.0, 1.0, 1.0, 1.0, 1.0]},  # not
    {"iops": [1.0, math.nan, 1.0, 1.0, 1.0]},  # a non-finite value: stored as null
    {"iops": [1.0, 2.0]},  # too few rounds for a window
])
def test_a_steady_verdict_is_stored_as_verdict_to_dict_wrote_it(
        series: dict[str, list[float]]) -> None:
    for rule in (SNIA_RULE, REVIEW_RULE):
        verdict = evaluate(series, rule)
        record = SteadyVerdict.of(verdict)
        assert _text(record.to_json()) == _text(verdict_to_dict(verdict))
        assert _text(SteadyVerdict.from_json(record.to_json()).to_json()) == \
            _text(record.to_json())


def test_a_host_bound_verdict_is_stored_with_its_keys_in_order() -> None:
    curves = {
        "4 KiB 100/0, 1 thread": [CpuPoint(1, 1, 1000.0, 40.0), CpuPoint(1, 2, 1900.0, 95.0),
                                  CpuPoint(1, 4, 1920.0, 97.0)],
        "4 KiB 100/0, 2 threads": [CpuPoint(2, 1, 2000.0, None)],
    }
    for verdict in (host_bound(curves), host_bound({}), host_bound(curves, HostBoundRule(99))):
        assert list(verdict.to_json()) == ["host_bound", "rule", "findings", "peak", "message",
                                           "curves_checked"]
        assert HostBoundVerdict.from_json(verdict.to_json()) == verdict
    busy = host_bound(curves)
    stored = json.loads(_text(busy.to_json()))
    assert stored["rule"] == {"cpu_pct": 90.0, "max_rise_pct": 5.0}
    assert list(stored["findings"][0]) == ["curve", "threads", "iodepth", "host_cpu_pct",
                                           "iops_rise_pct", "reason"]
    assert stored["peak"] == {"curve": "4 KiB 100/0, 1 thread", "threads": 1, "iodepth": 4,
                              "host_cpu_pct": 97.0}
    assert stored["curves_checked"] == list(curves)
    finding = busy.findings[0]
    assert (finding.curve, finding.threads, finding.iodepth, finding.host_cpu_pct) == (
        "4 KiB 100/0, 1 thread", 1, 4, 97.0)
    assert busy.peak == HostCpuPoint("4 KiB 100/0, 1 thread", 1, 4, 97.0)


@pytest.mark.parametrize(("node", "nodes"), [
    (0, {0: frozenset({0, 1}), 1: frozenset({2, 3})}),
    (1, {0: frozenset({0, 1}), 1: frozenset({2, 3})}),
    (None, {}),
])
def test_a_numa_verdict_is_its_own_record(
        node: int | None, nodes: dict[int, frozenset[int]]) -> None:
    check = numa_check(node, [0, 1], nodes)
    stored = json.loads(_text(check.to_json()))
    assert list(stored) == ["device_node", "fio_cpus", "fio_nodes", "mismatch", "message"]
    assert stored["fio_nodes"] == list(check.fio_nodes)
    assert NumaCheck.from_json(stored) == check


def _cell(fixture: str) -> dict[str, object]:
    output = parse_fio_output((FIO / f"{fixture}.json").read_text())
    job = output.jobs[0]
    spec = CellSpec(job.name, Pattern.RANDOM, 4096, Mix(100), 2, 4, 0, 2**28, runtime_s=0.5)
    return cell_from_job(spec, job)


@pytest.mark.parametrize("fixture", ["a_randread_4k", "c_randrw70_8k_qd1_jsonplus",
                                     "d_psync_note"])
def test_a_fio_cell_is_every_key_run_cells_writes_in_its_order(fixture: str) -> None:
    cell = _cell(fixture)
    record = FioCell.from_json(cell)
    assert record.little is not None and record.iops == cell["iops"]
    built = fresh(record).to_json()
    assert list(built) == list(cell)  # no key it does not know, none missing
    assert _text(built) == _text(cell)


def test_a_cell_stored_before_the_checks_has_no_little_law_keys() -> None:
    old = {k: v for k, v in _cell("a_randread_4k").items()
           if k not in LittleLaw.__dataclass_fields__}
    record = FioCell.from_json(old)
    assert record.little is None
    assert _text(fresh(record).to_json()) == _text(old)


def test_shared_readers_read_any_suites_document_as_the_shared_record() -> None:
    params = {"workload": "oltp", "threads": 4}  # the database suite's: no title
    assert TestParams.from_json(params).title == ""
    assert TestParams.from_json(params).to_json() == params
    steady = SteadyVerdict.of(evaluate({"iops": [1.0] * 5}, SNIA_RULE)).to_json()
    assert Verdict.from_json(steady).message.startswith("steady")
    assert Verdict.from_json(steady).to_json() == steady


def test_a_stored_plan_starts_with_its_suite() -> None:
    assert StoredPlan.from_json({"suite": "pts", "options": {}}).suite == "pts"
    with pytest.raises(StoredDataError, match="missing suite"):
        StoredPlan.from_json({"source_file": "x.csv"})  # a published run's plan has none
