#!/usr/bin/env python3
"""Benchmark: does the ssdlab harness cost any IOPS compared with plain fio?

On a zram block device created for the purpose (RAM-backed, so the device itself is
not the bottleneck and any harness cost would show), this runs, alternately (ABAB):

  A  ``ssdlab run pts`` with one 4 KiB random-read cell (100/0), no purge, no
     preconditioning, ``--max-rounds`` rounds of ``--seconds`` each; the IOPS of every
     round are read back from ssdlab's own results store (``ssdlab export``), so the
     figure is what ssdlab measured and recorded;
  B  by hand: each round's exact job file, as ssdlab stored it, run from a file with
     ``fio --output-format=json JOBFILE`` the same number of times, IOPS parsed from
     fio's JSON directly.

It reports the mean and standard deviation of the per-round IOPS of each side, their
ratio (ssdlab / by hand) against a threshold (0.97), and the wall-clock the harness adds
per round (Python start-up, planning, steady-state analysis, SQLite commits).
Results: bench/results/harness_overhead.json and .md (overwritten on each run).

Needs root (zram). Only the zram device this script creates is ever written; it is
reset and removed on exit, including on Ctrl-C or failure.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recording import command_as_typed, cpu_model, program_name
from ssdlab.cpuidle import idle_policy
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.units import parse_size

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # for tests.support.zram, the zram helper the tests use

from tests.support.zram import Zram, create_zram, remove_zram, zram_unavailable  # noqa: E402

DEFAULT_RESULTS_DIR = BENCH_DIR / "results"
RESULT_NAME = "harness_overhead"
DEFAULT_SIZE = "1GiB"  # 2^30 bytes, as recorded since the first result
#: a measurement is "disturbed" when other processes used more than this share of one
#: CPU meanwhile (a quiet run shows 2-4 %: kernel threads serving the benchmark's I/O)
DISTURBED_CPU_FRACTION = 0.10
MIN_SIZE = 64 * 2**20

# --------------------------------------------------------------------------- helpers


def device_size(text: str) -> int:
    """``--size``: ssdlab's own sizes (``1GiB`` = 2^30, ``1GB`` = 10^9 bytes), at least
    64 MiB, rounded down to whole 4 KiB blocks."""
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size < MIN_SIZE:
        raise argparse.ArgumentTypeError("size must be at least 64MiB")
    return size - size % 4096


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def say(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", flush=True)


def mean_stdev(values: Sequence[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return mean, stdev


class Interrupted(Exception):
    """SIGTERM (or SIGHUP): handled like Ctrl-C, so the cleanup runs."""


def _on_signal(signum: int, _frame: object) -> None:
    raise Interrupted(f"stopped by signal {signal.Signals(signum).name}")


# --------------------------------------------------------------------------- children


_children: list[subprocess.Popen[str]] = []


def run_child(cmd: Sequence[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``cmd`` to completion, capturing output; returns it and its wall-clock (s).

    The child is tracked so that the cleanup can stop it before the device is reset.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _children.append(proc)
    try:
        out, err = proc.communicate()
    finally:
        if proc.poll() is not None:
            _children.remove(proc)
    elapsed = time.perf_counter() - started
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err), elapsed


def stop_children() -> None:
    for proc in list(_children):
        for sig, grace in ((signal.SIGINT, 15.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5.0)
        _children.remove(proc)


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def foreign_fio_pids() -> list[int]:
    """fio processes on this machine that this benchmark did not start (they would
    compete for the CPUs and bias whichever side they overlap)."""
    mine = os.getpid()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "fio":
                continue
            pid = int(entry.name)
            ancestor = pid
            while ancestor > 1 and ancestor != mine:
                ancestor = _parent_of(ancestor)
        except (OSError, ValueError, IndexError):
            continue
        if ancestor != mine:
            found.append(pid)
    return sorted(found)


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user..steal minus idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Watch:
    """While one side is measured: the fio processes this benchmark did not start
    (sampled every 0.5 s), and the CPU seconds spent outside this benchmark's process
    tree (approximate: kernel threads serving our own I/O count as "other")."""

    def __init__(self) -> None:
        self._busy0 = self._own0 = 0.0
        self.foreign: set[int] = set()
        self.other_cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.foreign.update(foreign_fio_pids())
            if self._stop.wait(0.5):
                return

    def __enter__(self) -> Watch:
        self._busy0, self._own0 = _busy_cpu_s(), _own_cpu_s()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.foreign.update(foreign_fio_pids())
        busy = _busy_cpu_s() - self._busy0
        own = _own_cpu_s() - self._own0
        self.other_cpu_s = max(0.0, busy - own)


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return []


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise RuntimeError(
            f"{what} failed (exit {result.returncode}): {' '.join(result.args)}\n{tail}"
        )


# --------------------------------------------------------------------------- zram


@contextlib.contextmanager
def zram_device(size_bytes: int) -> Iterator[Zram]:
    """A fresh zram device of ``size_bytes`` (tests/support/zram.py); reset and removed
    afterwards, once the fio processes this benchmark started are stopped."""
    why = zram_unavailable()
    if why:
        raise SystemExit(f"error: this benchmark creates a zram device: {why}")
    dev = create_zram(size_bytes)
    try:
        yield dev
    finally:
        stop_children()
        problem = remove_zram(dev)
        if problem:
            print(f"warning: {problem}", file=sys.stderr)
        else:
            say(f"removed {dev.path}")


# --------------------------------------------------------------------------- fio side


def fio_version(fio: str) -> str:
    result, _ = run_child([fio, "--version"])
    return result.stdout.strip()


def fill(fio: str, dev: Zram) -> dict[str, Any]:
    """Write the whole device once, sequentially in 128 KiB blocks."""
    cmd = [
        fio,
        "--name=fill",
        f"--filename={dev.path}",
        "--rw=write",
        "--bs=128k",
        "--direct=1",
        "--ioengine=libaio",
        "--iodepth=16",
        f"--size={dev.size_bytes}",
        "--output-format=json",
    ]
    result, elapsed = run_child(cmd)
    check(result, "filling the device")
    doc = json.loads(result.stdout[result.stdout.index("{") :])
    written = sum(job["write"]["io_bytes"] for job in doc["jobs"])
    if written < dev.size_bytes:
        raise RuntimeError(f"fill wrote {written} of {dev.size_bytes} bytes")
    return {
        "command": cmd,
        "bytes": written,
        "seconds": elapsed,
        "zram_mm_stat": dev.attr("mm_stat"),
    }


def fio_iops(stdout: str, cell: str | None) -> float:
    """Total (read + write) IOPS of the job named ``cell`` (all jobs when None)."""
    doc = json.loads(stdout[stdout.index("{") :])  # fio may print notes before the JSON
    jobs = [j for j in doc["jobs"] if cell is None or j["jobname"] == cell]
    if not jobs:
        raise RuntimeError(f"fio output has no job named {cell!r}")
    for job in jobs:
        if job.get("error"):
            raise RuntimeError(f"fio job {job['jobname']} failed: error {job['error']}")
    return float(sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs))


def warm_up(fio: str, dev: Zram, args: argparse.Namespace) -> float:
    """A discarded 4 KiB random-read run so the first measured side starts warm."""
    cmd = [
        fio,
        "--name=warmup",
        f"--filename={dev.path}",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        f"--iodepth={args.qd}",
        f"--numjobs={args.threads}",
        "--group_reporting=1",
        "--time_based=1",
        f"--runtime={args.warmup_seconds}s",
        "--norandommap=1",
        "--randrepeat=0",
        "--output-format=json",
    ]
    result, _ = run_child(cmd)
    check(result, "warm-up")
    return fio_iops(result.stdout, None)


# --------------------------------------------------------------------------- the two sides


@dataclass
class SideResult:
    """One measurement of one side: a ssdlab run (A), or its by-hand twin (B)."""

    side: str  # "ssdlab" | "by_hand"
    rep: int
    iops: list[float]
    wall_s: float
    fio_wall_s: list[float] = field(default_factory=list)  # per fio invocation
    run_id: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    foreign_fio: list[int] = field(default_factory=list)  # seen while it was measured
    other_cpu_s: float = 0.0  # CPU seconds used outside this benchmark meanwhile (approx.)

    @property
    def disturbed(self) -> bool:
        return bool(self.foreign_fio) or self.other_cpu_s > DISTURBED_CPU_FRACTION * self.wall_s


@dataclass
class SsdlabRun:
    result: SideResult
    job_files: list[str]
    cell_names: list[str]
    fio_commands: list[list[str]]
    status: str
    test_status: str


def ssdlab_command(ssdlab: str, dev: Zram, store: Path, args: argparse.Namespace) -> list[str]:
    return [
        ssdlab,
        "run",
        "pts",
        "--target",
        dev.path,
        "--destroy-data",
        "--tests",
        "iops",
        "--block-sizes",
        "4",
        "--mixes",
        "100/0",
        "--purge",
        "none",
        "--no-precondition",
        "--round-seconds",
        f"{args.seconds:g}",
        "--max-rounds",
        str(args.rounds),
        "--threads",
        str(args.threads),
        "--qd",
        str(args.qd),
        "--ioengine",
        args.ioengine,
        "--fio",
        args.fio,
        "--store",
        str(store),
    ]


def run_ssdlab(
    rep: int, ssdlab: str, dev: Zram, store: Path, args: argparse.Namespace
) -> SsdlabRun:
    cmd = ssdlab_command(ssdlab, dev, store, args)
    with Watch() as watch:
        result, wall = run_child(cmd)
    check(result, "ssdlab run")
    m = re.search(r"^run (\S+) (\w+); results in", result.stdout, re.MULTILINE)
    run_ref = m.group(1) if m else "last"
    export_cmd = [ssdlab, "export", run_ref, "--format", "json", "--store", str(store)]
    exported, _ = run_child(export_cmd)
    check(exported, "ssdlab export")
    doc = json.loads(exported.stdout)
    tests = [t for t in doc["tests"] if t["name"] == "iops"]
    if not tests:
        raise RuntimeError("the ssdlab export has no iops test")
    test = tests[0]
    rounds = sorted(test["rounds"], key=lambda r: r["round"])
    if not rounds or any(r["status"] != "ok" for r in rounds):
        raise RuntimeError(f"ssdlab run {doc['run']['id']}: missing or failed rounds")
    iops: list[float] = []
    cell_names: list[str] = []
    for rnd in rounds:
        if len(rnd["cells"]) != 1:
            raise RuntimeError(f"expected one cell per round, got {len(rnd['cells'])}")
        iops.append(float(rnd["cells"][0]["iops"]))
        cell_names.append(str(rnd["cells"][0]["cell"]))
    side = SideResult(
        side="ssdlab",
        rep=rep,
        iops=iops,
        wall_s=wall,
        fio_wall_s=[float(r["duration_s"]) for r in rounds],
        run_id=doc["run"]["id"],
        commands=[cmd],
        foreign_fio=sorted(watch.foreign),
        other_cpu_s=watch.other_cpu_s,
    )
    return SsdlabRun(
        result=side,
        job_files=[r["job_file"] for r in rounds],
        cell_names=cell_names,
        fio_commands=[list(r["fio_command"]) for r in rounds],
        status=doc["run"]["status"],
        test_status=test["status"],
    )


def run_by_hand(rep: int, fio: str, ssd: SsdlabRun, workdir: Path) -> SideResult:
    """Each of ssdlab's stored round job files, verbatim, through plain fio, with idle CPUs
    as ssdlab has them while its fio runs ($SSDLAB_CPU_IDLE: by default they poll, the
    0 us wake-up latency limit held): the harness, not the host's power policy, is compared."""
    with idle_policy(idle_policy_env()):
        return _run_by_hand(rep, fio, ssd, workdir)


def _run_by_hand(rep: int, fio: str, ssd: SsdlabRun, workdir: Path) -> SideResult:
    iops: list[float] = []
    walls: list[float] = []
    commands: list[list[str]] = []
    foreign: set[int] = set()
    other_cpu_s = 0.0
    total = 0.0
    for number, (text, cell) in enumerate(zip(ssd.job_files, ssd.cell_names, strict=True), 1):
        path = workdir / f"rep{rep}-round{number}.fio"
        path.write_text(text)
        cmd = [fio, "--output-format=json", str(path)]
        with Watch() as watch:
            result, wall = run_child(cmd)
        foreign |= watch.foreign
        other_cpu_s += watch.other_cpu_s
        check(result, "fio by hand")
        iops.append(fio_iops(result.stdout, cell))
        walls.append(wall)
        commands.append(cmd)
        total += wall
    return SideResult(
        "by_hand", rep, iops, total, walls, None, commands, sorted(foreign), other_cpu_s
    )


# --------------------------------------------------------------------------- facts & report


def machine_facts(fio: str, dev: Zram) -> dict[str, Any]:
    model = cpu_model()
    mem_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_kib = int(Path("/proc/meminfo").read_text().splitlines()[0].split()[1])
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "cpu_model": model or platform.processor() or "unknown",
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "fio_version": fio_version(fio),
        "zram_comp_algorithm": dev.attr("comp_algorithm"),
        "cpu_idle_policy": idle_policy_env(),
    }


def ssdlab_version(ssdlab: str) -> str:
    result, _ = run_child([ssdlab, "--version"])
    return (result.stdout or result.stderr).strip() if result.returncode == 0 else "unknown"


def strip_comments(job_text: str) -> str:
    return "\n".join(line for line in job_text.splitlines() if not line.startswith(";"))


def ratio_of(pairs: list[tuple[SideResult, SideResult]]) -> float:
    """Ratio of the mean per-round IOPS, ssdlab / by hand, over the given pairs."""
    a = [v for x, _ in pairs for v in x.iops]
    b = [v for _, y in pairs for v in y.iops]
    return statistics.fmean(a) / statistics.fmean(b)


def summarise(
    args: argparse.Namespace,
    sides: list[SideResult],
    ssd_runs: list[SsdlabRun],
) -> dict[str, Any]:
    a = [s for s in sides if s.side == "ssdlab"]
    b = [s for s in sides if s.side == "by_hand"]
    a_iops = [v for s in a for v in s.iops]
    b_iops = [v for s in b for v in s.iops]
    a_mean, a_sd = mean_stdev(a_iops)
    b_mean, b_sd = mean_stdev(b_iops)
    ratio = a_mean / b_mean
    # delta-method 95% interval of the ratio of means, rounds taken as independent
    rel_se = math.sqrt((a_sd / a_mean) ** 2 / len(a_iops) + (b_sd / b_mean) ** 2 / len(b_iops))
    half = 1.96 * ratio * rel_se
    clean = [(x, y) for x, y in zip(a, b, strict=True) if not (x.disturbed or y.disturbed)]
    paired = [
        statistics.fmean(x.iops) / statistics.fmean(y.iops) for x, y in zip(a, b, strict=True)
    ]
    rounds_total = len(a_iops)
    a_wall = sum(s.wall_s for s in a)
    b_wall = sum(s.wall_s for s in b)
    a_fio = sum(sum(s.fio_wall_s) for s in a)
    bodies = {strip_comments(t) for r in ssd_runs for t in r.job_files}
    return {
        "ssdlab": {
            "iops_mean": a_mean,
            "iops_stdev": a_sd,
            "iops_cv_pct": 100 * a_sd / a_mean,
            "rounds": rounds_total,
            "wall_s_total": a_wall,
            "wall_s_per_round": a_wall / rounds_total,
            "fio_wall_s_total_as_recorded": a_fio,
        },
        "by_hand": {
            "iops_mean": b_mean,
            "iops_stdev": b_sd,
            "iops_cv_pct": 100 * b_sd / b_mean,
            "rounds": len(b_iops),
            "wall_s_total": b_wall,
            "wall_s_per_round": b_wall / len(b_iops),
        },
        "ratio": ratio,
        "ratio_ci95": [ratio - half, ratio + half],
        "ci95_low_above_threshold": ratio - half >= args.min_ratio,
        "paired_ratio_per_repetition": paired,
        "paired_ratio_min": min(paired),
        "paired_ratio_max": max(paired),
        "threshold": args.min_ratio,
        "verdict": "PASS" if ratio >= args.min_ratio else "FAIL",
        "harness_wall_clock_overhead_s_per_round": (a_wall - b_wall) / rounds_total,
        "harness_time_outside_fio_s_per_run": (a_wall - a_fio) / len(a),
        "job_body_identical_in_all_rounds": len(bodies) == 1,
        "measurements_with_foreign_fio": sum(1 for s in sides if s.foreign_fio),
        "disturbed_measurements": sum(1 for s in sides if s.disturbed),
        "undisturbed_pairs": len(clean),
        "ratio_undisturbed_pairs": ratio_of(clean) if clean else None,
        "measurements": len(sides),
        "other_cpu_s_ssdlab": sum(s.other_cpu_s for s in a),
        "other_cpu_s_by_hand": sum(s.other_cpu_s for s in b),
    }


def disturbed_note(s: dict[str, Any]) -> list[str]:
    if not s["disturbed_measurements"]:
        return []
    return [
        f"**WARNING: {s['disturbed_measurements']} of {s['measurements']} measurements "
        "were disturbed** by other processes (another fio, or more than "
        f"{DISTURBED_CPU_FRACTION:.0%} of a CPU used outside this benchmark): the result "
        "is not reliable; run it again on a quiet machine. "
        + (
            f"Over the {s['undisturbed_pairs']} undisturbed repetition(s) alone the ratio "
            f"is {s['ratio_undisturbed_pairs']:.4f}."
            if s["undisturbed_pairs"]
            else "No repetition was undisturbed."
        ),
        "",
    ]


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    p = doc["parameters"]
    m = doc["machine"]
    a, b = s["ssdlab"], s["by_hand"]
    lines = [
        "# Harness overhead: ssdlab vs. plain fio",
        "",
        f"Recorded {doc['date_utc']} by `bench/harness_overhead.py` (overwritten on each run).",
        "",
        f"**{s['verdict']}**: ssdlab / by hand = **{s['ratio']:.4f}** "
        f"(threshold {s['threshold']}).",
        "",
        *disturbed_note(s),
        "4 KiB random read (100/0), "
        f"{p['threads']} threads x QD {p['qd']}, {p['ioengine']}, direct I/O, on a "
        f"{p['size_bytes'] / 2**30:g} GiB zram device filled once with 128 KiB sequential "
        f"writes; {p['repetitions']} repetitions in {p['order'].upper()} order, each side "
        f"{p['rounds']} rounds of {p['seconds']:g} s per repetition.",
        "",
        "| side | rounds | IOPS mean | IOPS stdev | CV | wall-clock total | per round |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| A: ssdlab (IOPS as stored) | {a['rounds']} | {a['iops_mean']:,.0f} | "
        f"{a['iops_stdev']:,.0f} | {a['iops_cv_pct']:.2f}% | {a['wall_s_total']:.1f} s | "
        f"{a['wall_s_per_round']:.3f} s |",
        f"| B: fio by hand | {b['rounds']} | {b['iops_mean']:,.0f} | {b['iops_stdev']:,.0f} | "
        f"{b['iops_cv_pct']:.2f}% | {b['wall_s_total']:.1f} s | "
        f"{b['wall_s_per_round']:.3f} s |",
        "",
        f"* Ratio of means ssdlab / by hand: **{s['ratio']:.4f}**, approximate 95% interval "
        f"{s['ratio_ci95'][0]:.4f} to {s['ratio_ci95'][1]:.4f} (rounds taken as independent; "
        f"the lower end is {'above' if s['ci95_low_above_threshold'] else 'BELOW'} the "
        "threshold). Per repetition (paired): "
        + ", ".join(f"{r:.4f}" for r in s["paired_ratio_per_repetition"])
        + f" (min {s['paired_ratio_min']:.4f}, max {s['paired_ratio_max']:.4f}).",
        f"* Harness wall-clock overhead per round: "
        f"**{s['harness_wall_clock_overhead_s_per_round']:.3f} s** "
        "(ssdlab's total wall-clock, including Python start-up, planning, steady-state "
        "analysis and SQLite commits, minus the by-hand fio wall-clock, per round). Time "
        f"ssdlab spends outside fio: {s['harness_time_outside_fio_s_per_run']:.3f} s per run "
        f"of {p['rounds']} rounds.",
        f"* Same job body in every round and repetition: "
        f"{'yes' if s['job_body_identical_in_all_rounds'] else 'NO'}; the by-hand side "
        "ran each stored job file verbatim.",
        f"* Measurements during which a foreign fio process (not started by this benchmark) "
        f"was seen: {s['measurements_with_foreign_fio']} of {len(doc['measurements'])}; "
        f"load average before {doc['loadavg_before']}, after {doc['loadavg_after']}. "
        "CPU seconds used outside the benchmark's processes while each side was measured "
        "(approximate: includes kernel threads serving its own I/O): "
        f"ssdlab {s['other_cpu_s_ssdlab']:.1f} s, by hand {s['other_cpu_s_by_hand']:.1f} s.",
        "",
        "## Per repetition",
        "",
        "| rep | side | run | IOPS per round | wall-clock | other CPU |",
        "|---:|---|---|---|---:|---:|",
    ]
    for side in doc["measurements"]:
        per = ", ".join(f"{v:,.0f}" for v in side["iops"])
        lines.append(
            f"| {side['rep']} | {side['side']} | {side['run_id'] or '-'} | {per} | "
            f"{side['wall_s']:.2f} s | {side['other_cpu_s']:.1f} s"
            f"{' (disturbed)' if side['disturbed'] else ''} |"
        )
    lines += [
        "",
        "## Commands",
        "",
        "A (ssdlab), then `ssdlab export RUN --format json --store STORE`:",
        "",
        "```",
        " ".join(doc["commands"]["ssdlab"]),
        "```",
        "",
        "fio command ssdlab ran for each round (job file on stdin):",
        "",
        "```",
        " ".join(doc["commands"]["ssdlab_fio"]),
        "```",
        "",
        "B (by hand), once per ssdlab round, with that round's stored job file:",
        "",
        "```",
        " ".join(doc["commands"]["by_hand"]),
        "```",
        "",
        "The job file (round 1 of repetition 1):",
        "",
        "```ini",
        doc["job_file"].rstrip("\n"),
        "```",
        "",
        "## Machine",
        "",
        f"* CPU: {m['cpu_model']}, {m['cpu_count']} logical CPUs ({m['cpus_usable']} usable)",
        f"* Memory: {m['memory_gib']} GiB",
        f"* Kernel: {m['kernel']} ({m['os']})",
        f"* fio: {m['fio_version']}; ssdlab: {doc['ssdlab_version']}; Python {m['python']}",
        f"* zram compression: {m['zram_comp_algorithm']}",
        f"* idle CPUs while fio runs: {m.get('cpu_idle_policy', '-')} "
        "(both sides alike; SSDLAB_CPU_IDLE)",
        "",
        "## Parameters",
        "",
        "```json",
        json.dumps(p, indent=2),
        "```",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="harness_overhead.py",
        description="Benchmark ssdlab's harness overhead: 4 KiB random-read IOPS through "
        "`ssdlab run pts` vs. the same fio job file run by hand, alternated (ABAB) on a "
        "zram device this script creates and removes. Needs root. With the defaults it "
        "takes about 4-5 minutes.",
    )
    parser.add_argument(
        "--size",
        type=device_size,
        default=device_size(DEFAULT_SIZE),
        help=f"zram device size: 1GiB = 2^30, 1GB = 10^9 bytes (default {DEFAULT_SIZE})",
    )
    parser.add_argument(
        "--repetitions", "-n", type=positive_int, default=5, help="A/B repetitions (default 5)"
    )
    parser.add_argument(
        "--seconds",
        "-s",
        type=positive_float,
        default=5.0,
        help="seconds per measurement, i.e. per round (default 5)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=5,
        help="ssdlab --max-rounds; the SNIA 5-round window needs 5 (default 5)",
    )
    parser.add_argument("--threads", type=positive_int, default=2, help="fio jobs (default 2)")
    parser.add_argument(
        "--qd", type=positive_int, default=32, help="queue depth per job (default 32)"
    )
    parser.add_argument(
        "--ioengine",
        default="libaio",
        choices=["libaio", "io_uring", "psync", "sync"],
        help="fio ioengine (default libaio)",
    )
    parser.add_argument(
        "--order",
        choices=["abab", "abba"],
        default="abab",
        help="abab: ssdlab first in every repetition (default); abba: "
        "alternate which side goes first",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=5.0,
        help="a discarded random-read warm-up before the first measurement (0: none; default 5)",
    )
    parser.add_argument(
        "--min-ratio",
        type=float,
        default=0.97,
        help="PASS when ssdlab/by-hand IOPS >= this (default 0.97)",
    )
    parser.add_argument("--fio", default="fio", help="fio binary (default: fio)")
    parser.add_argument(
        "--ssdlab", default=None, help="ssdlab CLI (default: next to this Python, else on PATH)"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS_DIR,
        help=f"where the results go (default {DEFAULT_RESULTS_DIR})",
    )
    return parser.parse_args(argv)


def find_ssdlab(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "ssdlab"
    if beside.exists():
        return str(beside)
    found = shutil.which("ssdlab")
    if not found:
        raise SystemExit("error: ssdlab CLI not found; pass --ssdlab PATH")
    return found


def report(side: SideResult) -> None:
    label = f"A ssdlab {side.run_id}" if side.side == "ssdlab" else "B by hand"
    iops = ", ".join(f"{v:,.0f}" for v in side.iops)
    n = len(side.foreign_fio)
    warn = f"  WARNING: {n} fio process(es) not ours ran meanwhile" if n else ""
    say(
        f"rep {side.rep} {label}: {iops} IOPS ({side.wall_s:.1f} s, "
        f"other CPU {side.other_cpu_s:.1f} s){warn}"
    )


def order_of(rep: int, order: str) -> tuple[str, str]:
    """Which side goes first. Repetition 1 is always A first: B runs the job files that
    ssdlab stored."""
    if order == "abba" and rep % 2 == 0:
        return ("B", "A")
    return ("A", "B")


def benchmark(args: argparse.Namespace, ssdlab: str, dev: Zram, workdir: Path) -> dict[str, Any]:
    store = workdir / "store.sqlite"
    fio_path = shutil.which(args.fio) or args.fio
    args.fio = fio_path
    machine = machine_facts(fio_path, dev)
    load_before = loadavg()
    others = foreign_fio_pids()
    if others:
        say(f"WARNING: other fio processes are running ({others}); results will be noisy")
    say(f"{dev.path}: {dev.size_bytes / 2**30:g} GiB zram; filling it with 128 KiB writes")
    filled = fill(fio_path, dev)
    say(f"filled {filled['bytes'] / 2**30:g} GiB in {filled['seconds']:.1f} s")
    warm = None
    if args.warmup_seconds > 0:
        warm = warm_up(fio_path, dev, args)
        say(f"warm-up: {warm:,.0f} IOPS (discarded)")
    sides: list[SideResult] = []
    ssd_runs: list[SsdlabRun] = []
    started = time.perf_counter()
    for rep in range(1, args.repetitions + 1):
        if order_of(rep, args.order)[0] == "B":
            # B first: the job files of the previous ssdlab run (same body, see summary)
            b = run_by_hand(rep, fio_path, ssd_runs[-1], workdir)
            report(b)
            ssd = run_ssdlab(rep, ssdlab, dev, store, args)
            report(ssd.result)
        else:
            ssd = run_ssdlab(rep, ssdlab, dev, store, args)
            report(ssd.result)
            b = run_by_hand(rep, fio_path, ssd, workdir)
            report(b)
        ssd_runs.append(ssd)
        sides += [ssd.result, b]
    elapsed = time.perf_counter() - started
    load_after = loadavg()
    summary = summarise(args, sides, ssd_runs)
    first_run = ssd_runs[0]
    # recorded as typed: programs by name, the temporary store as STORE (recording.py)
    typed = {fio_path: "fio", str(store): "STORE"}
    return {
        "benchmark": RESULT_NAME,
        "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "summary": summary,
        "parameters": {
            "size_bytes": dev.size_bytes,
            "repetitions": args.repetitions,
            "seconds": args.seconds,
            "rounds": args.rounds,
            "threads": args.threads,
            "qd": args.qd,
            "ioengine": args.ioengine,
            "order": args.order,
            "warmup_seconds": args.warmup_seconds,
            "min_ratio": args.min_ratio,
            "block_bytes": 4096,
            "read_pct": 100,
        },
        "machine": machine,
        "ssdlab_version": ssdlab_version(ssdlab),
        "device": {
            "name": dev.name,
            "size_bytes": dev.size_bytes,
            "mm_stat_after": dev.attr("mm_stat"),
        },
        "fill": {**filled, "command": command_as_typed(filled["command"], typed)},
        "warmup_iops": warm,
        "measurement_seconds": elapsed,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "commands": {
            "ssdlab": command_as_typed(first_run.result.commands[0], typed),
            "ssdlab_fio": command_as_typed(first_run.fio_commands[0], typed),
            "by_hand": [program_name(fio_path), "--output-format=json", "JOBFILE"],
        },
        "ssdlab_runs": [
            {
                "rep": r.result.rep,
                "run_id": r.result.run_id,
                "status": r.status,
                "iops_test_status": r.test_status,
            }
            for r in ssd_runs
        ],
        "job_file": first_run.job_files[0],
        "measurements": [
            {
                "rep": s.rep,
                "side": s.side,
                "run_id": s.run_id,
                "iops": s.iops,
                "wall_s": s.wall_s,
                "fio_wall_s": s.fio_wall_s,
                "foreign_fio_pids": s.foreign_fio,
                "other_cpu_s": s.other_cpu_s,
                "disturbed": s.disturbed,
            }
            for s in sides
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ssdlab = find_ssdlab(args.ssdlab)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    workdir = Path(tempfile.mkdtemp(prefix="ssdlab-bench-"))
    try:
        with zram_device(args.size) as dev:
            doc = benchmark(args, ssdlab, dev, workdir)
    except (KeyboardInterrupt, Interrupted) as exc:
        print(
            f"\ninterrupted ({str(exc) or 'Ctrl-C'}); cleaned up, no results written",
            file=sys.stderr,
        )
        return 130
    finally:
        stop_children()
        shutil.rmtree(workdir, ignore_errors=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.results_dir / f"{RESULT_NAME}.json"
    md_path = args.results_dir / f"{RESULT_NAME}.md"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    md_path.write_text(markdown(doc))
    s = doc["summary"]
    print()
    print(
        f"ssdlab : {s['ssdlab']['iops_mean']:,.0f} IOPS (stdev {s['ssdlab']['iops_stdev']:,.0f},"
        f" {s['ssdlab']['rounds']} rounds)"
    )
    print(
        f"by hand: {s['by_hand']['iops_mean']:,.0f} IOPS (stdev "
        f"{s['by_hand']['iops_stdev']:,.0f}, {s['by_hand']['rounds']} rounds)"
    )
    print(
        f"ratio ssdlab/by hand: {s['ratio']:.4f} (95% interval {s['ratio_ci95'][0]:.4f}-"
        f"{s['ratio_ci95'][1]:.4f}; threshold {s['threshold']}): {s['verdict']}"
    )
    print(
        f"harness wall-clock overhead per round: "
        f"{s['harness_wall_clock_overhead_s_per_round']:.3f} s"
    )
    if s["disturbed_measurements"]:
        print(
            f"WARNING: {s['disturbed_measurements']} of {s['measurements']} measurements were "
            "disturbed by other processes; run again on a quiet machine"
        )
        if s["undisturbed_pairs"]:
            print(
                f"ratio over the {s['undisturbed_pairs']} undisturbed repetition(s): "
                f"{s['ratio_undisturbed_pairs']:.4f}"
            )
    print(f"results: {json_path} and {md_path}")
    return 0 if s["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
