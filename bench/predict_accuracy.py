#!/usr/bin/env python3
"""Benchmark: how early and how well ``--predict`` predicts the full SNIA run's result.

``ssdlab run pts --predict`` stops when every tracking variable's predicted steady state
is known within +-5 % at 95 % confidence (src/ssdlab/analysis/predict.py). The figure a
full run reports is its SNIA window's average, so that is what the prediction is judged
against. Two kinds of cases:

  emulator   real fio on fresh emulated SSDs (``ssdlab emulator start``: several
             profiles, sizes and over-provisioning settings), each run ONCE to the SNIA
             rule (``ssdlab run pts`` without ``--predict``); the predictor is then
             replayed on every prefix of the stored rounds, exactly what ``--predict``
             would have seen after round k;
  synthetic  curves built to settle slowly, flatten early, drop late (a fresh-out-of-
             box cliff) or never flatten, with seeded noise; judged the same way.

Per case: the SNIA steady round and window average, the first round the prediction is
known and its value, the error, and the fraction of the SNIA run's rounds it needed.
Where the full run never reaches steady state the prediction must claim nothing.
Finally one real ``ssdlab run pts --predict`` on a fresh emulator shows the run stopping
early, with its stored label.

The same settings for every case: nothing is tuned per case. ``--replay`` reuses the
emulator rounds recorded in bench/results/predict_accuracy.json (no fio) and only
replays the predictor. Needs root and /dev/fuse for the emulator; only the emulators
this script starts are written, and they are stopped at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_overhead import fio_version
from recording import recorded_args, write_results
from ssdlab.analysis.predict import LABEL, TOLERANCE, predict_run
from ssdlab.analysis.steady import SNIA_RULE, evaluate

BENCH_DIR = Path(__file__).resolve().parent
RESULT_NAME = "predict_accuracy"
#: the criteria the benchmark checks (issue 19)
MAX_ERROR_PCT = 5.0
MAX_MEAN_FRACTION = 0.5
#: emulator cases: (name, profile, size, OP % or None for the profile's, extra run options)
EMULATOR_CASES: tuple[tuple[str, str, str, int | None, tuple[str, ...]], ...] = (
    ("etlc-128m-fob", "enterprise-tlc", "128MiB", None, ("--no-precondition",)),
    ("etlc-256m-op20-fob", "enterprise-tlc", "256MiB", 20, ("--no-precondition",)),
    ("etlc-128m-wipc", "enterprise-tlc", "128MiB", None, ()),
    ("cslc-128m-fob", "client-slc", "128MiB", None, ("--no-precondition",)),
    ("maxop-128m-fob", "max-op", "128MiB", None, ("--no-precondition",)),
    ("etlc-64m-op3-fob", "enterprise-tlc", "64MiB", 3, ("--no-precondition",)),
    ("cslc-64m-latency-fob", "client-slc", "64MiB", None,
     ("--no-precondition", "--tests", "latency", "--latency-block-sizes", "4",
      "--latency-mixes", "0/100")),
)
IOPS_CELL = ("--tests", "iops", "--block-sizes", "4", "--mixes", "0/100")
SYNTHETIC_ROUNDS = 40


def ssdlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssdlab", *args], capture_output=True,
                          text=True, check=False, timeout=900)


def start_emulator(name: str, profile: str, size: str, op: int | None) -> str:
    extra = ["--op", str(op)] if op is not None else []
    done = ssdlab("emulator", "start", "--name", name, "--profile", profile, "--size", size,
                  "--loop", *extra)
    found = re.search(r"target: (/dev/loop\d+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"emulator start failed: {done.stderr.strip() or done.stdout}")
    return found.group(1)


def pts_command(device: str, store: str, options: Sequence[str], rounds: int,
                round_seconds: float) -> list[str]:
    if "--tests" not in options:
        options = (*IOPS_CELL, *options)
    return ["run", "pts", "--target", device, "--destroy-data", *options,
            "--round-seconds", f"{round_seconds:g}", "--max-rounds", str(rounds),
            "--store", store]


def exported(store: str) -> dict[str, Any]:
    done = ssdlab("export", "last", "--format", "json", "--store", store)
    if done.returncode != 0:
        raise RuntimeError(f"export failed: {done.stderr.strip()}")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def run_case(case: tuple[str, str, str, int | None, tuple[str, ...]], tmp: Path,
             args: argparse.Namespace, predict: bool = False) -> dict[str, Any]:
    """One case on a fresh emulator: its rounds' tracking values and what was stored."""
    name, profile, size, op, options = case
    emu = f"pa-{os.getpid()}-{name}"
    store = str(tmp / f"{name}{'-predict' if predict else ''}.sqlite")
    device = start_emulator(emu, profile, size, op)
    try:
        command = pts_command(device, store, (*options, *(("--predict",) if predict else ())),
                              args.max_rounds, args.round_seconds)
        done = ssdlab(*command)
        if done.returncode != 0:
            raise RuntimeError(f"{name}: ssdlab run failed: {done.stderr.strip()}")
        doc = exported(store)
    finally:
        ssdlab("emulator", "stop", "--name", emu)
    test = doc["tests"][0]
    tracked = test["verdict"]["tracked"]
    rounds = [r for r in test["rounds"] if r["status"] == "ok"]
    return {
        "case": name, "profile": profile, "size": size, "op_pct": op,
        "command": ["ssdlab", *command[:3], "DEVICE", *command[4:-1], "STORE"],
        "test": test["name"], "status": test["status"],
        "series": {v: [r["tracking"][v] for r in rounds] for v in tracked},
        "snia_message": test["verdict"]["message"],
        "prediction": test["result"].get("prediction"),
    }


def cached(case: tuple[str, str, str, int | None, tuple[str, ...]], tmp: Path,
           args: argparse.Namespace) -> dict[str, Any]:
    """A case's full SNIA run, from ``--cache`` when it holds one (then saved there)."""
    done: dict[str, Any] = (json.loads(args.cache.read_text())
                            if args.cache is not None and args.cache.exists() else {})
    if case[0] not in done:
        done[case[0]] = run_case(case, tmp, args)
        if args.cache is not None:
            args.cache.write_text(json.dumps(done))
    return dict(done[case[0]])


# -- synthetic curves ------------------------------------------------------------------------

def _noisy(shape: Callable[[int], float], noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [shape(t) * (1 + rng.gauss(0, noise)) for t in range(1, SYNTHETIC_ROUNDS + 1)]


SHAPES: dict[str, Callable[[int], float]] = {
    # settles slowly: the SNIA rule passes while the curve is still 10-20 % above its end
    "slow": lambda t: 1000 + 1500 * math.exp(-0.12 * t),
    "very-slow": lambda t: 1000 + 2500 * math.exp(-0.07 * t),
    # flattens early
    "early": lambda t: 1000 + 2000 * math.exp(-0.9 * t),
    "flat": lambda t: 1000.0,
    # latency-like: rises to its plateau
    "rising": lambda t: 200 - 120 * math.exp(-0.2 * t),
    # a fresh-out-of-box cliff: flat, then a drop, then flat
    "cliff": lambda t: 1000 + 2000 / (1 + math.exp(0.6 * (t - 8))),
    # never flattens: a steady decline, a decline that speeds up, a see-saw
    "never-linear": lambda t: 4000 - 100 * t,
    "never-accelerating": lambda t: 4000 - 80 * t - 2 * t * t,
    "never-see-saw": lambda t: 2000 * (1 + 0.25 * (-1) ** t),
}
NOISES = (0.003, 0.01, 0.03)
SEEDS = (1, 2, 3)


def synthetic_cases() -> list[dict[str, Any]]:
    return [{"case": f"{shape}-noise{noise * 100:g}-seed{seed}", "shape": shape,
             "noise_pct": noise * 100, "seed": seed,
             "series": {"y": _noisy(SHAPES[shape], noise, seed)}}
            for shape in SHAPES for noise in NOISES for seed in SEEDS]


def oracle_spread(seeds: int = 200) -> list[dict[str, Any]]:
    """How far the full SNIA run's window average moves with the noise alone, the curve
    known exactly: per shape and noise, the 2.5 % and 97.5 % quantiles over ``seeds``
    noise draws, relative to the median. No prediction can be surer than this."""
    out = []
    for shape, curve in SHAPES.items():
        for noise in NOISES:
            found = []
            for seed in range(seeds):
                ys = _noisy(curve, noise, 1000 + seed)
                steady = next((v for k in range(SNIA_RULE.window, len(ys) + 1)
                               if (v := evaluate({"y": ys[:k]}, SNIA_RULE)).attained), None)
                if steady is not None:
                    found.append((steady.checks[0].average, steady.rounds_seen))
            row: dict[str, Any] = {"shape": shape, "noise_pct": noise * 100,
                                   "steady_share": len(found) / seeds}
            if len(found) >= seeds // 10:
                averages = sorted(a for a, _ in found)
                median = averages[len(averages) // 2]
                row.update(
                    median_window_average=median,
                    median_snia_round=sorted(r for _, r in found)[len(found) // 2],
                    low_pct=100 * (averages[int(0.025 * len(averages))] / median - 1),
                    high_pct=100 * (averages[int(0.975 * len(averages)) - 1] / median - 1))
            out.append(row)
    return out


# -- judging ---------------------------------------------------------------------------------

def judge(series: Mapping[str, Sequence[float]], max_rounds: int, noisy: bool = True
          ) -> dict[str, Any]:
    """The full SNIA run (the whole series) against the predictor replayed on its prefixes
    (``noisy=False``: the variant that judges the drawn curves without their noise)."""
    n = min(len(v) for v in series.values())
    snia_round, snia_avg = None, None
    for k in range(SNIA_RULE.window, n + 1):
        verdict = evaluate({v: list(s[:k]) for v, s in series.items()}, SNIA_RULE)
        if verdict.attained:
            snia_round = k
            snia_avg = {c.variable: c.average for c in verdict.checks}
            break
    last = snia_round or n
    out: dict[str, Any] = {"snia_round": snia_round, "snia_window_average": snia_avg,
                           "rounds_run": last, **arrival(series, snia_round, snia_avg)}
    for k in range(1, last + 1):
        found = predict_run({v: list(s[:k]) for v, s in series.items()}, SNIA_RULE,
                            max_rounds, TOLERANCE, noisy=noisy)
        if found.known:
            values = {p.variable: p.value for p in found.predictions}
            out.update(predicted_round=k, predicted=values,
                       predicted_window=list(found.window_rounds or ()),
                       half_width_pct={p.variable: p.half_width_pct
                                       for p in found.predictions})
            if snia_avg is not None:
                errors = [100 * (value / snia_avg[v] - 1) for v in snia_avg
                          if (value := values[v]) is not None]
                out["error_pct"] = max(errors, key=abs)
                out["rounds_fraction"] = k / snia_round if snia_round else None
            return out
    out.update(predicted_round=None, predicted=None)
    return out


def arrival(series: Mapping[str, Sequence[float]], snia_round: int | None,
            snia_avg: Mapping[str, float] | None) -> dict[str, Any]:
    """Where the measured rounds themselves reach the full run's answer: the first round
    from which every round up to the SNIA one is within MAX_ERROR_PCT of the SNIA window
    average (each variable), and how far the round at half the SNIA rounds still is from
    it (the variable furthest off). A prediction made before the arrival round names a
    level no round has shown yet: it extrapolates the curve. None when even the SNIA
    round is further off (counted as the SNIA round in the mean)."""
    if snia_round is None or snia_avg is None:
        return {"arrival_round": None, "at_half_pct": None}

    def off(v: str, k: int) -> float:
        return 100 * (series[v][k - 1] / snia_avg[v] - 1)

    arrived = next((k for k in range(1, snia_round + 1)
                    if all(abs(off(v, j)) <= MAX_ERROR_PCT
                           for v in snia_avg for j in range(k, snia_round + 1))), None)
    half = max(snia_round // 2, 1)
    return {"arrival_round": arrived,
            "at_half_pct": max((off(v, half) for v in snia_avg), key=abs)}


def verdict_of(result: dict[str, Any]) -> str:
    if result["snia_round"] is None:
        return "ok: no claim" if result["predicted_round"] is None else "FAIL: claimed"
    if result["predicted_round"] is None:
        return "no prediction before SNIA"
    return "ok" if abs(result["error_pct"]) <= MAX_ERROR_PCT else "FAIL: error"


def summary(cases: list[dict[str, Any]]) -> dict[str, Any]:
    steady = [c for c in cases if c["snia_round"] is not None]
    never = [c for c in cases if c["snia_round"] is None]
    fractions = [c["rounds_fraction"] if c["predicted_round"] is not None else 1.0
                 for c in steady]
    within = [c for c in steady if c["predicted_round"] is not None
              and abs(c["error_pct"]) <= MAX_ERROR_PCT]
    claimed = [c["case"] for c in never if c["predicted_round"] is not None]
    mean_fraction = sum(fractions) / len(fractions) if fractions else None
    arrivals = [(c["arrival_round"] or c["snia_round"]) / c["snia_round"] for c in steady]
    wrong = [c["case"] for c in steady if c["predicted_round"] is not None
             and abs(c["error_pct"]) > MAX_ERROR_PCT]
    return {
        "cases": len(cases), "steady_cases": len(steady), "never_steady_cases": len(never),
        "predicted_within_5pct": len(within),
        "predicted_outside_5pct": wrong,
        "not_predicted_before_snia": [c["case"] for c in steady
                                      if c["predicted_round"] is None],
        "mean_rounds_fraction": mean_fraction,
        "mean_arrival_fraction": sum(arrivals) / len(arrivals) if arrivals else None,
        "claims_where_never_steady": claimed,
        "error_criterion_met": not wrong,
        "fraction_criterion_met": mean_fraction is not None
        and mean_fraction <= MAX_MEAN_FRACTION,
        "never_criterion_met": not claimed,
    }


# -- the report ------------------------------------------------------------------------------

def _fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def table(cases: list[dict[str, Any]]) -> list[str]:
    lines = ["| case | SNIA round | SNIA window avg | predicted round | predicted | "
             "+- 95 % | error % | rounds fraction | verdict | arrival round | "
             "at half % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for c in cases:
        snia = c["snia_window_average"]
        first = next(iter(c["series"]))
        predicted = c["predicted"][first] if c["predicted"] else None
        half = c["half_width_pct"][first] if c["predicted"] else None
        lines.append(
            f"| {c['case']} | {_fmt(c['snia_round'], 'd')} | "
            f"{_fmt(snia[first] if snia else None)} | {_fmt(c['predicted_round'], 'd')} | "
            f"{_fmt(predicted)} | {_fmt(half, '.1f')} | {_fmt(c.get('error_pct'), '+.1f')} | "
            f"{_fmt(c.get('rounds_fraction'), '.2f')} | {verdict_of(c)} | "
            f"{_fmt(c.get('arrival_round'), 'd')} | {_fmt(c.get('at_half_pct'), '+.0f')} |")
    return lines


def _criteria_line(kind: str, s: dict[str, Any]) -> str:
    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"
    return (f"* {kind}: within {MAX_ERROR_PCT:g} %: {s['predicted_within_5pct']} of "
            f"{s['steady_cases']}, outside: {', '.join(s['predicted_outside_5pct']) or 'none'} "
            f"({met(s['error_criterion_met'])}); mean rounds fraction "
            f"{_fmt(s['mean_rounds_fraction'], '.2f')}, at most {MAX_MEAN_FRACTION:g}: "
            f"{met(s['fraction_criterion_met'])}; claims where never steady: "
            f"{', '.join(s['claims_where_never_steady']) or 'none'} "
            f"({met(s['never_criterion_met'])})")


def markdown(doc: dict[str, Any]) -> str:
    out = [f"# predict_accuracy ({doc['date']})", "",
           f"`ssdlab run pts --predict` against the full SNIA run: {doc['claim']}", "",
           f"fio {doc['fio']}, {doc['cpus']} CPUs; emulator cases: one cell per test "
           f"(4 KiB 0/100 IOPS unless named latency), {doc['args']['round_seconds']:g} s "
           f"rounds, at most {doc['args']['max_rounds']} rounds; synthetic: "
           f"{SYNTHETIC_ROUNDS} rounds, {', '.join(f'{n * 100:g}' for n in NOISES)} % noise. "
           "The replays of the emulator rounds and the real `--predict` runs: "
           f"{doc['provenance']}.",
           ""]
    for kind in ("emulator", "synthetic"):
        s = doc["summary"][kind]
        out += [f"## {kind}", "", *table(doc[kind]), "",
                f"Within {MAX_ERROR_PCT:g} %: {s['predicted_within_5pct']} of "
                f"{s['steady_cases']} steady cases (outside: "
                f"{', '.join(s['predicted_outside_5pct']) or 'none'}; not predicted before "
                f"the SNIA rule passed: {', '.join(s['not_predicted_before_snia']) or 'none'})"
                f". Mean rounds fraction {_fmt(s['mean_rounds_fraction'], '.2f')} (a case "
                f"with no prediction counts as 1). The rounds themselves arrive within "
                f"{MAX_ERROR_PCT:g} % of the full run's answer, to stay, at "
                f"{_fmt(s['mean_arrival_fraction'], '.2f')} of its rounds on average (arrival "
                f"round: from it on every round is within {MAX_ERROR_PCT:g} %; at half %: the "
                f"round at half the SNIA rounds against the answer; none arrived: counted as "
                f"the SNIA round): a prediction before the arrival round names a level no "
                f"round has shown yet. Never-steady cases: "
                f"{s['never_steady_cases']}, claims among them: "
                f"{', '.join(s['claims_where_never_steady']) or 'none'}.", ""]
    out += ["## Real `--predict` runs", "",
            "Every emulator case again with `--predict`, on a fresh emulator:", ""]
    for real in doc["predict_runs"]:
        rounds = len(next(iter(real["series"].values())))
        out += [f"* {real['case']}: status `{real['status']}` after {rounds} rounds (the "
                f"full SNIA run of the same case: steady at round "
                f"{real['full_snia_round'] or '-'}, window average "
                f"{_fmt(next(iter((real['full_snia_window_average'] or {}).values()), None))}"
                f"). Stored: {(real['prediction'] or {}).get('message', 'no prediction')}"]
    out.append("")
    out += ["## What the noise alone does to the full run", "",
            "The curve known exactly, 200 noise draws each: where the full SNIA run's "
            "window average falls (2.5 % and 97.5 % quantiles, relative to the median). "
            "A prediction of it cannot be surer than this range.", "",
            "| shape | noise % | runs steady | median SNIA round | median window avg | "
            "2.5 % | 97.5 % |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    out += [f"| {r['shape']} | {r['noise_pct']:g} | {100 * r['steady_share']:.0f} % | "
            f"{_fmt(r.get('median_snia_round'), 'd')} | "
            f"{_fmt(r.get('median_window_average'))} | {_fmt(r.get('low_pct'), '+.1f')} | "
            f"{_fmt(r.get('high_pct'), '+.1f')} |" for r in doc["oracle_spread"]]
    out += ["", "## The variant not chosen", "",
            "Judging each drawn curve without its noise (the window the fitted curve itself "
            "passes, noise added to the window's average only):", "",
            *(_criteria_line(kind, doc["summary_noise_free_curve_window"][kind])
              for kind in ("emulator", "synthetic")),
            "", "## Criteria", "",
            *(_criteria_line(kind, doc["summary"][kind]) for kind in ("emulator", "synthetic"))]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-seconds", type=float, default=1.0,
                        help="seconds per cell per round on the emulator (default 1)")
    parser.add_argument("--max-rounds", type=int, default=40,
                        help="rounds before a full run gives up (default 40)")
    parser.add_argument("--replay", action="store_true",
                        help="reuse the emulator rounds of the recorded result; no fio")
    parser.add_argument("--cache", type=Path, default=None,
                        help="a JSON file keeping each finished full run, reused when "
                        "the benchmark is run again (default: none)")
    parser.add_argument("--no-predict-run", action="store_true",
                        help="no real --predict runs on the emulator (with --replay: keep "
                        "the recorded ones)")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = parser.parse_args(argv)
    previous = args.results_dir / f"{RESULT_NAME}.json"
    recorded = json.loads(previous.read_text()) if args.replay else {}
    tmp = Path(tempfile.mkdtemp(prefix="ssdlab-predict-bench-"))
    try:
        runs = (recorded["emulator"] if args.replay
                else [cached(case, tmp, args) for case in EMULATOR_CASES])
        emulator = [{**{k: v for k, v in r.items() if k in (
            "case", "profile", "size", "op_pct", "command", "test", "status", "snia_message",
            "series")}, **judge(r["series"], args.max_rounds)} for r in runs]
        # a real --predict run of every case, on a fresh emulator each (not the same
        # drive as the full run's: it may settle, and stop, elsewhere)
        real = recorded.get("predict_runs", []) if args.no_predict_run else [
            run_case(case, tmp, args, predict=True) for case in EMULATOR_CASES]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    synthetic = [{**c, **judge(c["series"], SYNTHETIC_ROUNDS)} for c in synthetic_cases()]
    # the variant the brief first suggested: the window the drawn (noise-free) curve passes
    curve_window = {
        "emulator": summary([{**r, **judge(r["series"], args.max_rounds, noisy=False)}
                             for r in emulator]),
        "synthetic": summary([{**c, **judge(c["series"], SYNTHETIC_ROUNDS, noisy=False)}
                              for c in synthetic]),
    }
    for one in real:
        full = next(c for c in emulator if c["case"] == one["case"])
        one.update(full_snia_round=full["snia_round"],
                   full_snia_window_average=full["snia_window_average"],
                   replay_predicted_round=full["predicted_round"])
    doc = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "claim": (f"where the full run reaches steady state the prediction is within "
                  f"{MAX_ERROR_PCT:g} % of its SNIA window average, reached in at most "
                  f"{MAX_MEAN_FRACTION:g} of its rounds on average; where it never does, "
                  f"no plateau is claimed. Label: {LABEL}"),
        "fio": fio_version("fio"), "cpus": os.cpu_count(), "args": recorded_args(args),
        "summary": {"emulator": summary(emulator), "synthetic": summary(synthetic)},
        "summary_noise_free_curve_window": curve_window,
        "provenance": ("emulator rounds and real --predict runs as recorded earlier, "
                       "replayed" if args.replay else "run by this invocation"),
        "oracle_spread": oracle_spread(),
        "emulator": emulator, "synthetic": synthetic, "predict_runs": real,
    }
    write_results(args.results_dir, RESULT_NAME, doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
