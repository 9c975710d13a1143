#!/usr/bin/env python3
"""Benchmark: the dashboard's runs page of 1,000 runs loads in under 1 s, and a stored
round shows on a run's page within 5 s.

Builds a results store of ``--runs`` (1,000) runs through the store's own API (all
finished but one, a running PTS-like run)
and a second store of ``--few-runs`` (10), measured side by side to show what the
thousand cost. Serves each with ``ssdlab serve`` (its own
process, as a user runs it) and drives headless Chromium (tests/support/browser.py):

1. **runs page**, ``--repetitions`` (10) times, both stores in turn within each
   repetition: a fresh tab opens the page; the time is from the navigation's start to
   the table drawn (the page's ``performance.now()`` when it has put the rows in, which
   counts from the navigation's start). Claim: median under ``--load-limit`` (1 s).
2. **live delay**: the running run's page open, ``--rounds`` (10) rounds are added
   through the store's API every 0.5-1.5 x ``--interval`` (1 s; random, so they land
   anywhere in the server's once-a-second look at the store); for each, the time from
   its commit (the write call returned) to the page showing it (the page's own clock
   when it drew the new round count; the same machine's clock). Claim: the slowest under
   ``--live-limit`` (5 s).

Results go to bench/results/serve_speed.json and .md. Needs Chromium and the ``serve``
extra.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recording import cpu_model, recorded_args, write_results

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULT_NAME = "serve_speed"
COMMAND = ["ssdlab", "serve", "--port", "0", "--store", "STORE"]


@contextmanager
def served(store: Path) -> Iterator[str]:
    """``ssdlab serve`` on ``store`` in a process of its own: its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "ssdlab", "serve", "--port", "0",
                             "--store", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if " at " not in line:
            why = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"ssdlab serve did not start: {line}{why}")
        yield line.split(" at ", 1)[1].split(" ", 1)[0]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(page: Any, js: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = page.evaluate(js)
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"the page did not get {js} within {timeout_s} s")


def load_runs_page(browser: Any, url: str, expected: int) -> float:
    """Seconds from the navigation's start to the runs table drawn."""
    with browser.open_url(url) as page:
        rendered = float(wait_for(page, "document.body.dataset.rendered"))
        shown = int(page.evaluate("document.body.dataset.runs"))
        if shown != expected:
            raise RuntimeError(f"the page shows {shown} runs, not {expected}")
        errors = page.console_errors()
        if errors:
            raise RuntimeError(f"console errors: {errors}")
    return rendered / 1000


def api_time(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url + "api/runs", timeout=60) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


def live_delays(browser: Any, url: str, store: Path, run_id: str, rounds: int,
                interval: float) -> list[dict[str, float]]:
    from ssdlab.store.db import Store
    from tests.support import servestore

    out = []
    rng = random.Random(18)  # the gaps vary, so the rounds land anywhere in a poll's second
    with browser.open_url(f"{url}runs/{run_id}") as page:
        wait_for(page, "document.body.dataset.rounds === '1'")
        for n in range(2, rounds + 2):
            time.sleep(interval * rng.uniform(0.5, 1.5))
            with Store.open(store) as opened:
                servestore.add_round(opened, run_id, n)
                committed = time.time()
            wait_for(page, f"document.body.dataset.rounds === '{n}'", 60)
            shown = float(page.evaluate("document.body.dataset.roundsShownAt")) / 1000
            out.append({"round": n, "delay_s": shown - committed})
            print(f"round {n}: shown {shown - committed:.2f} s after its commit", flush=True)
        errors = page.console_errors()
        if errors:
            raise RuntimeError(f"console errors: {errors}")
    return out


def build(scratch: Path, runs: int, few: int) -> tuple[Path, Path, str, float]:
    from ssdlab.store.db import Store
    from tests.support import servestore

    started = time.perf_counter()
    many, small = scratch / "many.sqlite", scratch / "few.sqlite"
    servestore.many_runs(many, runs - 1)  # and the running run: ``runs`` in all
    servestore.many_runs(small, few)
    build_s = time.perf_counter() - started
    with Store.open(many) as store:
        run_id = servestore.new_running_run(store, max_rounds=100)
        servestore.add_round(store, run_id, 1)
    return many, small, run_id, build_s


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values)}


def markdown(doc: dict[str, Any]) -> str:
    s, a = doc["summary"], doc["args"]
    page, few, live = s["runs_page"], s["runs_page_few"], s["live_delay"]
    lines = [
        f"# Dashboard speed: the runs page of {a['runs']:,} runs, and live rounds",
        "",
        f"Measured {doc['date']} on {doc['machine']['cpu_count']} CPUs "
        f"({doc['machine']['cpu_model']}), {doc['machine']['chromium']}. Produced by "
        "`bench/serve_speed.py`; every number is in `serve_speed.json`. The server: "
        f"`{' '.join(COMMAND)}`, its own process.",
        "",
        f"**Verdict: {'PASS' if s['pass'] else 'FAIL'}.**",
        "",
        "| claim | median (s) | fastest (s) | slowest (s) | limit (s) | judged on | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| runs page, {a['runs']:,} runs: navigation to table drawn | {page['median_s']:.3f} | "
        f"{page['min_s']:.3f} | {page['max_s']:.3f} | {a['load_limit']} | median | "
        f"{'PASS' if s['load_pass'] else 'FAIL'} |",
        f"| live: round committed to shown on the run page | {live['median_s']:.2f} | "
        f"{live['min_s']:.2f} | {live['max_s']:.2f} | {a['live_limit']} | slowest | "
        f"{'PASS' if s['live_pass'] else 'FAIL'} |",
        "",
        f"Side by side in the same run: the runs page of a store of {a['few_runs']} runs "
        f"took {few['median_s']:.3f} s (median; {few['min_s']:.3f}-{few['max_s']:.3f}). "
        f"The runs list as JSON (`api/runs`) of the {a['runs']:,} runs: "
        f"{doc['api']['bytes'] / 1e3:.0f} kB in "
        f"{doc['api']['seconds']:.3f} s (one request from Python, for information).",
        "",
        f"The stores were built through the store's API in {doc['build_s']:.1f} s. Live "
        f"rounds: {a['rounds']}, 0.5-1.5 x {a['interval']} s apart (random); the server looks at "
        "the store about once a second per open page, so a delay up to about 1 s plus "
        "drawing is expected.",
        "",
        "Runs page, each repetition (s):",
        "",
        f"| repetition | {a['runs']:,} runs | {a['few_runs']:,} runs |",
        "| --- | --- | --- |",
    ]
    for i, (m, f) in enumerate(zip(doc["runs_page_s"], doc["runs_page_few_s"], strict=True), 1):
        lines.append(f"| {i} | {m:.3f} | {f:.3f} |")
    lines += ["", "Live delay, each round (s):", "", "| round | delay |", "| --- | --- |"]
    lines += [f"| {r['round']} | {r['delay_s']:.2f} |" for r in doc["live"]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1000, help="runs in the store (1000)")
    p.add_argument("--few-runs", type=int, default=10, help="runs in the other store (10)")
    p.add_argument("--repetitions", type=int, default=10, help="runs page loads (10)")
    p.add_argument("--rounds", type=int, default=10, help="live rounds (10)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between rounds (1)")
    p.add_argument("--load-limit", type=float, default=1.0, help="seconds allowed (1)")
    p.add_argument("--live-limit", type=float, default=5.0, help="seconds allowed (5)")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = p.parse_args(argv)
    if min(args.runs, args.few_runs, args.repetitions, args.rounds) < 1:
        p.error("--runs, --few-runs, --repetitions and --rounds must be positive")
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT))
    from tests.support.browser import Browser

    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="ssdlab-bench-serve-", dir=base) as tmp:
        many, few, run_id, build_s = build(Path(tmp), args.runs, args.few_runs)
        with served(many) as url, served(few) as few_url, Browser() as browser:
            load_runs_page(browser, url, args.runs)  # warm-up, not counted
            load_runs_page(browser, few_url, args.few_runs)
            loads, few_loads = [], []
            for rep in range(args.repetitions):
                loads.append(load_runs_page(browser, url, args.runs))
                few_loads.append(load_runs_page(browser, few_url, args.few_runs))
                print(f"repetition {rep + 1}: {loads[-1]:.3f} s ({args.runs} runs), "
                      f"{few_loads[-1]:.3f} s ({args.few_runs} runs)", flush=True)
            seconds, size = api_time(url)
            live = live_delays(browser, url, many, run_id, args.rounds, args.interval)
            chromium = browser.version
    load = summary(loads)
    delay = summary([r["delay_s"] for r in live])
    doc: dict[str, Any] = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "args": recorded_args(args),
        "command": COMMAND,
        "machine": {"cpu_count": os.cpu_count(), "cpu_model": cpu_model() or platform.processor(),
                    "kernel": platform.release(), "chromium": chromium},
        "build_s": build_s,
        "runs_page_s": loads,
        "runs_page_few_s": few_loads,
        "api": {"seconds": seconds, "bytes": size},
        "live": live,
        "summary": {
            "runs_page": load, "runs_page_few": summary(few_loads), "live_delay": delay,
            "load_pass": load["median_s"] < args.load_limit,
            "live_pass": delay["max_s"] < args.live_limit,
        },
    }
    doc["summary"]["pass"] = doc["summary"]["load_pass"] and doc["summary"]["live_pass"]
    write_results(args.results_dir, RESULT_NAME, doc, markdown(doc))
    return 0 if doc["summary"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
