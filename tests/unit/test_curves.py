"""Curve workloads: the preset data, option validation, rate splitting, job files, and a
run against a fake fio whose latency grows with the delivered rate (store, report)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ssdlab.engine.jobfile import render as render_job
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.errors import UserError
from ssdlab.plan import curve_workloads as cw
from ssdlab.plan import curves as cv
from ssdlab.plan.specs import IOENGINES, PURGE_METHODS
from ssdlab.report.build import render
from ssdlab.report.curves_pages import PAGES, curves_overlay
from ssdlab.report.terminal import render_run
from ssdlab.run.curves_run import CurvesRun, PreparedCurves, describe
from ssdlab.run.progress import Progress
from ssdlab.run.workload_target import WorkloadTarget
from ssdlab.store.db import Store
from ssdlab.targets.topology import CpuTimes, StatSnapshot
from tests.support.fake_fio import _direction, _job, _sections
from tests.support.prepared import file_info

MIB = 1 << 20


def options(**kw: object) -> cv.CurvesOptions:
    return cv.build_options(cv.CurvesArgs(**kw), PURGE_METHODS, IOENGINES)  # type: ignore[arg-type]


def refused(**kw: object) -> str:
    with pytest.raises(UserError) as info:
        options(**kw)
    assert len(info.value.message.splitlines()) == 1
    return info.value.message


# --------------------------------------------------------------------------- the data


def test_every_workload_of_the_methodology_is_in_the_preset() -> None:
    data = cw.catalogue()
    known = data.workloads
    assert data.identity.preset == "curves" and data.identity.preset_version >= 1
    assert data.fractions_pct == (10, 50, 70, 80, 90, 100)
    assert set(data.default) | set(data.quick_default) <= set(known)
    expected = {"4k-random-read", "4k-random-write", "64k-seq-read", "64k-seq-write",
                "16k-seq-read", "16k-seq-write", "70-30-4k", "70-30-8k", "70-30-16k", "sql",
                "sql-90-10", "sql-80-20", "oracle", "oracle-90-10", "oracle-80-20",
                "vdi-fc-boot", "vdi-fc-initial-login", "vdi-fc-monday-login", "vdi-lc-boot",
                "vdi-lc-initial-login", "vdi-lc-monday-login"}
    assert set(known) == expected
    assert known["4k-random-read"].threads == 128 and known["64k-seq-write"].threads == 16
    assert known["sql-90-10"].read_pct == 90 and known["oracle-80-20"].read_pct == 80
    assert all(sum(p for _, p in w.bssplit) == 100 for w in known.values())
    assert all(w.source for w in known.values())
    doc = (Path(__file__).resolve().parents[2] / "docs" / "curves.md").read_text()
    assert all(f"`{name}`" in doc for name in known)


def test_bssplit_and_distribution_are_checked() -> None:
    assert cw.parse_bssplit("8k/80:64k/20", "x") == ((8192, 80), (65536, 20))
    for bad in ("8k/80:64k/10", "8k", "7/100", "8k/0:4k/100"):
        with pytest.raises(UserError):
            cw.parse_bssplit(bad, "x")
    base = {"title": "t", "pattern": "random", "bssplit": "4k/100", "read_pct": 50,
            "threads": 4}
    assert cw.workload_from("w", {**base, "distribution": "zoned:50/10:50/90"}).distribution
    with pytest.raises(UserError, match="add up to 100"):
        cw.workload_from("w", {**base, "distribution": "zoned:50/10:40/90"})
    with pytest.raises(UserError, match="malformed"):
        cw.workload_from("w", {**base, "pattern": "zigzag"})


# --------------------------------------------------------------------------- options


def test_profiles_pick_their_workloads_fractions_and_seconds() -> None:
    full = options()
    assert full.fractions_pct == (10, 50, 70, 80, 90, 100) and not full.quick
    assert (full.measure_s, full.ramp_s) == (30.0, 5.0)
    assert len(full.workloads) == 8 and full.preset.preset_version == 1
    quick = options(profile="quick")
    assert quick.quick and quick.fractions_pct == (10, 50, 80, 100)
    assert [w.name for w in quick.workloads] == ["4k-random-read", "70-30-8k"]
    assert len(options(workloads="all").workloads) == 21
    mine = options(workloads="sql,vdi-lc-boot", fractions="20,60", with_120=True, seconds=2,
                   ramp=0)
    assert mine.points_per_workload == 4 and mine.ramp_s == 0.0


@pytest.mark.parametrize(("kw", "fragment"), [
    ({"profile": "long"}, "--profile 'long'"),
    ({"workloads": "sql,nosuch"}, "unknown nosuch"),
    ({"workloads": "sql,sql"}, "twice"),
    ({"fractions": "50,10"}, "ascending"),
    ({"fractions": "0,50"}, "from 1 to 100"),
    ({"fractions": "ten"}, "whole percentages"),
    ({"seconds": -1.0}, "--seconds"),
    ({"ramp": float("nan")}, "--ramp"),
    ({"threads": 0}, "--threads 0"),
    ({"jobs": 1000}, "--jobs 1000"),
    ({"fill_region": 100.0}, "--fill-region"),
    ({"min_delivered_pct": 0.0}, "--min-delivered"),
    ({"purge": "shred"}, "--purge 'shred'"),
])
def test_bad_options_are_refused_in_one_line(kw: dict[str, object], fragment: str) -> None:
    assert fragment in refused(**kw)


# --------------------------------------------------------------------------- rates and jobs


def test_rates_are_split_over_jobs_and_between_reads_and_writes() -> None:
    assert cw.split_rate(10_000, 4, 100) == (2500, 0)
    assert cw.split_rate(10_000, 4, 0) == (0, 2500)
    assert cw.split_rate(10_000, 2, 70) == (3500, 1500)
    assert cw.split_rate(3, 2, 90) == (1, 1)  # each direction with a share gets >= 1
    assert cw.rate_option(2500, 0) == "2500"
    assert cw.rate_option(0, 2500) == ",2500"
    assert cw.rate_option(3500, 1500) == "3500,1500"
    with pytest.raises(ValueError):
        cw.split_rate(0, 1, 50)


def test_outstanding_io_becomes_jobs_times_queue_depth() -> None:
    assert cw.load_for(128, None, 2) == cw.Load(2, 64)
    assert cw.load_for(16, 4, 2) == cw.Load(4, 4)
    assert cw.load_for(3, None, 8) == cw.Load(3, 1)
    assert cw.load_for(10, 4, 1).outstanding == 12  # rounded up per job


def _point(name: str, kind: str = "fraction", fraction: int | None = 50,
           target: float | None = 10_000.0, jobs: int = 2) -> cw.Point:
    known = cw.catalogue().workloads
    return cw.Point(known[name], kind, fraction, target, cw.Load(jobs, 8), 0, 64 * MIB, 1.0,
                    0.5)


def point_job_text(point: cw.Point, target: str, header: str) -> str:
    return render_job(cw.point_job(point, target, "libaio"), header)


def test_job_files_carry_rate_bssplit_skew_and_slices() -> None:
    text = point_job_text(_point("sql"), "/dev/x", "head")
    assert "[sql-p050]" in text and "rw=randrw" in text and "rwmixread=70" in text
    assert "bssplit=8192/80:65536/15:4096/5" in text
    assert "random_distribution=zoned:50/10:30/20:20/70" in text
    # a block-size split is limited in bytes: fio would count rate_iops in 4 KiB blocks
    mean = 0.8 * 8192 + 0.15 * 65536 + 0.05 * 4096
    assert f"rate={round(3500 * mean)},{round(1500 * mean)}" in text
    assert "rate_iops" not in text and "numjobs=2" in text and "iodepth=8" in text
    assert "rate_iops=3500,1500" in point_job_text(_point("70-30-8k"), "/d", "")
    assert "ramp_time=500ms" in text and "runtime=1s" in text
    top = point_job_text(_point("64k-seq-write", "max", None, None), "/dev/x", "")
    assert "rate_iops" not in top and "rw=write" in top and "[64k-seq-write-max]" in top
    assert "offset_increment=33554432" in top and "size=33554432" in top
    over = _point("4k-random-read", "unthrottled", 120, None)
    assert over.name == "4k-random-read-p120" and "unthrottled" in over.label


def test_workloads_must_fit_the_region_and_sectors() -> None:
    opts = options(workloads="64k-seq-read")
    cv.check_fits(opts, 64 * MIB, 512, 2)
    with pytest.raises(UserError, match="do not fit"):
        cv.check_fits(options(workloads="64k-seq-read", jobs=64), 1 * MIB, 512, 2)
    with pytest.raises(UserError, match="sectors"):
        cv.check_fits(options(workloads="4k-random-read"), 64 * MIB, 8192, 2)


# --------------------------------------------------------------------------- a fake run


@dataclass
class RateDevice:
    """A fake fio: a device of ``max_iops``; a rate-limited job gets its rate (up to the
    maximum) and latency grows as the device fills (an M/M/1-like curve)."""

    max_iops: float = 10_000.0
    base_us: float = 100.0
    calls: list[str] = field(default_factory=list)

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.calls.append(job_text)
        jobs = []
        for s in _sections(job_text):
            rate = s.get("rate_iops")
            assert "rate" not in s, "these workloads have one block size"
            iops = self.max_iops
            if rate is not None:
                per_job = sum(int(v) for v in rate.split(",") if v)
                iops = min(self.max_iops, per_job * int(s.get("numjobs", "1")))
            job = _job(s, iops)
            lat = self.base_us / max(0.05, 1 - 0.9 * iops / self.max_iops)
            block = int(s.get("bs", "4096"))
            for d in ("read", "write"):
                stats = job[d]
                assert isinstance(stats, dict)
                job[d] = _direction(float(stats["iops"]), block, lat)
            jobs.append(job)
        now = time.time()
        out = json.dumps({"fio version": "fio-3.33", "jobs": jobs})
        return FioRun(job_text, ("fake",), out, "", 0, now, now, False, parse_fio_output(out),
                      None)


def prepared(tmp_path: Path, **kw: object) -> PreparedCurves:
    target = tmp_path / "t.img"
    target.write_bytes(b"")
    info = file_info(target, 256 * MIB)
    base = WorkloadTarget(info, False, {"hostname": "test", "cpu_count": 2},
                          {"ssdlab": "test", "fio": "3.33"}, None, cv.FILE_NAME)
    return PreparedCurves(base, options(**kw), cv.CurvesArgs(),
                          cv.Layout(256 * MIB, 0, 256 * MIB, 2))


def test_a_curve_run_rates_points_from_the_measured_maximum(tmp_path: Path) -> None:
    p = prepared(tmp_path, profile="quick", workloads="4k-random-read,70-30-8k",
                 with_120=True, min_delivered_pct=99.0)
    fio = RateDevice()
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = CurvesRun(p, store, fio, Progress(live=False, quick=True)).execute(["t"])
        run = store.load(run_id)
    assert run.status == "complete" and run.quick
    assert run.plan["preset"]["preset"] == "curves"
    test = run.test("curves")
    assert test.params["preset_version"] == 1
    assert len(fio.calls) == 2 * 6 and len(test.rounds) == 12
    first = test.result["workloads"][0]
    assert first["max_iops"] == pytest.approx(10_000)
    kinds = [q["kind"] for q in first["points"]]
    assert kinds == ["max", "fraction", "fraction", "fraction", "fraction", "unthrottled"]
    fractions = [q for q in first["points"] if q["kind"] == "fraction"]
    # 2 jobs on this host: 10 % of 10,000 IOPS is rate_iops=500 per job
    assert "rate_iops=500\n" in fio.calls[1]
    assert [round(q["target_iops"]) for q in fractions] == [1000, 5000, 8000, 10000]
    means = [q["lat_mean_us"] for q in fractions]
    assert means == sorted(means) and means[-1] > 5 * means[0]
    mixed = test.result["workloads"][1]["points"][1]
    assert mixed["fio_rate"] == "rate_iops=350,150"  # 70/30 split of 500 per job
    assert not any(q["short"] for q in first["points"])
    assert test.verdicts["4k-random-read"]["message"].startswith("max 10,000 IOPS")
    html, _ = render([run])
    assert "Curve: 4K random read" in html and "latency against delivered IOPS" in html
    assert "Curves (vdbench style)" in html and "curves version 1" in html
    overlay = curves_overlay([run, run], ["a", "b"])
    assert "all runs" in overlay
    ended = PAGES.outcome(run, Path("s.sqlite"))
    assert ended.lines[0] == (f"run {run_id} complete (QUICK profile: not a valid result); "
                              "results in s.sqlite")
    assert ended.lines[1].startswith("  4k-random-read: max 10,000 IOPS")
    assert ended.lines[-1] == f"  see them: ssdlab report {run_id} -o DIR"
    assert ended.failure is None


def test_points_short_of_their_rate_are_flagged(tmp_path: Path) -> None:
    p = prepared(tmp_path, profile="quick", workloads="4k-random-read")

    class Capped(RateDevice):
        def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
                on_tick: TickFn | None = None) -> FioRun:
            self.max_iops = 10_000.0 if len(self.calls) == 0 else 6_000.0
            return super().run(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)

    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = CurvesRun(p, store, Capped(), Progress(live=False)).execute(["t"])
        run = store.load(run_id)
    points = run.test("curves").result["workloads"][0]["points"]
    assert [q["short"] for q in points] == [False, False, False, True, True]
    assert run.test("curves").result["short_points"] == 2
    assert "SHORT" in render([run])[0]


def test_dry_run_shows_the_plan_and_job_files(tmp_path: Path) -> None:
    text = describe(prepared(tmp_path, profile="quick", fill_region=25.0))
    assert text.startswith("DRY RUN: nothing will be written")
    assert "[4k-random-read-max]" in text and "-- fill job file:" in text
    assert "preset curves v1" in text and "QUICK" in text
    assert re.search(r"rate_iops=READ,WRITE per job", text)


def test_each_point_records_host_cpu_and_steal_and_warns_of_steal(tmp_path: Path) -> None:
    p = prepared(tmp_path, profile="quick", workloads="4k-random-read")
    # /proc/stat read before and after each point: each point adds 1,000 ticks, of which
    # idle 600 and steal 0, except the 50 % point (the 3rd): steal 150 (15 %)
    ticks = {"user": 0, "idle": 0, "steal": 0}
    reads = 0

    def read_stat() -> StatSnapshot:
        nonlocal reads
        reads += 1
        if reads % 2 == 0:  # the reading after a point
            steal = 150 if reads == 6 else 0
            ticks["user"] += 400 - steal
            ticks["idle"] += 600
            ticks["steal"] += steal
        return {"cpu": CpuTimes(ticks["user"], 0, 0, ticks["idle"], 0, 0, 0, ticks["steal"])}

    lines: list[str] = []
    progress = Progress(live=False, quick=True)
    progress.line = lambda message: lines.append(message)  # type: ignore[method-assign]
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = CurvesRun(p, store, RateDevice(), progress, read_stat=read_stat).execute(["t"])
        run = store.load(run_id)
    points = run.test("curves").result["workloads"][0]["points"]
    assert [q["host_cpu_pct"] for q in points] == [pytest.approx(40.0)] * 5
    assert [q["host_steal_pct"] for q in points] == [0, 0, pytest.approx(15.0), 0, 0]
    warned = [line for line in lines if "steal" in line]
    assert len(warned) == 1 and "50 %" in warned[0], lines
    assert "the hypervisor took 15 % of the CPU time (steal)" in warned[0]
    html, _ = render([run])
    assert "host CPU (steal)" in html and "40 % (15 %)" in html
    shown = render_run(run)
    assert "host CPU %" in shown and "steal %" in shown
