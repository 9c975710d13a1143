"""``ssdlab run peak`` with real fio on a zram device of its own: a short search (at most
8 probes of 0.3 s), then show, export and report. Every assertion is on structure, or on
what the search guarantees whatever the machine measures (the peak is the best point it
kept, within the bounds it was given); none on a throughput a noisy host could cross."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ZramFactory
from tests.support.cli import HINTED, killed_at_exit, one_line_error, ssdlab, wait_for
from tests.support.stored import check_stored

pytestmark = [pytest.mark.root, pytest.mark.fio]

SEARCH = ("--profile", "quick", "--probe-seconds", "0.3", "--ramp-seconds", "0.1",
          "--engines", "io_uring,psync", "--max-threads", "2", "--max-qd", "16",
          "--max-probes", "8", "--max-latency", "mean=10s")


def test_a_short_peak_search_on_zram(zram_device: ZramFactory, tmp_path: Path) -> None:
    device = zram_device(256 << 20)
    store = str(tmp_path / "results.sqlite")
    refused = ssdlab("run", "peak", "--target", device, *SEARCH, "--store", store, timeout=60)
    assert refused.returncode == 3 and "--destroy-data" in one_line_error(refused)

    dry = ssdlab("run", "peak", "--target", device, "--workloads", "rnd4k_read", *SEARCH,
                 "--dry-run", "--store", store, timeout=60)
    assert dry.returncode == 0 and dry.stderr == "" and "DRY RUN" in dry.stdout
    assert "ioengine=io_uring" in dry.stdout and "NUMA:" in dry.stdout

    run = ssdlab("run", "peak", "--target", device, "--workloads", "rnd4k_read", *SEARCH,
                 "--store", store, timeout=120)
    assert run.returncode == 0, run.stderr + run.stdout[-3000:]
    assert run.stderr == "" and "rnd4k_read" in run.stdout and "limited by" in run.stdout

    exported = ssdlab("export", "last", "--format", "json", "--store", store)
    assert exported.returncode == 0 and exported.stderr == ""
    (test,) = json.loads(exported.stdout)["tests"]
    check_stored(store, json.loads(exported.stdout)["run"]["id"])  # its declared records
    result = test["result"]
    assert test["status"] == "complete" and result["found"]
    steps, peak = result["steps"], result["peak"]
    assert 1 <= len(steps) == len(test["rounds"]) == result["probes"] <= 8
    assert [s["round_no"] for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0]["engine"] == "io_uring" and (steps[0]["threads"], steps[0]["iodepth"]) \
        == (1, 1)
    for s in steps:
        assert 1 <= s["threads"] <= 2 and 1 <= s["iodepth"] <= 16
        assert s["engine"] in ("io_uring", "psync")
        assert s["iodepth"] == 1 or s["engine"] != "psync"
    assert_the_peak_is_the_search_s(steps, peak)
    assert peak["lat_mean_us"] > 0 and peak["lat_p99_us"] is not None
    assert result["knee"] is not None and result["limited_by"] in ("host", "drive")
    assert "NUMA" in result["pinning"] and result["ceiling"] == "mean <= 10 s"

    auto = ("run", "pts", "--target", device, "--destroy-data", "--profile", "quick",
            "--threads", "auto", "--qd", "auto", "--store", store, "--dry-run")
    planned = ssdlab(*auto, "--tests", "iops")
    assert planned.returncode == 0 and planned.stderr == "", planned.stderr
    run_id = json.loads(exported.stdout)["run"]["id"]
    assert (f"{peak['threads']} threads x QD {peak['iodepth']}; threads/QD from peak run "
            f"{run_id} (rnd4k_read: ") in planned.stdout
    no_peak = ssdlab(*auto, "--tests", "throughput")  # no sequential workload was searched
    assert no_peak.returncode == 2
    assert f"run `{HINTED} run peak --target" in one_line_error(no_peak)

    shown = ssdlab("show", "last", "--store", store)
    assert shown.returncode == 0 and shown.stderr == "" and "latency at the peak" in shown.stdout
    out = tmp_path / "report"
    report = ssdlab("report", "last", "-o", str(out), "--no-pdf", "--store", store)
    assert report.returncode == 0, report.stderr
    html = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "Every probe, in the order the search made it" in html


def assert_the_peak_is_the_search_s(steps: list[dict[str, Any]], peak: dict[str, Any]) -> None:
    """The peak is the best point measured, or, when points were measured again
    (docs/peak.md, confirm), the lightest load whose two-probe mean is within 2 % of the
    highest, with its second probe's figures."""
    kept = [s for s in steps if s["iops"] > 0 and s["lat_mean_us"] is not None]
    again = [s for s in kept if s["phase"] == "confirm"]
    if not again:
        assert peak["iops"] == max(s["iops"] for s in kept)
        return

    def key(s: dict[str, Any]) -> tuple[Any, ...]:
        return s["engine"], s["threads"], s["iodepth"], s["split"]

    first = {key(s): s["iops"] for s in kept if s["phase"] != "confirm"}
    means = {key(s): (first[key(s)] + s["iops"]) / 2 for s in again}
    assert any(key(s) == key(peak) and s["iops"] == peak["iops"] for s in again)
    assert means[key(peak)] * 1.02 > max(means.values())
    equal = [k for k, m in means.items() if m * 1.02 > max(means.values())]
    assert peak["threads"] * peak["iodepth"] == min(t * q for _, t, q, _ in equal)


def test_a_read_only_peak_run_resumes_without_destroy_data(zram_device: ZramFactory,
                                                           tmp_path: Path) -> None:
    """A run of read workloads needs no --destroy-data on a device, to start or to resume.
    The interrupt must come before the run ends: after the first stored probe, at least
    seven probes of 1 s each are still to come (psync grows its jobs, then libaio is tried
    at that load and at the deepest one, in each of two workloads), so the test's 0.2 s
    poll has seconds to spare on a loaded host. With one workload and 0.5 s probes, a
    search that stopped after its second probe (CPU-bound on zram) ended first twice."""
    device = zram_device(128 << 20)
    store = tmp_path / "results.sqlite"
    slow = ("--profile", "quick", "--probe-seconds", "1", "--ramp-seconds", "0.1",
            "--engines", "psync,libaio", "--max-threads", "8", "--max-probes", "6",
            "--workloads", "rnd4k_read,seq128k_read")
    proc = subprocess.Popen([sys.executable, "-m", "ssdlab", "run", "peak", "--target", device,
                             *slow, "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def rounds() -> int:
        try:
            with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
                return int(db.execute("SELECT count(*) FROM rounds").fetchone()[0])
        except sqlite3.Error:
            return 0
    with killed_at_exit(proc):
        wait_for("the first stored probe", lambda: rounds() >= 1 or proc.poll() is not None,
                 timeout=60)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, "the run ended before it was interrupted:\n" + out
    stopped = rounds()
    assert stopped >= 1

    resumed = ssdlab("resume", "last", "--store", str(store), timeout=120)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout[-2000:]
    assert "--destroy-data" not in resumed.stderr
    exported = ssdlab("export", "last", "--format", "json", "--store", str(store))
    tests = json.loads(exported.stdout)["tests"]
    assert [t["name"] for t in tests] == ["rnd4k_read", "seq128k_read"]
    for test in tests:
        assert test["status"] == "complete" and test["result"]["found"]
        assert len(test["rounds"]) == test["result"]["probes"]
        assert [s["round_no"] for s in test["result"]["steps"]] == \
            list(range(1, len(test["rounds"]) + 1))
    assert sum(len(t["rounds"]) for t in tests) >= stopped
