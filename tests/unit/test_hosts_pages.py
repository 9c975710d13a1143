"""The hosts of a run on several hosts as ``show`` and the report read them back typed
(report/hosts_pages.py): the hosts the combined target records, each host's part of
every round and its own verdict (tests/integration/test_hosts_real.py has real hosts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssdlab.jsonrecord import StoredDataError
from ssdlab.plan.results import (
    HostPart,
    HostRecord,
    HostRoundEvent,
    HostVerdictsEvent,
    StoredPlan,
    TestParams,
)
from ssdlab.plan.round_start import RoundStart
from ssdlab.report import hosts_pages
from ssdlab.report.hosts_pages import host_header, hosts_page, show_lines
from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunData, RunHead, TestState

VERDICT = {"rule": "snia", "window_size": 5, "attained": True, "rounds_seen": 5,
           "window_rounds": [1, 5], "message": "steady state in rounds 1-5", "tracked": [],
           "variables": {}}


def _run(tmp_path: Path, starts: tuple[RoundStart | None, ...] = (None, None)) -> RunData:
    hosts = [HostRecord("h1", "/dev/loop0", "node1", "1.0", "fio-3.33", 0.25,
                        {"model": "EMU", "serial": "S1"}, {"cpus": 2}).to_json(),
             HostRecord("h2", "/dev/loop1", None, "1.0", "fio-3.33", -1.5, {}).to_json()]
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = store.new_run(RunHead(
            "pts", "quick", True, {"path": "h1:/dev/loop0,h2:/dev/loop1", "kind": "block",
                                   "details": {"transport": "ssh", "hosts": hosts}},
            {}, StoredPlan("pts"), {"ssdlab": "1.0"}, ["ssdlab"]))
        store.set_test(run_id, "iops", TestState("complete", TestParams("IOPS")))
        for n in (1, 2):
            store.add_round(run_id, "iops", RoundRecord(n, "ok", {"iops": 100.0 * n}, [],
                                                        None, n, n + 1.0))
            parts = {"h1": HostPart({"iops": 60.0 * n}), "h2": HostPart()}
            store.add_event(run_id, "iops", "host-round", f"round {n}",
                            HostRoundEvent(n, "round", parts, starts[n - 1]))
        verdicts = HostVerdictsEvent.from_json({"hosts": {"h1": VERDICT}})
        store.add_event(run_id, "iops", "host-verdicts", "each host", verdicts)
        return store.load(run_id)


def test_the_hosts_read_back_typed(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert host_header(run) == [
        "host h1 (node1): /dev/loop0 model EMU, serial S1, fio-3.33, ssdlab 1.0, clock "
        "+0.25 s",
        "host h2 (None): /dev/loop1 model -, serial -, fio-3.33, ssdlab 1.0, clock -1.50 s"]
    rounds, verdicts = hosts_pages.test_hosts(run, "iops")
    assert [r.round for r in rounds] == [1, 2]
    assert rounds[1].hosts["h1"].tracking == {"iops": 120.0}
    assert rounds[1].hosts["h2"].to_json() == {}  # a part without tracking variables
    assert verdicts["h1"].attained and verdicts["h1"].window_rounds == (1, 5)
    test = run.test("iops")
    assert show_lines(run, test) == [
        "  host h1: last round iops 120; steady state in rounds 1-5",
        "  host h2: last round iops -; no verdict"]
    page = hosts_page(run, test, "hosts-iops", "")
    assert page is not None and page.title == "Hosts: IOPS"
    assert "steady state in rounds 1-5" in page.body and "NOT steady" not in page.body


def test_the_round_start_skew_is_shown_with_the_late_host(tmp_path: Path) -> None:
    run = _run(tmp_path, (RoundStart(0.004), RoundStart(0.31, late={"h2": "it woke late"})))
    skew = ("round start skew: median 157.0 ms, largest 310.0 ms over 2 rounds (limit "
            "50 ms); host h2 late in round 2")
    assert show_lines(run, run.test("iops"))[-1] == f"  {skew}"
    page = hosts_page(run, run.test("iops"), "hosts-iops", "")
    assert page is not None and "Round start skew: median 157.0 ms" in page.body
    assert "host h2 late in round 2" in page.body


def test_a_run_on_one_host_has_no_hosts(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = store.new_run(RunHead("pts", "quick", True, {"path": "/dev/loop0"}, {},
                                       StoredPlan("pts"), {}, []))
        store.set_test(run_id, "iops", TestState("complete", TestParams("IOPS")))
        run = store.load(run_id)
    assert host_header(run) == [] and show_lines(run, run.test("iops")) == []
    assert hosts_page(run, run.test("iops"), "a", "") is None


@pytest.mark.parametrize("tracking", [{"iops": "many"}, ["iops"]])
def test_a_hosts_part_that_is_not_one_is_refused(tracking: object) -> None:
    with pytest.raises(StoredDataError, match=r"host-round event\.hosts\.h1\.tracking"):
        HostRoundEvent.from_json({"round": 1, "hosts": {"h1": {"tracking": tracking}}},
                                 "host-round event")
