#!/usr/bin/env python3
"""Benchmark: where a round's time goes beyond its cells' planned seconds, with the fio
gate (engine/gate.py) and without it, side by side in one run.

On emulated SSDs (enterprise-tlc, by default 1 GiB and 256 MiB, each over a loop device,
made for the purpose and removed after), this runs the quick PTS IOPS test (``ssdlab run
pts --profile quick --tests iops``: 56 cells of 0.5 s a round, after a purge and a
preconditioning) for ``--rounds`` rounds, alternately with the gate (A) and with fio's
own stonewalls (B, ``SSDLAB_FIO_GATE=0``), ABAB. From each run's store it reads every
round's fio invocation (start, end, its JSON) and its stored job file, and reports per
round:

* planned: each cell's ``runtime`` plus ``ramp_time``, added up;
* the cells' own seconds: fio's ``job_runtime`` of each cell (from its first I/O to its
  last completion, so with the drain of the I/O in flight when its runtime ran out),
  added up. A cell cannot end before the device has completed its I/O, and the next
  must not start before, so no barrier can cut this;
* fio's wall time / planned (the issue's bound: at most 1.3) and / the cells' own seconds;
* per cell: the drain (own - planned) and the dead time (fio's wall - own);
* the drain per round against the cells' mean completion latencies added up: by
  Little's law each cell's last I/Os complete about one mean latency after its runtime
  ran out;
* the round-to-round time (fio plus ssdlab's own work between rounds) / planned.

Results: bench/results/fio_dead_time.json and .md (overwritten). Needs root (loop
devices); touches only the emulators it starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ssdlab.engine.gate import GATE_ENV
from ssdlab.engine.jobtext import parse_job_file
from ssdlab.store.db import Store
from ssdlab.targets import emulator
from ssdlab.units import parse_size

RESULTS = Path(__file__).resolve().parent / "results"
BOUND = 1.3
MODES = {"gate": "1", "stonewall": "0"}


_UNITS = (("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0))


def fio_seconds(value: str) -> float:
    """A fio time value (``1s``, ``500ms``, a bare number: seconds) in seconds."""
    for suffix, scale in _UNITS:
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * scale
    return float(value)


def planned_seconds(job_text: str) -> tuple[float, int]:
    """The cells' planned seconds (runtime + ramp_time of each job) and their number."""
    jobs = parse_job_file(job_text).jobs
    total = 0.0
    for job in jobs:
        for key in ("runtime", "ramp_time"):
            value = job.value(key)
            if value:
                total += fio_seconds(value)
    return total, len(jobs)


def own_seconds(job_text: str, stdout: str) -> float:
    """The cells' own seconds as fio measured them: each job's ``job_runtime`` (from its
    first I/O to its last completion, the drain of what was in flight when its runtime
    ran out included), averaged over its clones (group_reporting adds them up)."""
    clones = {job.name: job.threads for job in parse_job_file(job_text).jobs}
    document = json.loads(stdout[stdout.index("{"):])
    return float(sum(job["job_runtime"] / 1000 / clones.get(job["jobname"], 1)
                     for job in document["jobs"]))


def latency_seconds(stdout: str) -> float:
    """The cells' mean completion latencies, added up (of a mixed cell, its slower
    direction's): by Little's law, how long each cell's drain should take."""
    document = json.loads(stdout[stdout.index("{"):])
    return float(sum(max(job[d]["clat_ns"]["mean"] for d in ("read", "write")
                         if job[d]["io_bytes"]) / 1e9 for job in document["jobs"]))


def one_run(mode: str, device: str, rounds: int, work: Path) -> list[dict[str, float]]:
    store = work / f"{mode}-{len(list(work.glob(f'{mode}-*')))}.sqlite"
    env = {**os.environ, GATE_ENV: MODES[mode]}
    cmd = [sys.executable, "-m", "ssdlab", "run", "pts", "--target", device,
           "--destroy-data", "--profile", "quick", "--tests", "iops", "--max-rounds",
           str(rounds), "--store", str(store)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode}: ssdlab run failed ({done.returncode}): {done.stderr}")
    with Store.open(store) as opened:
        (summary,) = opened.list_runs()
        run = opened.load(summary.run_id, with_raw=True)
    out = []
    rows = run.test("iops").rounds
    for i, rnd in enumerate(rows):
        planned, cells = planned_seconds(rnd.job_text or "")
        fio_s = rnd.ended_at - rnd.started_at
        own = own_seconds(rnd.job_text or "", rnd.stdout or "")
        row = {"round": rnd.round_no, "planned_s": planned, "cells": cells, "fio_s": fio_s,
               "own_s": own, "fio_ratio": fio_s / planned, "own_ratio": fio_s / own,
               "drain_s": own - planned, "latency_s": latency_seconds(rnd.stdout or ""),
               "drain_per_cell_s": (own - planned) / cells,
               "dead_per_cell_s": (fio_s - own) / cells}
        if i + 1 < len(rows):
            step = rows[i + 1].started_at - rnd.started_at
            row |= {"round_to_round_s": step, "round_ratio": step / planned}
        out.append(row)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (>= 5)")
    parser.add_argument("--repeats", type=int, default=1, help="ABAB pairs per size")
    parser.add_argument("--sizes", default="1GiB,256MiB",
                        help="emulated SSD sizes, comma-separated (default 1GiB,256MiB)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (the emulated SSD's loop device)")
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="ssdlab-bench-dead-"))
    os.environ.setdefault("SSDLAB_EMU_RUN_DIR", str(work / "emus"))
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    try:
        for size in args.sizes.split(","):
            emu = emulator.start("deadtime", "enterprise-tlc", parse_size(size), loop=True)
            rows: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
            try:
                for _ in range(args.repeats):
                    for mode in MODES:
                        rows[mode] += one_run(mode, str(emu.loop_device), args.rounds, work)
                        print(f"{size} {mode}: {len(rows[mode])} rounds", flush=True)
            finally:
                emulator.stop("deadtime")
            results[size] = rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write(results, args, {"before": load_before, "after": os.getloadavg()})
    return 0


KEYS = ("fio_ratio", "own_ratio", "round_ratio", "drain_per_cell_s", "dead_per_cell_s",
        "planned_s", "own_s", "fio_s", "drain_s", "latency_s")


def _summary(rows: list[dict[str, float]], key: str) -> dict[str, float]:
    values = [r[key] for r in rows if key in r]
    return {"median": statistics.median(values), "max": max(values), "min": min(values)}


def _table(size: str, summary: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    g, s = summary["gate"], summary["stonewall"]

    def row(label: str, key: str, fmt: str, spread: bool = True) -> str:
        cells = []
        for side in (g, s):
            text = format(side[key]["median"], fmt)
            if spread:
                text += f" ({format(side[key]['min'], fmt)}-{format(side[key]['max'], fmt)})"
            cells.append(text)
        return f"| {label} | {cells[0]} | {cells[1]} |"

    return [
        f"### {size}",
        "",
        "| median (min-max) over rounds | gate | stonewall (SSDLAB_FIO_GATE=0) |",
        "| --- | --- | --- |",
        row("fio wall / planned", "fio_ratio", ".3f"),
        row("fio wall / the cells' own seconds", "own_ratio", ".3f"),
        row("round to round / planned", "round_ratio", ".3f"),
        row("dead time per cell (s): fio wall - own", "dead_per_cell_s", ".3f"),
        row("drain per cell (s): own - planned", "drain_per_cell_s", ".3f"),
        row("fio wall per round (s)", "fio_s", ".1f"),
        row("the cells' own seconds per round (s)", "own_s", ".1f"),
        row("drain per round (s): own - planned", "drain_s", ".1f"),
        row("the cells' mean completion latencies, added up (s)", "latency_s", ".1f"),
        row("planned seconds per round (s)", "planned_s", ".1f", spread=False),
        "",
    ]


def write(results: dict[str, dict[str, list[dict[str, float]]]],
          args: argparse.Namespace, load: dict[str, tuple[float, float, float]]) -> None:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    summary = {size: {m: {k: _summary(rows, k) for k in KEYS} for m, rows in modes.items()}
               for size, modes in results.items()}
    verdicts = {}
    for size, modes in summary.items():
        gate = modes["gate"]
        verdicts[size] = {
            "planned": "PASS" if gate["fio_ratio"]["max"] <= BOUND else "FAIL",
            "own": "PASS" if gate["own_ratio"]["max"] <= BOUND else "FAIL",
        }
    doc: dict[str, Any] = {"measured": when, "cpus": os.cpu_count(),
                           "machine": platform.machine(), "bound": BOUND,
                           "load_average": load, "verdicts": verdicts,
                           "rounds": args.rounds,
                           "repeats": args.repeats, "summary": summary,
                           "rounds_measured": results}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fio_dead_time.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Dead time per round: the fio gate against fio's own stonewalls",
        "",
        f"Measured {when} on {os.cpu_count()} CPUs. Produced by `bench/fio_dead_time.py`; "
        "every number is in `fio_dead_time.json`. The quick PTS IOPS test (56 cells of "
        "0.5 s a round, after purge and preconditioning) on emulated SSDs "
        f"(enterprise-tlc), {args.rounds} rounds a run, {args.repeats} run(s) each way "
        "per size, alternately. Load average (1, 5, 15 min) before: "
        f"{', '.join(f'{x:.1f}' for x in load['before'])}; after: "
        f"{', '.join(f'{x:.1f}' for x in load['after'])} (2 CPUs).",
        "",
        f"Bound: fio's wall time per round at most {BOUND} x the cells' planned seconds, "
        "every round, with the gate. Where the device itself keeps a cell going past its "
        "planned seconds (the drain: fio's own `job_runtime` of the cell beyond its "
        "runtime), the bound is also shown against the cells' own seconds, the time no "
        "barrier between cells can cut.",
        "",
        "| size | gate: wall / planned, every round | gate: wall / own, every round |",
        "| --- | --- | --- |",
    ]
    for size, verdict in verdicts.items():
        gate = summary[size]["gate"]
        lines.append(f"| {size} | {verdict['planned']} (max {gate['fio_ratio']['max']:.3f})"
                     f" | {verdict['own']} (max {gate['own_ratio']['max']:.3f}) |")
    lines.append("")
    for size in summary:
        lines += _table(size, summary[size])
    (RESULTS / "fio_dead_time.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
