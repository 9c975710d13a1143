#!/usr/bin/env python3
"""Benchmark: the emulated SSD's own ceiling against the devices it models.

The emulator (``emulator/``, ``ssdlab-emu``) delays each reply until the completion time
its FTL model computes, so fio should measure the model, not the emulator. That holds
only while the modelled device is well below what the emulator itself can serve. This
measures both in one run, side by side, with the same fio jobs:

  ceiling   ``--zero-latency``: every NAND and controller latency 0, so fio measures
            FUSE, the daemon and the kernel: the fastest any modelled device can look;
  profiles  enterprise-tlc, client-slc and max-op as built in.

For each it runs, on a fresh 1 GiB emulator: 4 KiB random write QD32 x 2 jobs from
fresh-out-of-box (a short burst that stays inside the FOB / SLC region), 128 KiB
sequential write QD8, then (idle GC switched off) after a sequential fill 4 KiB random
read QD32 x 2 jobs and 4 KiB random read QD1. Each figure is compared with

  * the model's own prediction from the profile's parameters (``predict``): the
    controller caps commands at 1/t_ctrl per second, dies serve pages in parallel; a
    single 4 KiB read takes t_ctrl + t_read + t_xfer (t_read_slc for the share of the
    data the emulator's stats show in its SLC cache when the QD1 job starts);
  * the ceiling for the same workload: ``model / ceiling`` is the headroom used.

Claims checked (exit 1 when one fails): every modelled high-queue-depth figure is at
most ``--max-share`` (0.6) of the ceiling, and fio measures it within ``--tolerance``
(15 %) of the model's prediction; fio's mean QD1 latency is within ``--qd1-ratio``
(1.2x) of the model's, either way. The emulator sends each reply the FUSE floor (its
in-band measurement of the round trip outside the daemon) before the model's
completion time and busy-waits the last microseconds at low queue depth
(emulator/README.md, "Reply timing"); its floor and reply lateness are recorded.

Repetitions (default 3) rotate the order of the configurations so that drift on the
machine spreads over all of them. Results: bench/results/emulator_ceiling.json and .md.
Needs root and /dev/fuse; only the emulators this script starts are written.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness_overhead import Watch, fio_version, mean_stdev
from recording import recorded_args, write_results
from ssdlab.targets import emulator

BENCH_DIR = Path(__file__).resolve().parent
RESULT_NAME = "emulator_ceiling"
MIB = 1 << 20
CONFIGS: dict[str, tuple[str, list[str]]] = {
    "ceiling": ("enterprise-tlc", ["--zero-latency"]),
    "enterprise-tlc": ("enterprise-tlc", []),
    "client-slc": ("client-slc", []),
    "max-op": ("max-op", []),
}
# workload -> (fio arguments, figure read from fio's JSON, higher is better)
WORKLOADS: dict[str, tuple[list[str], str]] = {
    "randwrite-4k-qd32x2-fob": (
        ["--rw=randwrite", "--bs=4k", "--iodepth=32", "--numjobs=2", f"--io_size={32 * MIB}"],
        "iops",
    ),
    "seqwrite-128k-qd8": (["--rw=write", "--bs=128k", "--iodepth=8", f"--size={96 * MIB}"], "mb_s"),
    "randread-4k-qd32x2": (
        ["--rw=randread", "--bs=4k", "--iodepth=32", "--numjobs=2", "--time_based"],
        "iops",
    ),
    "randread-4k-qd1-latency": (
        ["--rw=randread", "--bs=4k", "--iodepth=1", "--time_based"],
        "mean_lat_us",
    ),
}
JUDGED = ("randwrite-4k-qd32x2-fob", "seqwrite-128k-qd8", "randread-4k-qd32x2")
QD1 = "randread-4k-qd1-latency"


def predict(config: dict[str, Any], slc_share: float = 0.0) -> dict[str, float]:
    """What the model itself should deliver, from its parameters (emulator/README.md).

    ``slc_share``: the share of the mapped data in the SLC cache when the QD1 job starts
    (a read of it takes t_read_slc instead of t_read)."""
    if config["zero_latency"]:
        return {}  # the ceiling: no model to predict from
    ctrl = config["ctrl_overhead_us"]
    dies = config["dies"]
    xfer = config["t_xfer_us"]
    page = config["page_size"]
    prog = config["t_prog_slc_us"] if config["slc_bytes"] else config["t_prog_us"]
    cmd_cap = 1e6 / ctrl
    t_read = slc_share * config["t_read_slc_us"] + (1 - slc_share) * config["t_read_us"]
    return {
        "randwrite-4k-qd32x2-fob": min(cmd_cap, dies * 1e6 / (prog + xfer)),
        "seqwrite-128k-qd8": min(cmd_cap * 32, dies * 1e6 / (prog + xfer)) * page / 1e6,
        "randread-4k-qd32x2": min(cmd_cap, dies * 1e6 / (config["t_read_us"] + xfer)),
        QD1: ctrl + t_read + xfer,
    }


def reply_timing(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The emulator's own view of one job (stats before and after it): its FUSE floor
    estimate and how late its replies left against their planned times."""
    b, a = before["counters"], after["counters"]
    replies = a["replies"] - b["replies"]
    late_sum = a["reply_late_us_mean"] * a["replies"] - b["reply_late_us_mean"] * b["replies"]
    return {
        "fuse_floor_us": after["state"]["fuse_floor_us"],
        "fuse_floor_samples": after["state"]["fuse_floor_samples"],
        "replies": replies,
        "reply_late_us_mean": late_sum / replies if replies else None,
        "slc_share": (before["state"]["slc_valid_bytes"] / before["state"]["mapped_bytes"]
                      if before["state"]["mapped_bytes"] else 0.0),
    }


def fio(disk: str, workload: str, runtime_s: float) -> tuple[float, dict[str, Any]]:
    args, figure = WORKLOADS[workload]
    cmd = [
        "fio", f"--name={workload}", f"--filename={disk}", "--direct=1", "--ioengine=libaio",
        "--group_reporting", "--norandommap", "--randrepeat=0", "--output-format=json",
        f"--runtime={runtime_s}", *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"fio {workload} failed: {done.stderr.strip()[-400:]}")
    job = json.loads(done.stdout)["jobs"][0]
    side = job["write"] if "write" in workload else job["read"]
    value = {
        "iops": side["iops"],
        "mb_s": side["bw_bytes"] / 1e6,
        "mean_lat_us": side["lat_ns"]["mean"] / 1e3,
    }[figure]
    return value, {"iops": side["iops"], "bw_bytes": side["bw_bytes"], "io_bytes": side["io_bytes"]}


def measure(name: str, size: int, runtime_s: float, run_dir: Path) -> dict[str, Any]:
    profile, options = CONFIGS[name]
    emulator.RUN_DIR = run_dir
    emu = emulator.start(f"bench-{name}", profile, size, options=options)
    try:
        config = emulator.stats(emu)["config"]
        assert isinstance(config, dict)
        out: dict[str, Any] = {"config": config, "values": {}, "raw": {}, "other_cpu_s": 0.0}
        foreign: set[int] = set()
        for workload in WORKLOADS:
            if workload == "seqwrite-128k-qd8":
                emulator.control(emu, "format")
            if workload == "randread-4k-qd32x2":
                # the read jobs measure the read path: idle GC's erases would occupy
                # dies the prediction counts as free whenever the host paused 0.5 s
                emulator.control(emu, "idle-gc off")
                subprocess.run(
                    ["fio", "--name=fill", f"--filename={emu.disk}", "--rw=write", "--bs=1m",
                     "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output=/dev/null"],
                    check=True, capture_output=True,
                )  # fmt: skip
            before = emulator.stats(emu)
            with Watch() as watch:
                value, raw = fio(emu.disk, workload, runtime_s)
            if workload == QD1:
                out["qd1_reply_timing"] = reply_timing(before, emulator.stats(emu))
            out["values"][workload] = value
            out["raw"][workload] = raw
            out["other_cpu_s"] += watch.other_cpu_s
            foreign |= watch.foreign
            if workload == "randwrite-4k-qd32x2-fob":
                emulator.control(emu, "format")
        counters = emulator.stats(emu)["counters"]
        assert isinstance(counters, dict)
        out["max_inflight"] = counters["max_inflight"]
        out["foreign_fio"] = sorted(foreign)
        return out
    finally:
        emulator.stop(f"bench-{name}")


def summarise(reps: list[dict[str, dict[str, Any]]], args: argparse.Namespace) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for name in CONFIGS:
        config = reps[0][name]["config"]
        slc_share = statistics.fmean(rep[name]["qd1_reply_timing"]["slc_share"] for rep in reps)
        model = predict(config, slc_share)
        rows = {}
        is_ceiling = not model
        for workload in WORKLOADS:
            values = [rep[name]["values"][workload] for rep in reps]
            mean, stdev = mean_stdev(values)
            ceiling = statistics.fmean(rep["ceiling"]["values"][workload] for rep in reps)
            rows[workload] = {
                "measured": values,
                "mean": mean,
                "stdev": stdev,
                "model": None if is_ceiling else model[workload],
                "measured_over_model": None if is_ceiling else mean / model[workload],
                "ceiling_mean": ceiling,
                "share_of_ceiling": None if is_ceiling else (
                    (model[workload] / ceiling) if "latency" not in workload
                    else ceiling / mean
                ),
            }
        timing = [rep[name]["qd1_reply_timing"] for rep in reps]
        late = [t["reply_late_us_mean"] for t in timing if t["reply_late_us_mean"] is not None]
        rows[QD1]["fuse_floor_us"] = statistics.fmean(t["fuse_floor_us"] for t in timing)
        rows[QD1]["reply_late_us_mean"] = statistics.fmean(late) if late else None
        rows[QD1]["slc_share"] = slc_share
        table[name] = rows
    failures = []
    for name, rows in table.items():
        if name == "ceiling":
            continue
        for workload in JUDGED:
            row = rows[workload]
            if row["share_of_ceiling"] > args.max_share:
                failures.append(f"{name} {workload}: model is {row['share_of_ceiling']:.2f} "
                                f"of the ceiling (> {args.max_share})")
            if abs(row["measured_over_model"] - 1) > args.tolerance:
                failures.append(f"{name} {workload}: fio measured "
                                f"{row['measured_over_model']:.2f}x the model")
        ratio = rows[QD1]["measured_over_model"]
        if not 1 / args.qd1_ratio <= ratio <= args.qd1_ratio:
            failures.append(f"{name} {QD1}: fio measured {ratio:.2f}x the model's latency "
                            f"(not within {args.qd1_ratio}x)")
    # The daemon is not a child of this script, so its CPU counts as "elsewhere" too:
    # only another fio on the machine marks a measurement as disturbed.
    disturbed = [
        f"repetition {i + 1} {name}: foreign fio processes {m['foreign_fio']}"
        for i, rep in enumerate(reps)
        for name, m in rep.items()
        if m["foreign_fio"]
    ]
    return {"table": table, "failures": failures, "disturbed": disturbed}


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        "# Emulator ceiling against the modelled devices",
        "",
        f"Measured {doc['date']} on {doc['machine']['cpu_count']} CPUs, kernel "
        f"{doc['machine']['kernel']}, {doc['machine']['fio']}; 1 GiB emulators, "
        f"{doc['args']['repetitions']} repetitions, {doc['args']['runtime']} s per "
        "time-based job. Produced by `bench/emulator_ceiling.py`; every number is in "
        "`emulator_ceiling.json`.",
        "",
        f"**Verdict: {'PASS' if not s['failures'] else 'FAIL'}** (high-QD workloads: "
        f"model <= {doc['args']['max_share']} of the ceiling, fio within +-"
        f"{doc['args']['tolerance'] * 100:.0f} % of the model; QD1 latency: fio within "
        f"{doc['args']['qd1_ratio']}x of the model).",
        "",
    ]
    lines += [f"* FAIL: {f}" for f in s["failures"]]
    if s["disturbed"]:
        lines += ["", "**Disturbed measurements (other load on the machine):**", ""]
        lines += [f"* {d}" for d in s["disturbed"]]
    lines += [
        "",
        "| device | workload | fio measured (mean +- sd) | model predicts | measured / model "
        "| ceiling | model / ceiling |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, rows in s["table"].items():
        for workload, row in rows.items():
            unit = "us" if "latency" in workload else (
                "MB/s" if "seqwrite" in workload else "IOPS"
            )

            def f(x: float | None, unit: str = unit) -> str:
                return "-" if x is None else f"{x:,.0f} {unit}"

            ratio = "-" if row["measured_over_model"] is None else (
                f"{row['measured_over_model']:.2f}")
            share = "-" if row["share_of_ceiling"] is None else f"{row['share_of_ceiling']:.2f}"
            lines.append(
                f"| {name} | {workload} | {row['mean']:,.0f} +- {row['stdev']:,.0f} {unit} | "
                f"{f(row['model'])} | {ratio} | {f(row['ceiling_mean'])} | {share} |"
            )
    lines += [
        "",
        "For the QD1 latency row, `model / ceiling` is the ceiling's latency over the "
        "device's: the share of the device's latency that the FUSE round trip alone "
        "takes. The emulator sends each reply its measured FUSE floor before the model's "
        "completion time (emulator/README.md, \"Reply timing\"); during the QD1 job "
        "(mean of the repetitions):",
        "",
        "| device | FUSE floor | replies late by (mean) | data in SLC |",
        "| --- | --- | --- | --- |",
    ]
    for name, rows in s["table"].items():
        row = rows[QD1]
        late = "-" if row["reply_late_us_mean"] is None else f"{row['reply_late_us_mean']:.1f} us"
        lines.append(f"| {name} | {row['fuse_floor_us']:.1f} us | {late} | "
                     f"{row['slc_share'] * 100:.0f} % |")
    lines.append("")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repetitions", type=int, default=3, help="default 3")
    p.add_argument("--runtime", type=float, default=5.0, help="seconds per time-based job (5)")
    p.add_argument("--size", type=int, default=1 << 30, help="emulator bytes (1 GiB)")
    p.add_argument("--max-share", type=float, default=0.6, help="model/ceiling limit (0.6)")
    p.add_argument("--tolerance", type=float, default=0.15, help="measured/model (0.15)")
    p.add_argument("--qd1-ratio", type=float, default=1.2,
                   help="QD1 latency: measured/model within this factor either way (1.2)")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = p.parse_args(argv)
    if args.repetitions < 1 or args.runtime <= 0:
        p.error("--repetitions and --runtime must be positive")
    if args.qd1_ratio < 1:
        p.error("--qd1-ratio must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("fio"):
        print("Error: needs root, /dev/fuse and fio", file=sys.stderr)
        return 2
    emulator.binary()
    run_dir = Path(tempfile.mkdtemp(prefix="ssdlab-bench-emu-", dir="/dev/shm"))
    names = list(CONFIGS)
    reps = []
    try:
        for rep in range(args.repetitions):
            order = names[rep % len(names):] + names[: rep % len(names)]
            results = {}
            for name in order:
                print(f"repetition {rep + 1}/{args.repetitions}: {name}", flush=True)
                results[name] = measure(name, args.size, args.runtime, run_dir)
            reps.append(results)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    doc: dict[str, Any] = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "args": recorded_args(args),
        "machine": {
            "cpu_count": os.cpu_count(),
            "kernel": platform.release(),
            "fio": fio_version("fio"),
            "loadavg_end": os.getloadavg(),
        },
        "repetitions": reps,
        "summary": summarise(reps, args),
    }
    write_results(args.results_dir, RESULT_NAME, doc, markdown(doc))
    return 1 if doc["summary"]["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
