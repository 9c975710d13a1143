#!/usr/bin/env python3
"""Benchmark: a report of 20 runs is written (HTML and PDF) in under 10 seconds.

Builds a results store of ``--runs`` (20) full-profile PTS runs through ssdlab's real
orchestration (plan, rounds, steady-state analysis, SQLite journal) with the fake fio
executor of the test suite, so that each run has the shape and size of a real one: the
IOPS test's 56 cells settling over ``--rounds`` (12) rounds, both throughput tests and the
latency test, every round's cells and job file stored. Then, ``--repetitions`` (7) times,
times ``ssdlab report`` of all of them (through the same function the command calls):
loading from the store, rendering the HTML, and printing the PDF with Chromium.

Claim: the median total (HTML + PDF) is below ``--limit`` (10) seconds. Results go to
bench/results/report_speed.json and .md. Needs Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULT_NAME = "report_speed"


def settling(level: float, seed: int, rounds: int) -> Callable[[str, int], float]:
    """IOPS that fall from 3x to ``level`` over the first ``rounds - 5`` rounds, +-3 %."""
    import random

    def model(name: str, round_no: int) -> float:
        rng = random.Random(f"{seed}-{name}-{round_no}")
        decay = max(0.0, 1 - round_no / max(rounds - 5, 1))
        block = int(name.split("_bs")[1].split("_")[0]) if "_bs" in name else 4096
        size_factor = math.sqrt(4096 / block)
        return level * size_factor * (1 + 2 * decay) * (1 + rng.uniform(-0.03, 0.03))

    return model


def build_store(path: Path, runs: int, rounds: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from ssdlab.plan.options import PtsArgs
    from ssdlab.run.progress import Progress
    from ssdlab.run.pts_run import PtsRun
    from ssdlab.store.db import Store
    from tests.support.fake_fio import FakeFio
    from tests.support.prepared import make_prepared

    args = PtsArgs(profile="default", purge="none", precondition=False, max_rounds=rounds + 3)
    ids = []
    with Store.open(path) as store, tempfile.TemporaryDirectory() as scratch:
        for n in range(runs):
            prepared = make_prepared(Path(scratch), args)
            runner = PtsRun(prepared, store, FakeFio(settling(20_000 + 1000 * n, n, rounds)),
                            Progress(io.StringIO(), live=False, quick=False))
            ids.append(runner.execute(["bench"]))
    return ids


def cpu_reference_s() -> float:
    """Seconds a fixed pure-Python loop takes (20 million additions): the machine's speed at
    the time, to read the report times against (on these VMs the same print took 8 s and
    13 s hours apart)."""
    started = time.perf_counter()
    total = 0
    for i in range(20_000_000):
        total += i
    return time.perf_counter() - started


def measure(store_path: Path, ids: Sequence[str], out: Path) -> dict[str, float]:
    from ssdlab.report.build import ReportRequest, write_report
    from ssdlab.store.db import Store

    started = time.perf_counter()
    with Store.open(store_path) as store:
        files = write_report(store, ReportRequest(tuple(ids), out))
    total = time.perf_counter() - started
    assert files.pdf is not None
    return {
        "total_s": total,
        "html_s": files.seconds_html,
        "pdf_s": files.seconds_pdf,
        "sections": files.pages,
        "html_bytes": files.html.stat().st_size,
        "pdf_bytes": files.pdf.stat().st_size,
    }


def pdf_pages(path: Path) -> int | None:
    import shutil
    import subprocess

    if not shutil.which("pdfinfo"):
        return None
    done = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("Pages:"):
            return int(line.split()[1])
    return None


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        "# Report speed: 20 runs, HTML and PDF",
        "",
        f"Measured {doc['date']} on {doc['machine']['cpu_count']} CPUs "
        f"({doc['machine']['cpu_model']}), {doc['machine']['chromium']}. Produced by "
        "`bench/report_speed.py`; every number is in `report_speed.json`.",
        "",
        f"**Verdict: {'PASS' if s['pass'] else 'FAIL'}**: median {s['median_total_s']:.2f} s "
        f"for {doc['args']['runs']} runs (limit {doc['args']['limit']} s); fastest "
        f"{s['min_total_s']:.2f} s, slowest {s['max_total_s']:.2f} s.",
        "",
        f"Store: {doc['args']['runs']} full-profile runs of {doc['args']['rounds']}+ IOPS rounds "
        f"each, {doc['store_bytes'] / 1e6:.1f} MB, built in {doc['build_s']:.1f} s. Report: "
        f"{s['sections']} sections, {s['pdf_pages']} PDF pages, HTML "
        f"{s['html_bytes'] / 1e6:.1f} MB, PDF {s['pdf_bytes'] / 1e6:.1f} MB.",
        "",
        "Machine speed: a fixed Python loop (20 million additions) took "
        f"{doc['cpu_reference_s'][0]:.2f} s before the repetitions and "
        f"{doc['cpu_reference_s'][1]:.2f} s after, for comparing runs of this benchmark.",
        "",
        "| repetition | load + HTML (s) | PDF (s) | total (s) |",
        "| --- | --- | --- | --- |",
    ]
    for i, rep in enumerate(doc["repetitions"], 1):
        lines.append(f"| {i} | {rep['html_s']:.2f} | {rep['pdf_s']:.2f} | {rep['total_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="runs in the report (20)")
    p.add_argument("--rounds", type=int, default=12, help="IOPS rounds per run, about (12)")
    p.add_argument("--repetitions", type=int, default=7, help="timed reports (7)")
    p.add_argument("--limit", type=float, default=10.0, help="seconds allowed (10)")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = p.parse_args(argv)
    if min(args.runs, args.rounds, args.repetitions) < 1:
        p.error("--runs, --rounds and --repetitions must be positive")
    sys.path.insert(0, str(ROOT / "src"))
    from ssdlab.report.pdf import find_chromium

    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="ssdlab-bench-report-") as scratch:
        store = Path(scratch) / "store.sqlite"
        started = time.perf_counter()
        ids = build_store(store, args.runs, args.rounds)
        build_s = time.perf_counter() - started
        reference_before = cpu_reference_s()
        reps = []
        for rep in range(args.repetitions):
            out = Path(scratch) / f"report{rep}"
            reps.append(measure(store, ids, out))
            print(f"repetition {rep + 1}: {reps[-1]['total_s']:.2f} s", flush=True)
        reference_after = cpu_reference_s()
        pages = pdf_pages(Path(scratch) / "report0" / "report.pdf")
        store_bytes = store.stat().st_size
    totals = [r["total_s"] for r in reps]
    median = statistics.median(totals)
    cpu_model = next((line.split(":", 1)[1].strip() for line in
                      Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor())
    version = os.popen(f"{chromium} --version 2>/dev/null").read().strip()
    doc = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {"cpu_count": os.cpu_count(), "cpu_model": cpu_model,
                    "kernel": platform.release(), "chromium": version},
        "build_s": build_s,
        "cpu_reference_s": [reference_before, reference_after],
        "store_bytes": store_bytes,
        "repetitions": reps,
        "summary": {
            "median_total_s": median,
            "min_total_s": min(totals),
            "max_total_s": max(totals),
            "pass": median < args.limit,
            "sections": reps[0]["sections"],
            "pdf_pages": pages,
            "html_bytes": reps[0]["html_bytes"],
            "pdf_bytes": reps[0]["pdf_bytes"],
        },
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"{RESULT_NAME}.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    (args.results_dir / f"{RESULT_NAME}.md").write_text(text)
    print(text)
    return 0 if doc["summary"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
