"""The peak finder: its search against models (grows, refines, stops under 2 %, keeps to
the latency ceiling, engines only when they help), and its run against the fake fio (each
probe stored, the result, host-bound or not, resume), options, pages."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.peak import (
    Engine,
    LatencyLimit,
    Measured,
    Probe,
    SearchRules,
    Step,
    find_knee,
    search,
)
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.peak import (
    PeakArgs,
    PeakCell,
    build_options,
    parse_engines,
    parse_max_latency,
)
from ssdlab.plan.preset_defs import IometerArgs
from ssdlab.plan.pts import PtsArgs
from ssdlab.plan.pts import build_options as pts_options
from ssdlab.plan.specs import active_range
from ssdlab.report.peak_pages import PAGES, peak_page
from ssdlab.run.block_preset_run import auto_qd
from ssdlab.run.peak_run import PeakRun, PreparedPeak, measured_of, pinning
from ssdlab.run.prepare import PreparedTarget, TargetRequest
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import AutoLoad, auto_load
from ssdlab.run.session import RunInterrupted
from ssdlab.store import records
from ssdlab.store.db import Store
from ssdlab.store.export import run_to_json
from tests.support.fake_fio import FakeProcStat, QueueDevice, QueueFakeFio
from tests.support.prepared import file_info

IO_URING, LIBAIO, PSYNC = Engine("io_uring"), Engine("libaio"), Engine("psync")
FAST = Engine("io_uring", fixedbufs=True, registerfiles=True)


def little(max_iops: float, base_us: float = 100.0, cpu: float | None = 30.0
           ) -> Callable[[Probe], Measured]:
    """A device by Little's law: ``base_us`` per I/O up to ``max_iops``; p99 = 2 x mean."""
    def measure(p: Probe) -> Measured:
        n = p.outstanding
        iops = min(max_iops, n * 1e6 / base_us)
        mean = n * 1e6 / iops
        return Measured(p, True, iops, iops * 4096, {"mean": mean, "p99": 2 * mean}, cpu)
    return measure


def rules(**kw: Any) -> SearchRules:
    return SearchRules(**{"engines": (IO_URING,), "max_threads": 8, "max_qd": 256, **kw})


def loads(steps: tuple[Step, ...]) -> list[tuple[str, int, int]]:
    return [(s.phase, s.measured.probe.threads, s.measured.probe.iodepth) for s in steps]


def test_grows_queue_depth_then_jobs_and_stops_under_two_percent() -> None:
    out = search(rules(try_split=False), little(50_000))
    # 10K, 20K, 40K, 50K at QD 8, then QD 16 gains 0 %: stop; 2 jobs x QD 8 gains 0 %
    assert loads(out.steps)[:6] == [("grow-qd", 1, 1), ("grow-qd", 1, 2), ("grow-qd", 1, 4),
                                    ("grow-qd", 1, 8), ("grow-qd", 1, 16),
                                    ("grow-jobs", 2, 8)]
    assert out.steps[4].outcome == "+0.0 % IOPS (under 2 %)"
    # refining found QD 6 at the same 50K; confirmed equal, the lighter load is the peak
    assert out.peak is not None and out.peak.probe.first == Probe(IO_URING, 1, 6)
    assert out.peak.iops == pytest.approx(50_000)
    assert out.stopped == "the last step gained under 2 %"


def test_a_gain_just_under_the_minimum_stops_growing() -> None:
    def measure(p: Probe) -> Measured:  # each doubling gains 1.9 %
        iops = 10_000 * 1.019 ** (p.iodepth.bit_length() - 1) * p.threads ** 0.01
        return Measured(p, True, iops, 0.0, {"mean": 10.0})
    out = search(rules(try_split=False, max_threads=1, max_qd=2), measure)
    assert loads(out.steps) == [("grow-qd", 1, 1), ("grow-qd", 1, 2), ("confirm", 1, 1),
                                ("confirm", 1, 2)]
    assert out.peak is not None and out.peak.probe.iodepth == 1
    # with room to grow, growing still stops at QD 2, and the reach probe finds that the
    # device goes on rising: 8 doublings of 1.9 % are 16 %
    far = search(rules(try_split=False), measure)
    assert loads(far.steps)[:3] == [("grow-qd", 1, 1), ("grow-qd", 1, 2), ("grow-jobs", 2, 1)]
    reach = [s for s in far.steps if s.phase == "reach"]
    assert [(s.measured.probe.threads, s.measured.probe.iodepth) for s in reach] == [(8, 256)]
    assert reach[0].outcome.startswith("+") and "(kept 2 %)" in reach[0].outcome


def test_the_reach_probe_finds_a_second_rise_past_a_plateau() -> None:
    def measure(p: Probe) -> Measured:  # flat from 1 x QD 1, then 25 % more past 1,024 deep
        iops = 10_000.0 * (1.25 if p.outstanding >= 1024 else 1.0)
        return Measured(p, True, iops, 0.0, {"mean": 10.0, "p99": 20.0 * p.outstanding})
    out = search(rules(try_split=False, engines=(IO_URING, PSYNC)), measure)
    assert out.peak is not None and out.peak.iops == 12_500
    assert out.peak.probe.outstanding >= 1024 and out.peak.probe.engine == IO_URING
    assert [s.phase for s in out.steps].count("reach") == 1  # psync has no queue to reach
    # a ceiling keeps the deepest load out: it is over it
    kept = search(rules(try_split=False, engines=(IO_URING,),
                        limits=(LatencyLimit("p99", 1000.0),)), measure)
    assert kept.peak is not None and kept.peak.iops == 10_000
    over = next(s for s in kept.steps if s.phase == "reach")
    assert over.outcome.startswith("over the latency ceiling")


def test_refines_to_a_depth_between_the_doublings() -> None:
    def measure(p: Probe) -> Measured:  # best at 24 outstanding I/Os, worse either side
        n = p.outstanding
        iops = 100_000 - abs(n - 24) * 2_000
        return Measured(p, True, iops, 0.0, {"mean": n * 1e6 / iops})
    out = search(rules(try_split=False), measure)
    assert out.peak is not None and out.peak.probe.outstanding == 24
    assert any(s.phase == "refine" and s.measured.probe.outstanding == 24 for s in out.steps)


def test_keeps_to_the_latency_ceiling() -> None:
    # p99 = 2 x mean; mean 100 us up to 5 outstanding, then n / 50K: QD 8 has p99 320 us
    limit = LatencyLimit("p99", 250.0)
    out = search(rules(limits=(limit,), try_split=False), little(50_000))
    assert out.peak is not None
    assert out.peak.latency_us["p99"] is not None and out.peak.latency_us["p99"] <= 250
    assert out.peak.probe.first == Probe(IO_URING, 1, 6)  # refined: 6 outstanding, p99 240 us
    over = next(s for s in out.steps if s.measured.probe == Probe(IO_URING, 1, 8))
    assert over.outcome == "over the latency ceiling (p99 320 us > 250 us)"
    grown = [s.measured.probe.iodepth for s in out.steps if s.phase == "grow-qd"]
    assert grown == [1, 2, 4, 8]  # growing stopped at the first point over the ceiling


def test_no_point_within_the_ceiling_is_no_peak() -> None:
    out = search(rules(limits=(LatencyLimit("p99", 50.0),)), little(50_000))
    assert out.peak is None and out.limited_by == "unknown"
    assert "no load kept to the latency ceiling (p99 <= 50 us)" in out.message


def test_an_engine_replaces_the_first_only_when_it_gains_two_percent() -> None:
    speed = {IO_URING: 1.0, LIBAIO: 1.015, FAST: 1.10, PSYNC: 0.5}

    def measure(p: Probe) -> Measured:
        base = min(50_000.0, p.outstanding * 10_000.0)
        return Measured(p, True, base * speed[p.engine], 0.0, {"mean": 10.0})
    out = search(rules(engines=(IO_URING, LIBAIO, FAST, PSYNC), try_split=False), measure)
    assert out.peak is not None and out.peak.probe.engine == FAST
    libaio = next(s for s in out.steps if s.measured.probe.engine == LIBAIO)
    assert libaio.outcome == "+1.5 % IOPS (under 2 %)"
    assert all(s.measured.probe.iodepth == 1 for s in out.steps
               if s.measured.probe.engine == PSYNC)


def test_pinning_is_kept_only_if_it_helps() -> None:
    def measure(p: Probe) -> Measured:
        iops = min(p.outstanding, 16) * 1000.0 * (1.5 if p.split else 1.0)
        return Measured(p, True, iops, 0.0, {"mean": 10.0})
    out = search(rules(max_qd=8), measure)
    assert out.peak is not None and out.peak.probe.split
    flat = search(rules(max_qd=8), lambda p: Measured(p, True, min(p.outstanding, 16) * 1e3,
                                                     0.0, {"mean": 10.0}))
    assert flat.peak is not None and not flat.peak.probe.split
    assert any(s.phase == "pinning" for s in flat.steps)


@pytest.mark.parametrize(("cpu", "limited"), [(95.0, "host"), (30.0, "drive"),
                                              (None, "unknown")])
def test_who_limited_the_peak(cpu: float | None, limited: str) -> None:
    out = search(rules(), little(50_000, cpu=cpu))
    assert out.limited_by == limited
    if limited == "host":
        assert out.host.host_bound and "HOST-BOUND" in out.host.message


def test_the_probe_budget_ends_the_search_with_the_best_so_far() -> None:
    out = search(rules(max_probes=3), little(50_000))
    assert len(out.steps) == 3 and out.peak is not None and out.peak.iops == 40_000
    assert out.stopped == "the probe budget (3) ran out"


def test_a_failed_first_probe_is_no_peak() -> None:
    out = search(rules(), lambda p: Measured(p, False, error="fio: io_u error"))
    assert out.peak is None and out.steps[0].outcome == "failed: fio: io_u error"


def test_the_knee_is_where_latency_rises_faster_than_iops() -> None:
    m = little(50_000)
    curve = [m(Probe(IO_URING, 1, q)) for q in (1, 2, 4, 8, 16)]
    knee = find_knee(curve)
    assert knee is not None and knee.found and knee.point.probe.iodepth == 4
    assert "latency x1.60 against IOPS x1.25" in knee.message
    flat = find_knee(curve[:3])
    assert flat is not None and not flat.found and flat.point.probe.iodepth == 4


def test_engine_labels_round_trip() -> None:
    assert Engine.parse("io_uring+fixedbufs+registerfiles") == FAST
    assert FAST.label == "io_uring+fixedbufs+registerfiles"
    assert PSYNC.max_qd == 1 and IO_URING.max_qd is None
    for bad in ("io_uring+turbo", "libaio+fixedbufs", ""):
        with pytest.raises(ValueError):
            Engine.parse(bad)


# -- options -----------------------------------------------------------------------------


def test_max_latency_syntax() -> None:
    assert parse_max_latency("p99=1ms") == (LatencyLimit("p99", 1000.0),)
    assert parse_max_latency("p99.9=2ms, mean=300us") == (
        LatencyLimit("p99.9", 2000.0), LatencyLimit("mean", 300.0))
    for bad in ("p99", "p98=1ms", "p99=1 parsec", "p99=0ms", "p99=1ms,p99=2ms", ","):
        with pytest.raises(UserError, match="--max-latency"):
            parse_max_latency(bad)


def test_engines_and_options() -> None:
    assert "io_uring+fixedbufs+registerfiles+hipri" in parse_engines(None, polling=True)
    assert not any("hipri" in e for e in parse_engines(None, polling=False))
    with pytest.raises(UserError, match="does not poll"):
        parse_engines("io_uring+hipri", polling=False)
    with pytest.raises(UserError, match="not one of"):
        parse_engines("posixaio", polling=False)
    o = build_options(PeakArgs(), 2)
    assert (o.max_threads, o.max_qd, o.min_gain_pct, o.probe_seconds) == (8, 256, 2.0, 8.0)
    assert o.ioengine == "io_uring" and o.writes
    assert not build_options(PeakArgs(workloads="rnd4k_read,seq128k_read"), 2).writes
    for bad in (PeakArgs(workloads="rnd8k_read"), PeakArgs(max_qd=0),
                PeakArgs(min_gain_pct=0.0), PeakArgs(probe_seconds=0.01)):
        with pytest.raises(UserError):
            build_options(bad, 2)


def test_pinning_on_one_numa_node_says_so(tmp_path: Path) -> None:
    info = file_info(tmp_path / "t.img")
    base = PreparedTarget(info, False, {"numa_nodes": [{"node": 0, "cpulist": "0-1"}]}, {})
    cpus, text = pinning(base, frozenset({0, 1}))
    assert cpus == "0-1" and "the host has 1 NUMA node, so no node to pin to" in text
    two: dict[str, object] = {"numa_nodes": [{"node": 0, "cpulist": "0-1"},
                                             {"node": 1, "cpulist": "2-3"}]}
    base = PreparedTarget(dataclasses.replace(info, numa_node=1), False, two, {})
    cpus, text = pinning(base, frozenset({0, 1, 2, 3}))
    assert cpus == "2-3" and "device on node 1" in text


# -- the run against the fake fio ------------------------------------------------------------

ONE = PeakArgs(profile="quick", workloads="rnd4k_read", engines="io_uring,libaio,psync",
               max_threads=4)


def prepared(tmp_path: Path, args: PeakArgs = ONE) -> PreparedPeak:
    target = tmp_path / "target.img"
    target.write_bytes(b"")
    info = file_info(target)
    base = PreparedTarget(info, False, {"hostname": "test", "cpu_count": 2},
                          {"ssdlab": "test", "fio": "3.33"})
    return PreparedPeak(base, build_options(args, 2, cpus_allowed="0-1"), args,
                        active_range(info.capacity_bytes, 100.0))


def run_peak(tmp_path: Path, fio: QueueFakeFio, busy: float = 30.0,
             args: PeakArgs = ONE) -> tuple[Store, PeakRun]:
    store = Store.open(tmp_path / "store.sqlite")
    runner = PeakRun(prepared(tmp_path, args), store, fio,
                     Progress(io.StringIO(), live=False, quick=True),
                     read_stat=FakeProcStat(lambda: busy), fio_cpus=lambda: frozenset({0, 1}))
    return store, runner


def test_a_run_stores_every_probe_and_the_peak(tmp_path: Path) -> None:
    fio = QueueFakeFio(QueueDevice(base_us=100.0, max_iops=50_000.0))
    store, runner = run_peak(tmp_path, fio)
    run_id = runner.execute(["test"])
    run = store.load(run_id)
    test = run.test("rnd4k_read")
    result = test.result
    assert run.status == "complete" and test.status == "complete"
    assert [r.round_no for r in test.rounds] == list(range(1, len(fio.calls) + 1))
    assert len(result["steps"]) == len(fio.calls) == result["probes"]
    assert result["peak"]["iops"] == pytest.approx(50_000, rel=1e-3)
    assert result["limited_by"] == "drive" and result["kind"] == "iops"
    assert "cpus_allowed=0-1" in fio.calls[0] and "ioengine=io_uring" in fio.calls[0]
    assert any("ioengine=psync" in c and "iodepth=1\n" in c for c in fio.calls)
    assert measured_of(test.rounds[0].cells_as(PeakCell)[0]).probe == Probe(IO_URING, 1, 1)
    exported = json.dumps(run_to_json(run))
    assert '"peak"' in exported
    page = peak_page(run, test, "t")[0]
    assert "Every probe" in page.body and "io_uring 1 x QD" in page.body
    text = "\n".join(PAGES.outcome(run, "STORE").lines)
    assert "rnd4k_read" in text and "50,000" in text


def test_a_saturated_host_is_reported(tmp_path: Path) -> None:
    store, runner = run_peak(tmp_path, QueueFakeFio(), busy=97.0)
    run = store.load(runner.execute(["test"]))
    assert run.test("rnd4k_read").result["limited_by"] == "host"


def test_an_interrupted_run_resumes_without_repeating_probes(tmp_path: Path) -> None:
    whole = QueueFakeFio()
    (tmp_path / "a").mkdir()
    run_peak(tmp_path / "a", whole)[1].execute(["test"])
    stopped = QueueFakeFio(interrupt_call=5)
    store, runner = run_peak(tmp_path, stopped)
    with pytest.raises(RunInterrupted):
        runner.execute(["test"])
    run = store.load(store.resolve("last"))
    assert len(run.test("rnd4k_read").rounds) == 4
    again = QueueFakeFio()
    _, resumer = run_peak(tmp_path, again)
    resumer.resume(run, ["resume"])
    done = store.load(run.run_id).test("rnd4k_read")
    assert done.status == "complete"
    assert len(again.calls) == len(whole.calls) - 4
    assert [r.round_no for r in done.rounds] == list(range(1, len(whole.calls) + 1))
    same = [c.replace(str(tmp_path / "a"), str(tmp_path)) for c in whole.calls]
    assert stopped.calls[:4] + again.calls == same  # the same search, each probe once


# -- --threads auto --qd auto ------------------------------------------------------------------


def test_auto_load_comes_from_the_newest_peak_run_of_the_target(tmp_path: Path) -> None:
    store, runner = run_peak(tmp_path, QueueFakeFio())
    run_id = runner.execute(["test"])
    store.close()
    target, path = str(tmp_path / "target.img"), str(tmp_path / "store.sqlite")
    peak = Store.open(path).load(run_id).test("rnd4k_read").result["peak"]
    args, extra = auto_load(TargetRequest(target, store=path),
                            PtsArgs(tests="iops", threads="auto", iodepth="auto"))
    assert (args.threads, args.iodepth) == (peak["threads"], peak["iodepth"])
    assert extra == AutoLoad(load_source=f"threads/QD from peak run {run_id} (rnd4k_read: "
                     f"{peak['engine']} {peak['threads']} x QD {peak['iodepth']})")
    with pytest.raises(UserError, match=r"--threads auto: no peak run for .* run "
                       r"`ssdlab run peak --target") as refused:
        auto_load(TargetRequest(target, store=path), PtsArgs(threads="auto"))  # throughput
    assert refused.value.exit_code == ExitCode.USAGE
    atto, source = auto_qd(TargetRequest(target, store=path), IometerArgs(qd="auto"))
    assert isinstance(atto, IometerArgs) and atto.qd == peak["threads"] * peak["iodepth"]
    assert source.startswith(f"QD {atto.qd} (jobs x QD) from peak run {run_id}")


def test_without_a_peak_run_auto_is_refused_and_given_values_are_kept(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.sqlite")
    with pytest.raises(UserError, match="--qd auto: no peak run"):
        auto_load(TargetRequest("/dev/x", store=missing), PtsArgs(iodepth="auto"))
    assert not Path(missing).exists()
    args = PtsArgs(threads=3, iodepth=4)
    assert auto_load(TargetRequest("/dev/x", store=missing), args) == (args, AutoLoad())
    with pytest.raises(UserError, match="--threads auto: give a whole number"):
        pts_options(PtsArgs(threads="auto"), "file", 2)
    assert pts_options(PtsArgs(), "file", 2).load_source == ""


def test_after_more_jobs_the_queue_grows_again() -> None:
    def measure(p: Probe) -> Measured:  # one job gains nothing from a queue; four do
        qd = min(p.iodepth, 4) if p.threads >= 2 else 1
        return Measured(p, True, min(p.threads, 4) * qd * 1000.0, 0.0, {"mean": 10.0})
    out = search(rules(try_split=False), measure)
    assert out.peak is not None and out.peak.probe.first == Probe(IO_URING, 4, 4)
    phases = [s for s, *_ in loads(out.steps)]
    assert phases[:6] == ["grow-qd", "grow-qd", "grow-jobs", "grow-jobs", "grow-jobs",
                          "grow-qd"]


# -- confirmation: a lucky probe does not name the peak ------------------------------------------

def noisy(first: dict[Probe, float], again: dict[Probe, float], rest: float = 1000.0
          ) -> Callable[[Probe], Measured]:
    """IOPS of each point's first and second probe; every other point ``rest``."""
    def measure(p: Probe) -> Measured:
        table = again if p.trial else first
        iops = table.get(p.first, rest)
        return Measured(p, True, iops, iops * 4096, {"mean": 50.0, "p99": 100.0})
    return measure


def test_a_lucky_first_probe_loses_the_peak_to_the_confirmed_best() -> None:
    lucky, steady = Probe(IO_URING, 1, 2), Probe(IO_URING, 1, 1)
    # QD 2 measured 1,030 once (lucky) but 950 again; QD 1 measured 1,000 twice
    out = search(rules(try_split=False, max_threads=1, max_qd=2),
                 noisy({lucky: 1030.0, steady: 1000.0}, {lucky: 950.0, steady: 1000.0}))
    confirms = [s for s in out.steps if s.phase == "confirm"]
    assert [s.measured.probe for s in confirms] == [replace_trial(lucky), replace_trial(steady)]
    assert out.peak is not None and out.peak.probe == replace_trial(steady)
    assert out.peak.iops == 1000.0  # the second probe's figure, not the luckiest one's
    assert confirms[1].outcome == "mean of two probes 1,000 IOPS: the peak"
    assert confirms[0].outcome == "mean of two probes 990 IOPS"
    assert "at io_uring 1 x QD 1 after" in out.message  # the point, not "again"


def replace_trial(p: Probe) -> Probe:
    return dataclasses.replace(p, trial=1)


def test_among_equal_means_the_lighter_load_is_the_peak() -> None:
    deep, light = Probe(IO_URING, 1, 2), Probe(IO_URING, 1, 1)
    # QD 2's mean 1,020 is 0.5 % over QD 1's 1,015: equal within 2 %, so the lighter load
    out = search(rules(try_split=False, max_threads=1, max_qd=2),
                 noisy({deep: 1030.0, light: 1000.0}, {deep: 1010.0, light: 1030.0}))
    assert out.peak is not None and out.peak.probe == replace_trial(light)
    # QD 2 confirmed 4 % ahead: it stays the peak
    ahead = search(rules(try_split=False, max_threads=1, max_qd=2),
                   noisy({deep: 1030.0, light: 1000.0}, {deep: 1080.0, light: 1000.0}))
    assert ahead.peak is not None and ahead.peak.probe == replace_trial(deep)
    assert ahead.peak.iops == 1080.0


def test_no_rival_within_five_percent_means_no_confirmation() -> None:
    out = search(rules(try_split=False), little(50_000))
    rivals = [s for s in out.steps if s.phase == "confirm"]
    # 50K at QD 8 and 16 and 2 x QD 8: the equal plateau points are confirmed, at most 3
    assert 0 < len(rivals) <= 3
    alone = search(rules(try_split=False, max_threads=1, max_qd=2),
                   noisy({Probe(IO_URING, 1, 2): 2000.0}, {}))
    assert not [s for s in alone.steps if s.phase == "confirm"]
    assert alone.peak is not None and alone.peak.probe == Probe(IO_URING, 1, 2)


def test_a_confirmation_over_the_ceiling_is_not_the_peak() -> None:
    a, b = Probe(IO_URING, 1, 2), Probe(IO_URING, 1, 1)

    def measure(p: Probe) -> Measured:
        iops = {a: 1030.0, b: 1000.0}[p.first]
        p99 = 900.0 if (p.first == a and p.trial) else 100.0  # QD 2 breaks it the second time
        return Measured(p, True, iops, 0.0, {"mean": 50.0, "p99": p99})
    out = search(rules(try_split=False, max_threads=1, max_qd=2,
                       limits=(LatencyLimit("p99", 500.0),)), measure)
    assert out.peak is not None and out.peak.probe == replace_trial(b)
    over = next(s for s in out.steps if s.measured.probe == replace_trial(a))
    assert over.outcome.startswith("over the latency ceiling") and "not the peak" in over.outcome


def test_the_budget_during_confirmation_keeps_what_was_measured() -> None:
    lucky, steady = Probe(IO_URING, 1, 2), Probe(IO_URING, 1, 1)
    measure = noisy({lucky: 1030.0, steady: 1000.0}, {lucky: 950.0, steady: 1000.0})
    whole = search(rules(try_split=False, max_threads=1, max_qd=2), measure)
    budget = len(whole.steps) - 1  # room for the best's second probe only
    out = search(rules(try_split=False, max_threads=1, max_qd=2, max_probes=budget), measure)
    assert out.peak is not None and out.peak.probe == replace_trial(lucky)
    assert out.stopped == "the last step gained under 2 %"


def test_reach_probes_each_engine_once_by_name() -> None:
    out = search(rules(try_split=False, engines=(IO_URING, LIBAIO, FAST, PSYNC)),
                 little(50_000))
    reach = [s.measured.probe for s in out.steps if s.phase == "reach"]
    assert reach == [Probe(IO_URING, 8, 256), Probe(LIBAIO, 8, 256)]


# -- the ceiling at the confirmation (issue 30): a peak is named only where its second probe
# kept to the ceiling ---------------------------------------------------------------------------

def slower_again(deep_from: int, first_p99: float = 100.0, again_p99: float = 3916.0
                 ) -> Callable[[Probe], Measured]:
    """Little's law at 50K IOPS on the first probe of every point (p99 ``first_p99``);
    measured again, a load of ``deep_from`` outstanding I/Os or more has p99 ``again_p99``
    (the drive slowed between the probe and the re-test), a lighter one its first figures."""
    first = little(50_000)

    def measure(p: Probe) -> Measured:
        m = first(p)
        over = p.trial and p.outstanding >= deep_from
        return dataclasses.replace(m, latency_us={"mean": 50.0,
                                                  "p99": again_p99 if over else first_p99})
    return measure


def test_a_lone_peak_is_measured_again_under_a_ceiling_and_not_named_when_it_broke_it() -> None:
    ceiling = (LatencyLimit("p99", 1000.0),)
    # alone: no rival within 5 %, so before a ceiling nothing was measured again
    alone = {Probe(IO_URING, 1, 2): 2000.0}
    measure = noisy(alone, {})
    out = search(rules(try_split=False, max_threads=1, max_qd=2, limits=ceiling), measure)
    confirms = [s for s in out.steps if s.phase == "confirm"]
    assert [s.measured.probe for s in confirms] == [Probe(IO_URING, 1, 2, trial=1)]
    assert out.peak is not None and out.peak.probe == Probe(IO_URING, 1, 2, trial=1)
    # the same point breaks the ceiling when measured again: the lighter load, confirmed
    # within it, is the peak, and the result says why the best first probe is not
    broke = search(rules(try_split=False, max_threads=1, max_qd=2, limits=ceiling),
                   slower_again(deep_from=2))
    assert broke.peak is not None and broke.peak.probe == Probe(IO_URING, 1, 1, trial=1)
    assert broke.peak.latency_us["p99"] == 100.0
    over = next(s for s in broke.steps if s.measured.probe == Probe(IO_URING, 1, 2, trial=1))
    assert over.outcome == "over the latency ceiling (p99 3,916 us > 1 ms): not the peak"
    assert broke.unconfirmed == ("io_uring 1 x QD 2 is not the peak: 20,000 IOPS on its first "
                                 "probe, but measured again p99 3,916 us > 1 ms")
    assert broke.unconfirmed in broke.message


def test_the_best_confirmed_load_is_named_when_the_best_ones_broke_the_ceiling() -> None:
    ceiling = (LatencyLimit("p99", 1000.0),)
    out = search(rules(try_split=False, limits=ceiling), slower_again(deep_from=6))
    assert out.peak is not None and out.peak.probe.trial == 1
    assert out.peak.probe.outstanding < 6
    p99 = out.peak.latency_us["p99"]
    assert p99 is not None and p99 <= 1000.0
    # every point measured again at 6 or more outstanding I/Os broke it and is not the peak
    again = [s for s in out.steps if s.phase == "confirm"]
    assert any(s.measured.probe.outstanding >= 6 for s in again)
    for s in again:
        if s.measured.probe.outstanding >= 6:
            assert s.outcome.endswith(": not the peak")
    # of the loads lighter than those, the best first probe is the one confirmed
    lighter = [s.measured for s in out.steps if s.measured.probe.trial == 0
               and s.measured.probe.outstanding < 6]
    assert out.peak.probe.first == max(lighter, key=lambda m: m.iops).probe
    assert "is not the peak" in out.message


def test_no_confirmed_load_is_no_peak_with_the_reason() -> None:
    ceiling = (LatencyLimit("p99", 1000.0),)
    out = search(rules(try_split=False, limits=ceiling), slower_again(deep_from=1))
    assert out.peak is None and out.limited_by == "unknown"
    assert out.message.startswith("no peak: no load kept to the latency ceiling (p99 <= 1 ms) "
                                  "when measured again:")
    assert "p99 3,916 us > 1 ms" in out.message
    # nothing named has a confirmation over the ceiling, and no step is called the peak
    assert not [s for s in out.steps if s.outcome.endswith(": the peak")]


def test_the_budget_keeps_a_probe_to_confirm_the_peak_under_a_ceiling() -> None:
    ceiling = (LatencyLimit("p99", 1000.0),)
    out = search(rules(max_probes=3, limits=ceiling), little(50_000))
    assert len(out.steps) == 3 and out.stopped == "the probe budget (3) ran out"
    assert out.peak is not None and out.peak.probe == Probe(IO_URING, 1, 2, trial=1)
    assert [s.phase for s in out.steps] == ["grow-qd", "grow-qd", "confirm"]


CEILING = dataclasses.replace(ONE, engines="io_uring", max_latency="p99=1ms")


def completed_under_a_ceiling(tmp_path: Path, fio: QueueFakeFio, args: PeakArgs = CEILING
                              ) -> tuple[records.RunData, records.TestData, dict[str, Any]]:
    """The run of ``fio``, complete and not failed whatever it found: its workload's test
    and result."""
    store, runner = run_peak(tmp_path, fio, args=args)
    run = store.load(runner.execute(["test"]))
    test = run.test("rnd4k_read")
    assert run.status == "complete" and test.status == "complete"
    assert PAGES.outcome(run, "STORE").failure is None  # not "fio or device error"
    return run, test, test.result


def test_a_run_never_names_a_peak_whose_confirmation_broke_the_ceiling(tmp_path: Path) -> None:
    # the first probes meet a drive of 50K IOPS; the re-tests one of 10K: from 8 outstanding
    # I/Os on, the second probe's p99 (2 x 8 / 10K s = 1.6 ms) breaks the 1 ms ceiling the
    # first probe kept to (2 x 8 / 50K s = 320 us)
    fio = QueueFakeFio(QueueDevice(100.0, 50_000.0), again=QueueDevice(100.0, 10_000.0))
    run, test, result = completed_under_a_ceiling(tmp_path, fio)
    peak = result["peak"]
    assert result["found"] and peak["lat_p99_us"] <= 1000.0
    assert peak["threads"] * peak["iodepth"] < 8
    again = [s for s in result["steps"] if s["phase"] == "confirm"]
    broke = [s for s in again if s["lat_p99_us"] > 1000.0]
    assert broke and all(s["outcome"].endswith(": not the peak") for s in broke)
    named = [s for s in again if s["outcome"].endswith(": the peak")]
    assert [(s["threads"], s["iodepth"], s["iops"]) for s in named] == \
        [(peak["threads"], peak["iodepth"], peak["iops"])]
    assert "is not the peak" in result["unconfirmed"] and "measured again p99" in \
        result["unconfirmed"]
    assert "is not the peak" in "\n".join(PAGES.outcome(run, "STORE").lines)
    assert "is not the peak" in "\n".join(PAGES.show["rnd4k_read"](run, test))
    assert "is not the peak" in peak_page(run, test, "t")[0].body
    assert "is not the peak" in json.dumps(run_to_json(run))


def test_a_run_whose_every_confirmation_broke_the_ceiling_has_no_peak_and_exits_0(
        tmp_path: Path) -> None:
    fio = QueueFakeFio(QueueDevice(100.0, 50_000.0), again=QueueDevice(1000.0, 500.0))
    run, test, result = completed_under_a_ceiling(tmp_path, fio)
    assert not result["found"] and result["peak"] is None
    assert result["message"].startswith("no peak: no load kept to the latency ceiling "
                                         "(p99 <= 1 ms) when measured again: io_uring ")
    verdict = "NO PEAK: no load kept to the latency ceiling"
    assert verdict in "\n".join(PAGES.outcome(run, "STORE").lines)
    assert verdict in "\n".join(PAGES.show["rnd4k_read"](run, test))
    page = peak_page(run, test, "t")[0]
    assert verdict in page.body and "FAILED" not in page.body
    assert result["message"] in json.dumps(run_to_json(run))


def test_no_load_within_the_ceiling_is_a_verdict_not_a_failure(tmp_path: Path) -> None:
    args = dataclasses.replace(CEILING, max_latency="p99=10us")  # even QD 1 is 200 us
    run, _, _ = completed_under_a_ceiling(tmp_path, QueueFakeFio(), args)
    assert "NO PEAK: no load kept to the latency ceiling (p99 <= 10 us): even io_uring 1 x " \
           "QD 1 was over it" in "\n".join(PAGES.outcome(run, "STORE").lines)
    failed = QueueFakeFio(fail_calls=set(range(1, 50)))
    (tmp_path / "f").mkdir()
    store, runner = run_peak(tmp_path / "f", failed, args=args)
    run = store.load(runner.execute(["test"]))
    assert run.test("rnd4k_read").status == "failed"  # fio failed: that is a failure
    assert PAGES.outcome(run, "STORE").failure is not None
