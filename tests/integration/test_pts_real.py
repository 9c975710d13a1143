"""The core issue's acceptance run: quick PTS with real fio on a loop device.

The loop device sits over the emulated SSD's disk file (direct I/O): the run is the
session's shared quick PTS (tests/integration/conftest.py), which the report tests
render too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.conftest import QUICK_PTS_TIMEOUT_S, QuickPts
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.slow,
              pytest.mark.timeout(QUICK_PTS_TIMEOUT_S)]



def _test(doc: dict[str, Any], name: str) -> dict[str, Any]:
    test: dict[str, Any] = next(t for t in doc["tests"] if t["name"] == name)
    return test


def test_quick_pts_on_a_loop_device_exports_every_cell(quick_pts: QuickPts) -> None:
    run, store = quick_pts.result, quick_pts.store
    assert run.returncode == 0, run.stderr + run.stdout[-3000:]
    assert quick_pts.run_id and "emulated SSD pts" in run.stdout
    assert run.stderr == ""
    assert "[QUICK]" in run.stdout

    # by its id: the session's store also holds the runs the report test adds
    exported = ssdlab("export", quick_pts.run_id, "--format", "json", "--store", str(store))
    assert exported.returncode == 0 and exported.stderr == ""
    doc = json.loads(exported.stdout)
    assert doc["schema_version"] == 1 and doc["run"]["quick"] is True

    iops = _test(doc, "iops")
    cells = {(c["block_bytes"], c["read_pct"]) for c in iops["result"]["cells"]}
    assert len(cells) == 8 * 7  # 0.5 KiB included: a loop device has 512-byte sectors
    assert all(c["iops"] > 0 for c in iops["result"]["cells"])
    throughput = [
        c for t in doc["tests"] if t["name"].startswith("throughput") for c in t["result"]["cells"]
    ]
    assert {(c["block_bytes"], c["read_pct"]) for c in throughput} == {
        (1024 * 1024, 100),
        (1024 * 1024, 0),
        (128 * 1024, 100),
        (128 * 1024, 0),
    }
    assert all(c["bw_bytes_per_s"] > 0 for c in throughput)
    latency = _test(doc, "latency")["result"]["cells"]
    assert len(latency) == 3 * 3
    for cell in latency:
        assert 0 < cell["lat_mean_us"] <= cell["lat_p99_us"] <= cell["lat_p99_99_us"]
        assert cell["lat_p99_99_us"] <= cell["lat_max_us"]

    for test in doc["tests"]:
        verdict = test["verdict"]
        assert set(verdict) >= {"rule", "window_rounds", "attained", "variables", "message"}
        assert test["status"] == ("steady" if verdict["attained"] else "not_steady")
        for var in verdict["variables"].values():
            assert {"window_average", "data_excursion", "slope_excursion"} <= set(var)
        assert test["rounds"] and all(r["job_file"] for r in test["rounds"])
        purge = next(s for s in test["steps"] if s["kind"] == "purge")
        assert purge["detail"]["method"] == "blkdiscard" and purge["detail"]["ok"] is True

    target, host = doc["target"], doc["host"]
    assert target["capacity_bytes"] == quick_pts.size_bytes
    assert target["logical_sector_bytes"] == 512
    assert {"model", "serial", "firmware", "rotational", "numa_node", "scheduler"} <= set(target)
    assert {"cpu_model", "cpu_count", "memory_bytes", "kernel"} <= set(host)
    assert doc["versions"]["fio"].startswith("3.")

    shown = ssdlab("show", quick_pts.run_id, "--store", str(store))
    assert shown.returncode == 0 and shown.stderr == ""
    assert "QUICK PROFILE" in shown.stdout and "1024 KiB" in shown.stdout


def test_the_run_keeps_what_the_drive_counted_as_written(quick_pts: QuickPts) -> None:
    # issue 15, item 7: the health log (the emulated SSD keeps NVMe's Data Units Written)
    # read at the start and the end of the run; what it says the run wrote is within 1 %
    # (and one 512,000-byte unit) of the emulator's exact count over the same span
    from ssdlab.report.parts import written_by_run, written_text
    from ssdlab.store.db import Store
    with Store.open(quick_pts.store) as store:
        run = store.load(quick_pts.run_id)
    written = written_by_run(run)
    assert written is not None
    host, resolution, media = written
    truth = [e.detail for e in run.events if e.kind == "emulator-stats" and e.detail]
    exact = (truth[-1]["wear"]["lifetime_host_write_bytes"]
             - truth[0]["wear"]["lifetime_host_write_bytes"])
    assert exact > 0 and resolution == 512_000
    assert abs(host - exact) <= max(0.01 * exact, resolution), (host, exact)
    assert media is not None and media >= exact
    assert "by the drive's own count" in written_text(run)
