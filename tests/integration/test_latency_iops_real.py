"""``ssdlab run latency-iops`` with real fio on the emulated SSD, then its report.

The emulator's enterprise-tlc profile passes every command through a controller that
takes 20 us per command, one at a time: random reads cannot exceed 1 / 20 us = 50K IOPS
however deep the queue, while each read alone takes about 80 us in the model (plus the
FUSE round trip). So the curve must rise in IOPS over the first queue depths, saturate
just below 50K, and from there only its latency grows (Little's law), until the 500 us
target or the flat-IOPS rule stops it. The quick profile on 128 MiB, 4 KiB random reads,
1 and 2 threads: about 10 points of 2.5 s, well under a minute with preconditioning.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import emulator_available
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
MODEL_LIMIT_IOPS = 50_000  # 1 / t_ctrl (20 us) of enterprise-tlc


@pytest.fixture
def emulated_ssd() -> Iterator[tuple[str, dict[str, str], Path]]:
    why = emulator_available()
    if why:
        pytest.skip(why)
    workdir = Path(tempfile.mkdtemp(prefix="ssdlab-latiops-", dir="/dev/shm"))
    env = {"SSDLAB_EMU_RUN_DIR": str(workdir / "emus")}
    try:
        started = ssdlab("emulator", "start", "--name", "latiops", "--size", str(128 * MIB),
                         "--loop", env=env)
        assert started.returncode == 0, started.stderr
        device = next(line.split()[-1] for line in started.stdout.splitlines()
                      if "target:" in line)
        yield device, env, workdir
    finally:
        ssdlab("emulator", "stop", "--all", env=env)
        shutil.rmtree(workdir, ignore_errors=True)


def test_quick_latency_iops_on_the_emulated_ssd(
    emulated_ssd: tuple[str, dict[str, str], Path],
) -> None:
    device, env, workdir = emulated_ssd
    store = str(workdir / "results.sqlite")
    run = ssdlab("run", "latency-iops", "--target", device, "--destroy-data", "--profile",
                 "quick", "--block-sizes", "4", "--mixes", "100/0", "--threads", "1,2",
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
        assert len(points) >= 3
        lat = [p["lat_mean_us"] for p in points]
        iops = [p["iops"] for p in points]
        # latency rises with the queue (allowing 15 % noise between neighbours: through
        # FUSE on a VM, QD 1 pays a wake-up latency that QD 2 partly hides) ...
        assert all(b >= a * 0.85 for a, b in itertools.pairwise(lat)), lat
        assert lat[-1] > 2 * lat[0], lat
        # ... IOPS rise at first and never pass the controller's limit
        assert iops[1] > 1.3 * iops[0], iops
        assert max(iops) <= MODEL_LIMIT_IOPS * 1.03, iops
        for p in points:
            assert 0 < p["lat_mean_us"] <= p["lat_p99_us"] <= p["lat_p99_9_us"]
            assert 0 <= p["host_cpu_pct"] <= 100
        assert curve["stop"]["kind"] in ("target-latency", "iops-flat"), curve["stop"]
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
    assert 'id="run0-t0-w0-mean"' in html and "target 500 us" in html
    assert "QUICK PROFILE" in html
