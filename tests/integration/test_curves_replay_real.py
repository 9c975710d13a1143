"""Curves and trace replay with the real fio: on the emulated SSD (latency rises with the
rate fraction; delivered IOPS track the targets), on a test file in a directory and on a
loop device, and the report pages that show them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ssdlab.plan import replay as rp
from ssdlab.plan.curves import DEFAULT_MIN_DELIVERED_PCT as MIN_DELIVERED_PCT
from ssdlab.targets import emulator
from tests.conftest import LoopFactory
from tests.support.cli import one_line_error, ssdlab
from tests.support.stored import check_stored

# solo (make test runs it alone, after the rest): tmpfs's points are CPU-bound, and its
# half-rate point must deliver half of what the host has just done
pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.solo]

MIB = 1 << 20
DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = str(DATA / "replay-sample.iolog")
SAMPLE_V3 = str(DATA / "replay-sample-v3.iolog")
#: two quick points and the max-rate run, 0.5 s measured after 0.2 s: a smoke of the path
SHORT = ("--profile", "quick", "--workload", "4k-random-read", "--fractions", "50,100",
         "--seconds", "0.5", "--ramp", "0.2")
#: delivered IOPS within this share of the target at the fractions below 100 %
RATE_TOLERANCE = 0.05
#: the emulated SSD's read path, 16x enterprise-tlc's (20, 60 and 2 us)
CTRL_US, READ_US, XFER_US = 320, 960, 32
MODEL_LIMIT_IOPS = 1e6 / CTRL_US  # one command at a time: 3,125 IOPS
MODEL_ALONE_US = CTRL_US + READ_US + XFER_US  # 1,312 us
FLOOR_CAP_US = 50  # ssdlab-emu --fuse-floor-max-us (default)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result


def run_id(result: subprocess.CompletedProcess[str]) -> str:
    match = re.search(r"^run (\S+) complete", result.stdout, re.M)
    assert match, result.stdout
    return match.group(1)


def exported(store: Path, run: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(ssdlab("export", run, "--store", str(store))).stdout)
    return doc


def test_result(doc: dict[str, Any], name: str) -> dict[str, Any]:
    test = next(t for t in doc["tests"] if t["name"] == name)
    result: dict[str, Any] = test["result"]
    return result


test_result.__test__ = False  # type: ignore[attr-defined]


def test_on_the_emulated_ssd_latency_rises_with_the_rate_and_the_report_shows_it(
    emu_run_dir: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    # enterprise-tlc with its read path 16x slower (writes keep their speed, so the fill
    # is quick): every command passes a controller that takes 320 us, one at a time, so
    # 4K random reads cannot exceed 3,125 IOPS, and a read alone takes 320 + 960 + 32 =
    # 1,312 us. fio and the emulator need a small fraction of a CPU for that (a loop
    # device over the emulator serves 38.8K IOPS, emulator/README.md), and against
    # 1.3 ms the host's wake-up noise is small. (At the plain profile's 40K IOPS both CPUs
    # were busy, and with another process on one of them the 10 % point measured 135 us
    # mean against 53 us at 50 %: the host's wake-ups, not the model, decided the low
    # points. At 8x, 6,250 IOPS, with one CPU kept busy and the shared machine's other
    # runs, the 80 % point delivered 4,255 of its 4,958 IOPS: the host, at that moment,
    # not the model, set the rate.)
    # Idle GC off: its erases, whenever the host pauses, would occupy dies.
    device = emulator.start("curves", "enterprise-tlc", 256 * MIB, loop=True, options=[
        "--ctrl-us", str(CTRL_US), "--t-read-us", str(READ_US), "--t-xfer-us", str(XFER_US),
        "--idle-gc", "off"])
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    store = emu_run_dir.parent / "s.sqlite"
    # 4K random reads (128 outstanding, one fio job): no GC effects, the controller queue
    # alone; 2 s points. The whole device is written first and the reads run on its first
    # half (--fill-region 50): a read of a page never written takes no die time. Idle CPUs
    # poll while fio runs (ssdlab's default, cpuidle.py); host CPU and steal are printed
    curves = ok(ssdlab("run", "curves", "--target", device.target, "--destroy-data",
                       "--profile", "quick", "--workload", "4k-random-read", "--jobs", "1",
                       "--seconds", "2", "--fill-region", "50", "--store", str(store),
                       env=env, timeout=120))
    assert "QUICK" in curves.stdout
    doc = exported(store, run_id(curves))
    w = test_result(doc, "curves")["workloads"][0]
    points = [p for p in w["points"] if p["kind"] == "fraction"]
    assert [p["fraction_pct"] for p in points] == [10, 50, 80, 100]
    means = [p["lat_mean_us"] for p in points]
    print(f"emulator curve: max {w['max_iops']:.0f} IOPS; " + ", ".join(
        f"{p['fraction_pct']} %: {p['iops']:.0f} IOPS (target {p['target_iops']:.0f}) "
        f"mean {p['lat_mean_us']:.0f} us p99 {p['lat_p99_us']:.0f} us host CPU "
        f"{p['host_cpu_pct']:.0f} % steal {p['host_steal_pct']:.1f} %" for p in points)
        + f"; idle CPUs: {doc['host']['cpu_idle']['wakeup_latency']}")
    # what the model guarantees: the maximum is the controller's limit (the host keeps up
    # with it); no read is faster than a read alone less the cap of the emulator's FUSE
    # floor (it never replies earlier, emulator/README.md "Reply timing"); at 100 % of
    # the maximum the controller is the bottleneck and the queue fills towards 128 x
    # 320 us = 41 ms, so the top point has the curve's highest latency, more than twice
    # its lowest point's (10 %: the reads mostly alone, 1.3 ms). Between 10, 50 and 80 %
    # the mean depends on how fio's rate limit bunches its submissions and on host noise,
    # so those points are not ordered.
    assert 0.8 * MODEL_LIMIT_IOPS <= w["max_iops"] <= 1.03 * MODEL_LIMIT_IOPS, w["max_iops"]
    for p in points:
        assert p["lat_mean_us"] >= MODEL_ALONE_US - FLOOR_CAP_US, means
        assert p["iops"] <= 1.03 * MODEL_LIMIT_IOPS, p
    assert means[-1] == max(means) and means[-1] > 2 * means[0], means
    # delivered IOPS track their targets below saturation; at 100 % at least 85 %
    for p in points[:-1]:
        assert abs(p["iops"] / p["target_iops"] - 1) <= RATE_TOLERANCE, p
        assert not p["short"]
    assert points[-1]["iops"] >= 0.85 * points[-1]["target_iops"]
    assert doc["plan"]["preset"] == {"preset": "curves", "preset_version": 1,
                                     "preset_title": "vdbench-style curve workloads"}

    replay = ok(ssdlab("run", "replay", "--target", device.target, "--destroy-data",
                       "--trace", SAMPLE, "--no-stall", "--qd", "8", "--store", str(store),
                       env=env))
    cell = test_result(exported(store, run_id(replay)), "replay")["cell"]
    assert cell["ios"] == 3000 and cell["iops"] > 0 and cell["lat_p99_us"] > 0
    print(f"emulator replay: {cell['iops']:.0f} IOPS, mean {cell['lat_mean_us']:.0f} us")

    out = tmp_path / "report"
    ok(ssdlab("report", run_id(curves), run_id(replay), "-o", str(out), "--no-pdf",
              "--store", str(store)))
    html = (out / "report.html").read_text()
    for text in ("Curves (vdbench style)", "Curve: 4K random read",
                 "latency against delivered IOPS", "curves version 1", "Trace replay",
                 "iolog-v2", "replayed 3,000 I/Os"):
        assert text in html, text
    shown = ok(ssdlab("show", run_id(curves), "--store", str(store))).stdout
    assert "preset curves v1" in shown and "delivered IOPS" in shown and "100 %" in shown
    print(f"emulator test: {time.monotonic() - started:.1f} s")


def test_curves_quick_on_a_directory_and_on_a_loop_device(
    shm_dir: Path, loop_device: LoopFactory
) -> None:
    started = time.monotonic()
    store = str(shm_dir / "s.sqlite")
    work = shm_dir / "work"
    work.mkdir()
    # SQL: a block-size split, a 70/30 mix and hot spots, limited in bytes (fio rate=)
    on_dir = ok(ssdlab("run", "curves", "--dir", str(work), "--size", "64MiB", *SHORT,
                       "--workload", "sql", "--with-120", "--store", store))
    assert os.listdir(work) == []  # the work directory and its file are gone
    doc = exported(Path(store), run_id(on_dir))
    check_stored(store, run_id(on_dir))  # every stored document is its declared record
    assert doc["plan"]["dir"]["fs_type"] == "tmpfs"
    points = test_result(doc, "curves")["workloads"][0]["points"]
    assert [p["kind"] for p in points] == ["max", "fraction", "fraction", "unthrottled"]
    half = points[1]
    assert half["fio_rate"].startswith("rate=")
    # fio's rate= holds the 50 % point near its target; on a starved CPU (a loaded CI
    # host) the point can fall short, and then the product must say so: either way the
    # delivered share is the stored one and a shortfall is flagged, never passed as met
    delivered = half["iops"] / half["target_iops"]
    assert half["delivered_pct"] == pytest.approx(100 * delivered, rel=1e-3), half
    assert half["short"] == (half["delivered_pct"] < MIN_DELIVERED_PCT), half
    assert half["short"] or abs(delivered - 1) <= 2 * RATE_TOLERANCE, half

    device = loop_device(128 * MIB)
    on_loop = ok(ssdlab("run", "curves", "--target", device, "--destroy-data", *SHORT,
                        "--fill-region", "25", "--workload", "70-30-8k", "--store", store))
    region_doc = exported(Path(store), run_id(on_loop))
    check_stored(store, run_id(on_loop))
    result = test_result(region_doc, "curves")
    assert result["fill"]["bytes"] == 128 * MIB
    # the whole device was filled, then every measured job ran on the first 25 % of it
    assert region_doc["plan"]["region"] == {"offset_bytes": 0, "size_bytes": 32 * MIB}
    jobs = [r["job_file"] for t in region_doc["tests"] for r in t["rounds"]
            if r.get("job_file")]
    assert jobs and all(f"size={32 * MIB}\n" in j and "offset=0\n" in j for j in jobs)
    w = result["workloads"][0]
    assert w["name"] == "70-30-8k" and all(p["iops"] > 0 for p in w["points"])
    assert w["points"][1]["fio_rate"].startswith("rate_iops=")
    assert w["points"][1]["fio_rate"].count(",") == 1  # a read,write split
    dry = ok(ssdlab("run", "curves", "--target", device, "--destroy-data", *SHORT,
                    "--dry-run"))
    assert "DRY RUN" in dry.stdout and "[4k-random-read-max]" in dry.stdout
    print(f"dir + loop curves: {time.monotonic() - started:.1f} s")


def test_replay_on_a_directory_and_a_loop_device(
    shm_dir: Path, loop_device: LoopFactory
) -> None:
    started = time.monotonic()
    store = str(shm_dir / "s.sqlite")
    work = shm_dir / "work"
    work.mkdir()
    timed = ok(ssdlab("run", "replay", "--dir", str(work), "--size", "64MiB", "--trace",
                      SAMPLE_V3, "--log-interval", "250", "--store", store))
    assert os.listdir(work) == []
    doc = exported(Path(store), run_id(timed))
    check_stored(store, run_id(timed))  # every stored document is its declared record
    result = test_result(doc, "replay")
    # The v3 sample was recorded at 1,000 IOPS for 1.5 s and is replayed with its timing.
    # What fio guarantees of a timed replay: every I/O of the trace, none before its
    # time. So the replay is never ahead of the trace: not overall (its IOPS at most the
    # trace's, +20 % for where fio's clock starts) nor at the end of any 250 ms interval
    # (the I/Os so far at most the trace's by then, + one interval's). How far behind it
    # falls is the host's: fio sleeps between I/Os and drops the lateness it cannot make
    # up at once (fio 3.33), so late timers slow the replay (measured 315 IOPS with one
    # CPU kept busy, 1,000 on an idle machine); that is not judged. Instead: the job asks
    # fio for the trace's own pace (no replay_no_stall, no replay_time_scale).
    trace = rp.read_trace(SAMPLE_V3)
    assert trace.duration_ms is not None
    trace_iops = trace.ios / (trace.duration_ms / 1000)
    assert result["cell"]["ios"] == trace.ios
    assert result["cell"]["iops"] <= 1.2 * trace_iops, result["cell"]["iops"]
    assert len(result["timeline"]) >= 4  # 1.5 s at least
    done = 0.0
    for point in result["timeline"]:
        done += point["iops"] * 0.25
        assert done <= trace_iops * (point["t_s"] + 0.25), result["timeline"]
    [job] = [r["job_file"] for t in doc["tests"] for r in t["rounds"] if r.get("job_file")]
    assert f"read_iolog={SAMPLE_V3}" in job
    assert "replay_no_stall" not in job
    assert "replay_time_scale" not in job

    device = loop_device(64 * MIB)
    fast = ok(ssdlab("run", "replay", "--target", device, "--destroy-data", "--trace",
                     SAMPLE, "--no-stall", "--qd", "8", "--store", store))
    cell = test_result(exported(Path(store), run_id(fast)), "replay")["cell"]
    assert cell["ios"] == 3000 and cell["write_bytes"] > 0

    # a binary blktrace (200 queue events, one write in three) replays too
    blk = shm_dir / "t.blktrace"
    blk.write_bytes(b"".join(rp.BLK_EVENT.pack(
        rp.BLK_MAGIC | 7, i, i * 1_000_000, i * 8, 4096,
        ((rp.BLK_TC_WRITE if i % 3 == 0 else 1) << rp.BLK_TC_SHIFT) | rp.BLK_TA_QUEUE,
        1, 0, 0, 0, 0) for i in range(200)))
    traced = ok(ssdlab("run", "replay", "--target", device, "--destroy-data", "--trace",
                       str(blk), "--no-stall", "--store", store))
    cell = test_result(exported(Path(store), run_id(traced)), "replay")["cell"]
    assert (cell["ios"], cell["write_bytes"]) == (200, 67 * 4096)

    small = loop_device(16 * MIB)
    beyond = ssdlab("run", "replay", "--target", small, "--destroy-data", "--trace", SAMPLE,
                    "--store", store)
    assert beyond.returncode == 2 and "beyond the end of" in one_line_error(beyond)
    print(f"dir + loop replay: {time.monotonic() - started:.1f} s")
