"""``ssdlab run latency-iops`` with real fio on the emulated SSD, then its report.

Every assertion on the measured curves is one the emulator's model guarantees, with a
margin that host noise does not cross on a 2-CPU VM with another CPU-bound process on
one of its CPUs the whole time.

The emulator runs enterprise-tlc with its read path 8x slower (``--ctrl-us 160
--t-read-us 480 --t-xfer-us 16``; writes keep their speed, so preconditioning stays
quick): every command passes a controller that takes 160 us, one at a time, so random
reads cannot exceed 1 / 160 us = 6,250 IOPS however deep the queue, while a read alone
takes 160 + 480 + 16 = 656 us. In the model (closed loop, 16 dies) the mean latency at
1, 2, 4, 8, 16, 32 outstanding reads is 656, 668, 720, 1280, 2560, 5120 us and the IOPS
1.5K, 3.0K, 5.6K, 6.25K, 6.25K, 6.25K. Each curve runs queue depths 1 to 16 per thread
(``--qd 1,2,4,8,16 --full-ladder``: a host that cannot keep up at some point does not
end a curve early by the IOPS-flat rule) and stops there at its 2500 us target
(``--target-latency-us 2500``; by Little's law at most 6,250 IOPS mean at least 2560 us
at 16 outstanding). The host needs a fraction of a CPU for that (the plain profile's
50K IOPS did not leave it that: a loaded host bent the top of the curve), and against
656 us its wake-up noise is small.
Idle GC is off (``--idle-gc off``): after preconditioning it erases blocks whenever
ssdlab pauses for 0.5 s between points, and a read that arrives at an erasing die
waits for it, so the first points' latency would depend on how long the host took
between them (measured at 4x: QD 1 at 558 us mean instead of 350).

From 1 to 2 to 4 outstanding reads the model's latency rises by only 2 and 8 %: noise
crosses that (measured with a busy CPU: 1,162 us at QD 1, then 801 us at QD 2), so the
test does not order those points. It checks, per curve, and with the model's figures:

* every point: at most the controller's limit (+3 % for the measurement; the model
  cannot exceed it), and a mean latency of at least the model's lower bounds: a read
  alone less the cap of the emulator's FUSE floor (656 - 50 us: the emulator never
  replies earlier, emulator/README.md "Reply timing"), and the queue over the limit
  (Little's law: outstanding x 160 us, less 10 % for fio's own time between a
  completion and the next submission);
* latency rises with the queue from 8 outstanding on, where the controller sets it
  (model: it doubles from one queue depth to the next); the last point has the curve's
  highest latency, more than twice its first point's (model: 3.9x and 7.7x; the host
  would have to add 590 us to every read of the first point to cross it);
* IOPS rise with the queue: the peak is more than 1.3x the first point's (model: 4.1x
  and 2.1x);
* and over both curves the peak reaches at least 80 % of the limit (model: 100 %).

The quick profile on 128 MiB, 4 KiB random reads, 1 and 2 threads: 10 points of 2.5 s,
under a minute with preconditioning.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.targets import emulator
from tests.integration.conftest import emulator_available
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
CTRL_US, READ_US, XFER_US = 160, 480, 16  # enterprise-tlc's 20, 60, 2 x 8
MODEL_LIMIT_IOPS = 1e6 / CTRL_US  # one command at a time: 6,250 IOPS
MODEL_QD1_US = CTRL_US + READ_US + XFER_US  # 656 us
TARGET_US = 2500
FLOOR_CAP_US = 50  # ssdlab-emu --fuse-floor-max-us (default)


@pytest.fixture
def emulated_ssd(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, dict[str, str], Path]]:
    why = emulator_available()
    if why:
        pytest.skip(why)
    workdir = Path(tempfile.mkdtemp(prefix="ssdlab-latiops-", dir="/dev/shm"))
    monkeypatch.setattr(emulator, "RUN_DIR", workdir / "emus")
    env = {"SSDLAB_EMU_RUN_DIR": str(workdir / "emus")}
    try:
        emu = emulator.start("latiops", "enterprise-tlc", 128 * MIB, loop=True,
                             options=["--ctrl-us", str(CTRL_US), "--t-read-us", str(READ_US),
                                      "--t-xfer-us", str(XFER_US), "--idle-gc", "off"])
        yield emu.target, env, workdir
    finally:
        emulator.stop("latiops")
        shutil.rmtree(workdir, ignore_errors=True)


def test_quick_latency_iops_on_the_emulated_ssd(
    emulated_ssd: tuple[str, dict[str, str], Path],
) -> None:
    device, env, workdir = emulated_ssd
    store = str(workdir / "results.sqlite")
    run = ssdlab("run", "latency-iops", "--target", device, "--destroy-data", "--profile",
                 "quick", "--block-sizes", "4", "--mixes", "100/0", "--threads", "1,2",
                 "--qd", "1,2,4,8,16", "--full-ladder", "--target-latency-us", str(TARGET_US),
                 "--store", store, env=env, timeout=300)
    assert run.returncode == 0, run.stderr + run.stdout[-3000:]
    assert run.stderr == ""
    assert "[QUICK]" in run.stdout and "emulated SSD latiops" in run.stdout

    exported = ssdlab("export", "last", "--format", "json", "--store", store)
    assert exported.returncode == 0 and exported.stderr == ""
    doc = json.loads(exported.stdout)
    (test,) = doc["tests"]
    assert test["name"] == "latency-iops" and test["status"] == "complete"
    assert [s["kind"] for s in test["steps"]] == ["purge", "precondition"]
    curves = test["result"]["curves"]
    assert [c["threads"] for c in curves] == [1, 2]
    for curve in curves:
        points = curve["points"]
        lat = [p["lat_mean_us"] for p in points]
        iops = [p["iops"] for p in points]
        print(f"{curve['threads']} thread(s): " + ", ".join(
            f"QD {p['iodepth']} {p['iops']:.0f} IOPS {p['lat_mean_us']:.0f} us" for p in points)
            + f"; stop: {curve['stop']['kind']}")
        outstanding = [p["outstanding"] for p in points]
        assert outstanding[:5] == [curve["threads"] * q for q in (1, 2, 4, 8, 16)]
        for p in points:
            # the model's bounds: the controller's limit, a read alone (less the floor's
            # cap), the queue over the limit (Little's law)
            assert p["iops"] <= MODEL_LIMIT_IOPS * 1.03, iops
            assert p["lat_mean_us"] >= MODEL_QD1_US - FLOOR_CAP_US, lat
            assert p["lat_mean_us"] >= 0.9 * p["outstanding"] * 1e6 / MODEL_LIMIT_IOPS, lat
            assert 0 < p["lat_mean_us"] <= p["lat_p99_us"] <= p["lat_p99_9_us"]
            assert 0 <= p["host_cpu_pct"] <= 100
        # latency and IOPS rise with the queue
        rising = zip(outstanding[:-1], lat[:-1], lat[1:], strict=True)
        assert all(b > a for n, a, b in rising if n >= 8), lat
        assert lat[-1] == max(lat) and lat[-1] > 2 * lat[0], lat
        assert max(iops) > 1.3 * iops[0], iops
        assert curve["stop"]["kind"] == "target-latency", curve["stop"]
        assert curve["stop"]["reason"]
    peak = max(c["max_iops"] for c in curves)
    assert 0.8 * MODEL_LIMIT_IOPS <= peak <= 1.03 * MODEL_LIMIT_IOPS, peak
    assert len(test["rounds"]) == sum(len(c["points"]) for c in curves)
    assert "message" in test["result"]["host_bound"] and "numa" in test["result"]

    out = workdir / "report"
    report = ssdlab("report", "last", "-o", str(out), "--no-pdf", "--store", store)
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    assert "Latency vs IOPS: 4 KiB 100/0" in html
    assert 'id="run0-t0-w0-mean"' in html and f"target {TARGET_US} us" in html
    assert "QUICK PROFILE" in html
