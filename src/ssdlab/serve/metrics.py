"""The Prometheus text exposition (format 0.0.4) of the running runs.

Each running run is described by the last round it stored (its newest ``ok`` round):
the round's number, each cell's IOPS, bandwidth and latencies, the tracking variables,
and the steady-state excursions of the window that ends there. Written by hand (no
Prometheus library at run time): every family's ``# HELP`` and ``# TYPE`` come once,
before its samples, which follow in one group; every series (name and labels) is
unique; label values are escaped; the text ends with a newline. docs/serve.md lists the
families with their units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ssdlab.analysis.steady import SteadyRule, check_window, rule_by_name
from ssdlab.report.figures import progress_params
from ssdlab.serve.data import Reader
from ssdlab.store.records import RoundData, RunData, TestData

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: a cell's identity (run/cells.py IDENTITY_KEYS) as labels, where the cell has them
CELL_LABELS = ("cell", "block_bytes", "read_pct", "pattern", "threads", "iodepth")
#: latency percentiles of a cell (microseconds) -> the ``quantile`` label
QUANTILES = {"lat_p50_us": "0.5", "lat_p99_us": "0.99", "lat_p99_9_us": "0.999",
             "lat_p99_99_us": "0.9999"}

Labels = dict[str, str]


@dataclass
class Family:
    """One metric family: its samples in the order they are written."""

    name: str
    help: str
    type: str = "gauge"
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float | None) -> None:
        if value is not None:
            self.samples.append((labels, value))


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render(families: Sequence[Family]) -> str:
    """The exposition text; a series given twice is written once (the first)."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        seen: set[tuple[tuple[str, str], ...]] = set()
        for labels, value in family.samples:
            key = tuple(sorted(labels.items()))
            if key in seen:
                continue
            seen.add(key)
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            lines.append(f"{family.name}{{{text}}} {format_value(value)}" if text
                         else f"{family.name} {format_value(value)}")
    return "\n".join(lines) + "\n"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _label(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def last_round(run: RunData) -> tuple[TestData, RoundData] | None:
    """The run's newest ``ok`` round (by when it ended) and its test."""
    found = [(t, r) for t in run.tests for r in t.rounds if r.status == "ok"]
    if not found:
        return None
    return max(found, key=lambda tr: (tr[1].ended_at, tr[1].round_no))


def _rule(test: TestData) -> SteadyRule | None:
    try:
        return rule_by_name(str(progress_params(test).rule))
    except ValueError:
        return None


def excursions(test: TestData, upto: int) -> dict[str, dict[str, float]]:
    """Per tracking variable, the excursions (fractions of the window average) of the
    window of the rule's size that ends at round ``upto``: ``data``, ``slope``, ``line``
    (the rule's criteria only); nothing before the window is full."""
    rule = _rule(test)
    if rule is None:
        return {}
    ok = sorted((r for r in test.rounds if r.status == "ok" and r.round_no <= upto),
                key=lambda r: r.round_no)[-rule.window:]
    if len(ok) < rule.window:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name in ok[-1].tracking:
        values = [_number(r.tracking.get(name)) for r in ok]
        if any(v is None for v in values):
            continue
        check = check_window(name, [v for v in values if v is not None], ok[0].round_no, rule)
        kinds: dict[str, float] = {}
        if rule.max_data_excursion is not None:
            kinds["data"] = check.data_excursion_pct / 100
        if rule.max_slope_excursion is not None:
            kinds["slope"] = check.slope_excursion_pct / 100
        if rule.line_band is not None:
            kinds["line"] = max(100 - check.line_min_pct, check.line_max_pct - 100) / 100
        out[name] = kinds
    return out


def _limits(rule: SteadyRule) -> dict[str, float]:
    limits = {"data": rule.max_data_excursion, "slope": rule.max_slope_excursion,
              "line": rule.line_band}
    return {k: v for k, v in limits.items() if v is not None}


def families() -> dict[str, Family]:
    """Every family the endpoint writes, in order (empty)."""
    out = [
        Family("ssdlab_runs_running", "Runs in the store whose status is running."),
        Family("ssdlab_run_info", "A running run: its suite, profile, target, the target's "
               "model and the host measured; always 1."),
        Family("ssdlab_run_start_time_seconds", "When the running run started (unix time)."),
        Family("ssdlab_round_number", "Number of the run's last stored round, in its test."),
        Family("ssdlab_round_end_time_seconds", "When the last stored round ended (unix time)."),
        Family("ssdlab_iops", "I/O operations per second of each cell of the last stored "
               "round."),
        Family("ssdlab_throughput_bytes_per_second", "Bytes per second (read + write) of "
               "each cell of the last stored round."),
        Family("ssdlab_latency_mean_seconds", "Mean completion latency of each cell of the "
               "last stored round."),
        Family("ssdlab_latency_seconds", "Completion latency percentiles of each cell of the "
               "last stored round (quantile 0.5 = median, 0.99 = 99th percentile)."),
        Family("ssdlab_tracking_value", "The steady-state tracking variables of the last "
               "stored round (units as the variable's name says: IOPS, MB/s, us)."),
        Family("ssdlab_steady_state_excursion_ratio", "Excursion over the steady-state window "
               "ending at the last stored round, as a fraction of the window average "
               "(kind data: max - min; slope: least-squares slope x (window - 1); line: the "
               "fitted line's largest distance from the average)."),
        Family("ssdlab_steady_state_limit_ratio", "The steady-state rule's limit for each "
               "excursion kind, as a fraction of the window average (SNIA: data 0.2, "
               "slope 0.1)."),
    ]
    return {f.name: f for f in out}


def _cell_labels(base: Labels, cell: Mapping[str, Any], index: int) -> Labels:
    labels = dict(base)
    for key in CELL_LABELS:
        if key in cell and cell[key] is not None:
            labels[key] = _label(cell[key])
    labels.setdefault("cell", str(index + 1))
    return labels


def _add_round(fams: dict[str, Family], base: Labels, test: TestData, rnd: RoundData) -> None:
    fams["ssdlab_round_number"].add(base, float(rnd.round_no))
    fams["ssdlab_round_end_time_seconds"].add(base, rnd.ended_at)
    for index, cell in enumerate(rnd.cells):
        if not isinstance(cell, Mapping):
            continue
        labels = _cell_labels(base, cell, index)
        fams["ssdlab_iops"].add(labels, _number(cell.get("iops")))
        fams["ssdlab_throughput_bytes_per_second"].add(labels,
                                                       _number(cell.get("bw_bytes_per_s")))
        mean = _number(cell.get("lat_mean_us"))
        fams["ssdlab_latency_mean_seconds"].add(labels, None if mean is None else mean / 1e6)
        for key, quantile in QUANTILES.items():
            value = _number(cell.get(key))
            fams["ssdlab_latency_seconds"].add({**labels, "quantile": quantile},
                                               None if value is None else value / 1e6)
    for name, value in rnd.tracking.items():
        fams["ssdlab_tracking_value"].add({**base, "variable": name}, _number(value))
    for name, kinds in excursions(test, rnd.round_no).items():
        for kind, ratio in kinds.items():
            fams["ssdlab_steady_state_excursion_ratio"].add(
                {**base, "variable": name, "kind": kind}, ratio)
    rule = _rule(test)
    if rule is not None:
        for kind, limit in _limits(rule).items():
            fams["ssdlab_steady_state_limit_ratio"].add({**base, "kind": kind}, limit)


def exposition(runs: Sequence[RunData]) -> str:
    """The exposition text of ``runs`` (the running ones are described)."""
    fams = families()
    running = [r for r in runs if r.status == "running"]
    fams["ssdlab_runs_running"].add({}, float(len(running)))
    for run in running:
        fams["ssdlab_run_info"].add({
            "run": run.run_id, "suite": run.suite, "profile": run.profile,
            "target": run.target_path, "model": run.target_model or "",
            "host": str(run.host.get("hostname") or "")}, 1.0)
        fams["ssdlab_run_start_time_seconds"].add({"run": run.run_id}, run.created_at)
        found = last_round(run)
        if found is not None:
            test, rnd = found
            _add_round(fams, {"run": run.run_id, "test": test.name}, test, rnd)
    return render(list(fams.values()))


def collect(store: Reader) -> str:
    """The exposition text of the running runs of ``store``."""
    runs = [store.load(r.run_id) for r in store.list_runs() if r.status == "running"]
    return exposition(runs)
