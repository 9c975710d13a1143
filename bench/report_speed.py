#!/usr/bin/env python3
"""Benchmark: a report of 20 runs is written (HTML and PDF) in under 10 seconds.

Builds a results store of ``--runs`` (20) full-profile PTS runs through ssdlab's real
orchestration (plan, rounds, steady-state analysis, SQLite journal) with the fake fio
executor of the test suite, so that each run has the shape and size of a real one: the
IOPS test's 56 cells settling over ``--rounds`` (12) rounds, both throughput tests and the
latency test, every round's cells and job file stored. Then, ``--repetitions`` (7) times,
times ``ssdlab report`` of all of them (through the same function the command calls):
loading from the store, rendering the HTML, and printing the PDF with Chromium. In each
repetition, side by side, it also times the two ways ssdlab printed before: in one
Chromium process (``SSDLAB_PRINT_JOBS=1``), and in one process of the full browser
(``SSDLAB_CHROMIUM=chromium``, when installed).

Claim: ssdlab's median total (HTML + PDF) is below ``--limit`` (10) seconds. Results go to
bench/results/report_speed.json and .md. Needs Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict
from unittest import mock

from recording import cpu_model, program_name, recorded_args, write_results

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
    from ssdlab.plan.pts import PtsArgs
    from ssdlab.run.progress import Progress
    from ssdlab.run.pts_run import PtsRun
    from ssdlab.store.db import Store
    from tests.support.fake_fio import FakeFio
    from tests.support.prepared import make_prepared
    args = PtsArgs(profile="default", purge="none", precondition=False, max_rounds=rounds + 3)
    ids = []
    # the fake runs' test files are in a scratch directory: sampling the disk under it
    # would add a members page per test (of unrelated I/O) to the report measured
    unsampled = mock.patch("ssdlab.run.session.find_sampler",
                           lambda path, *a, **kw: (None, "not sampled in the benchmark"))
    with Store.open(path) as store, tempfile.TemporaryDirectory() as scratch, unsampled:
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


#: what is timed side by side, in turn within each repetition: ssdlab as it is, and the
#: two ways it printed before (one process; one process of the full browser)
CONFIGS: dict[str, dict[str, str]] = {
    "ssdlab": {},
    "one process": {"SSDLAB_PRINT_JOBS": "1"},
    "one process, full browser": {"SSDLAB_PRINT_JOBS": "1", "SSDLAB_CHROMIUM": "chromium"},
}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Measured(TypedDict):
    """One report's timings and sizes (and, for ssdlab's own set-up, its print jobs)."""

    total_s: float
    html_s: float
    pdf_s: float
    sections: int
    html_bytes: int
    pdf_bytes: int
    print_jobs: NotRequired[int]


def measure(store_path: Path, ids: Sequence[str], out: Path) -> Measured:
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
        f"ssdlab printed the PDF in {s['print_jobs']} part(s) at once, with "
        f"`{doc['configurations']['ssdlab']['chromium']}`.",
        "",
        "Side by side in the same run (each repetition times every configuration in turn):",
        "",
        "| configuration | Chromium | median (s) | fastest (s) | slowest (s) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, conf in doc["configurations"].items():
        env = " ".join(f"{k}={v}" for k, v in conf["environment"].items())
        lines.append(f"| {name}{f' ({env})' if env else ''} | `{Path(conf['chromium']).name}` | "
                     f"{conf['median_total_s']:.2f} | {conf['min_total_s']:.2f} | "
                     f"{conf['max_total_s']:.2f} |")
    lines += [
        "",
        "ssdlab, each repetition:",
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
    from ssdlab.report.pdf import find_chromium, print_jobs

    if shutil.which("chromium") is None:
        del CONFIGS["one process, full browser"]
    binaries = {}
    for name, env in CONFIGS.items():
        with environment(env):
            binaries[name] = find_chromium(printing=True)
    with tempfile.TemporaryDirectory(prefix="ssdlab-bench-report-") as scratch:
        store = Path(scratch) / "store.sqlite"
        started = time.perf_counter()
        ids = build_store(store, args.runs, args.rounds)
        build_s = time.perf_counter() - started
        reference_before = cpu_reference_s()
        reps: dict[str, list[Measured]] = {name: [] for name in CONFIGS}
        for rep in range(args.repetitions):
            for name, env in CONFIGS.items():
                out = Path(scratch) / f"report{rep}-{len(reps[name])}-{hash(name)}"
                with environment(env):
                    reps[name].append(measure(store, ids, out))
                    if name == "ssdlab":
                        reps[name][-1]["print_jobs"] = print_jobs(reps[name][-1]["html_bytes"])
                print(f"repetition {rep + 1}, {name}: {reps[name][-1]['total_s']:.2f} s",
                      flush=True)
                if rep == 0 and name == "ssdlab":
                    pages = pdf_pages(out / "report.pdf")
        reference_after = cpu_reference_s()
        store_bytes = store.stat().st_size
    main_reps = reps["ssdlab"]
    totals = [r["total_s"] for r in main_reps]
    median = statistics.median(totals)
    model = cpu_model() or platform.processor()
    versions = {name: os.popen(f"{path} --version 2>/dev/null").read().strip()
                for name, path in binaries.items()}
    doc: dict[str, Any] = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "args": recorded_args(args),  # results_dir relative to the repository
        "machine": {"cpu_count": os.cpu_count(), "cpu_model": model,
                    "kernel": platform.release(), "chromium": versions["ssdlab"]},
        "configurations": {
            name: {"environment": CONFIGS[name], "chromium": program_name(binaries[name]),
                   "chromium_version": versions[name],
                   "median_total_s": statistics.median(r["total_s"] for r in runs),
                   "min_total_s": min(r["total_s"] for r in runs),
                   "max_total_s": max(r["total_s"] for r in runs)}
            for name, runs in reps.items()
        },
        "build_s": build_s,
        "cpu_reference_s": [reference_before, reference_after],
        "store_bytes": store_bytes,
        "repetitions": main_reps,
        "repetitions_by_configuration": reps,
        "summary": {
            "median_total_s": median,
            "min_total_s": min(totals),
            "max_total_s": max(totals),
            "pass": median < args.limit,
            "print_jobs": main_reps[0]["print_jobs"],
            "sections": main_reps[0]["sections"],
            "pdf_pages": pages,
            "html_bytes": main_reps[0]["html_bytes"],
            "pdf_bytes": main_reps[0]["pdf_bytes"],
        },
    }
    write_results(args.results_dir, RESULT_NAME, doc, markdown(doc))
    return 0 if doc["summary"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
