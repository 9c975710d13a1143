"""Stores for the dashboard's tests and benchmark, written through the store's own API:
a running PTS-like run whose rounds are added one by one, and many finished runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunHead, TestState
from tests.support.records import doc

TEST = "iops"
CELLS = (("iops_bs4096_r100", 4096, 100), ("iops_bs4096_r0", 4096, 0))
VARIABLE = "IOPS 4 KiB 0/100"


def params(max_rounds: int = 25) -> dict[str, Any]:
    """A PTS IOPS test's parameters as run/pts_run.py stores them (the parts read)."""
    tracking = [{"name": VARIABLE, "cell": "iops_bs4096_r0", "metric": "iops"}]
    return {"title": "IOPS", "rule": "snia", "window": 5, "max_rounds": max_rounds,
            "tracking_set": "v2.0", "tracking": {"v2.0": tracking},
            "cell_seconds": 1.0, "round_seconds": 2.0, "quick": True}


def new_running_run(store: Store, target: str = "/dev/nvme9n1",
                    model: str = "Lab SSD 3840", max_rounds: int = 25) -> str:
    run_id = store.new_run(RunHead(
        "pts", "quick", True, {"path": target, "model": model}, {"hostname": "lab-1"},
        doc({"suite": "pts", "tests": [TEST, "throughput"],
              "options": {"rule": "snia", "max_rounds": max_rounds}}),
        {"ssdlab": "test"}, ["run", "pts"]))
    store.set_test(run_id, TEST, TestState("running", doc(params(max_rounds))))
    return run_id


def cell(name: str, block: int, read_pct: int, iops: float) -> dict[str, Any]:
    return {"cell": name, "block_bytes": block, "read_pct": read_pct, "pattern": "random",
            "threads": 2, "iodepth": 32, "iops": iops, "bw_bytes_per_s": iops * block,
            "lat_mean_us": 1e6 * 64 / iops, "lat_max_us": 9000.5, "lat_p50_us": 250.25,
            "lat_p99_us": 700.0 + read_pct, "lat_p99_9_us": 1500.125,
            "lat_p99_99_us": 4000.0, "error": 0}


def round_iops(round_no: int) -> float:
    """IOPS that settle: 300,000 falling to about 200,000, a little noise."""
    return 200_000.0 + 100_000.0 / round_no + (1_000.0 if round_no % 2 else -1_000.0)


def add_round(store: Store, run_id: str, round_no: int, test: str = TEST) -> dict[str, Any]:
    """Store round ``round_no``; the round as stored (tracking, cells)."""
    iops = round_iops(round_no)
    cells = [cell(name, block, read_pct, iops * (1.2 if read_pct else 1.0))
             for name, block, read_pct in CELLS]
    tracking = {VARIABLE: cells[1]["iops"]}
    now = time.time()
    store.add_round(run_id, test, RoundRecord(
        round_no, "ok", tracking, [doc(c) for c in cells], None, now - 2.0, now))
    return {"tracking": tracking, "cells": cells}


def many_runs(path: Path, count: int) -> None:
    """``count`` finished runs of a few suites, targets and models (one test each)."""
    with Store.open(path) as store:
        for n in range(count):
            suite = ("pts", "saturation", "presets", "curves")[n % 4]
            run_id = store.new_run(RunHead(
                suite, "quick" if n % 3 else "default", n % 3 != 0,
                {"path": f"/dev/nvme{n % 7}n1", "model": f"Model {n % 11}"},
                {"hostname": f"lab-{n % 5}"}, doc({"suite": suite}), {}, ["run", suite]))
            store.set_test(run_id, TEST, TestState("steady", doc()))
            store.finish_run(run_id, ("complete", "complete", "failed", "interrupted")[n % 4])
