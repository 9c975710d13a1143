"""The figures of a stored run, keyed so that runs can be compared cell by cell.

A :class:`Figure` is one published number (IOPS of 4 KiB 0/100, 128 KiB sequential read
bandwidth, mean latency of 4 KiB 100/0 at QD 1 ...) with the per-round values of its
measurement window, from which run-to-run noise is estimated. Reference runs imported
from published reviews have the number only (no rounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ssdlab.analysis.predict import LABEL as PREDICTED_LABEL
from ssdlab.jsonrecord import Record
from ssdlab.plan.results import CellData, ProgressParams, TestParams
from ssdlab.plan.specs import Mix, block_label
from ssdlab.reference.published import TEST_STATUS
from ssdlab.store.records import RunData, TestData

MIB = 1 << 20


@dataclass(frozen=True)
class Metric:
    key: str  # the cell's key in the store
    label: str
    unit: str
    scale: float  # stored value / scale = shown value
    higher_is_better: bool


IOPS = Metric("iops", "IOPS", "IOPS", 1.0, True)
BW = Metric("bw_bytes_per_s", "bandwidth", "MiB/s", float(MIB), True)
LAT_MEAN = Metric("lat_mean_us", "mean latency", "us", 1.0, False)
LAT_P99 = Metric("lat_p99_us", "p99 latency", "us", 1.0, False)
LAT_P999 = Metric("lat_p99_9_us", "p99.9 latency", "us", 1.0, False)
LAT_P9999 = Metric("lat_p99_99_us", "p99.99 latency", "us", 1.0, False)
LAT_MAX = Metric("lat_max_us", "max latency", "us", 1.0, False)
LATENCY_METRICS = (LAT_MEAN, LAT_P99, LAT_P999, LAT_P9999, LAT_MAX)


def test_kind(name: str) -> str:
    """"iops", "throughput", "latency" or the name itself for other tests."""
    return "throughput" if name.startswith("throughput") else name


def metrics_of(test_name: str) -> tuple[Metric, ...]:
    kind = test_kind(test_name)
    if kind == "iops":
        return (IOPS,)
    if kind == "throughput":
        return (BW,)
    if kind == "latency":
        return (LAT_MEAN, LAT_P99, LAT_P999)
    return ()


@dataclass(frozen=True)
class FigureKey:
    kind: str  # test kind
    block_bytes: int
    read_pct: int
    metric: str

    @property
    def label(self) -> str:
        pattern = "sequential" if self.kind == "throughput" else "random"
        direction = {100: "read", 0: "write"}.get(self.read_pct, Mix(self.read_pct).label)
        return f"{block_label(self.block_bytes)} {pattern} {direction}"


@dataclass(frozen=True)
class Figure:
    key: FigureKey
    metric: Metric
    value: float  # in the metric's display unit
    window: tuple[float, ...]  # per-round values of the measurement window, display unit
    steady: bool | None  # None: unknown (published)
    #: --predict stopped the test at a predicted steady state (steady stays False)
    predicted: bool = False

    @property
    def state(self) -> str:
        """Its state in words, as comparisons and claims show it."""
        if self.steady is None:
            return TEST_STATUS
        if self.steady:
            return "steady"
        return f"NOT steady; {PREDICTED_LABEL}" if self.predicted else "NOT steady"

    @property
    def noise(self) -> float | None:
        """Sample standard deviation over the window; None with fewer than 2 rounds."""
        if len(self.window) < 2:
            return None
        mean = sum(self.window) / len(self.window)
        var = sum((v - mean) ** 2 for v in self.window) / (len(self.window) - 1)
        return math.sqrt(var)


@dataclass(frozen=True)
class _Window(Record):
    """What the figures read of a PTS test's result (measured or published): its cells and
    its measurement window (published figures have none)."""

    cells: list[CellData] = field(default_factory=list)
    window_rounds: list[int] | None = None


def test_title(test: TestData) -> str:
    """A test's title as reports show it: its parameters' title, else its name."""
    return test.params_as(TestParams).title or test.name


def progress_params(test: TestData) -> ProgressParams:
    """A test's parameters as the readers of its progress see them."""
    return test.params_as(ProgressParams)


def result_cells(test: TestData) -> list[CellData]:
    cells = _Window.from_json(test.result).cells
    return [c for c in cells if "block_bytes" in c and "read_pct" in c]


def window_rounds(test: TestData) -> tuple[int, int] | None:
    window = _Window.from_json(test.result).window_rounds
    if window is not None and len(window) == 2:
        return window[0], window[1]
    return None


def round_matrix(test: TestData, metric_key: str) -> dict[str, dict[int, float]]:
    """Cell name -> round number -> the cell's metric in that round (completed rounds)."""
    out: dict[str, dict[int, float]] = {}
    for rnd in test.rounds:
        if rnd.status != "ok":
            continue
        for cell in rnd.cells:
            value = cell.get(metric_key)
            if isinstance(value, int | float) and math.isfinite(value):
                out.setdefault(str(cell.get("cell")), {})[rnd.round_no] = float(value)
    return out


def _steady(test: TestData) -> bool | None:
    if test.status == TEST_STATUS:
        return None
    return test.status == "steady"


def figures(run: RunData) -> dict[FigureKey, Figure]:
    """Every comparable figure of the run."""
    out: dict[FigureKey, Figure] = {}
    for test in run.tests:
        window = window_rounds(test)
        for metric in metrics_of(test.name):
            matrix = round_matrix(test, metric.key)
            for cell in result_cells(test):
                value = cell.get(metric.key)
                if not isinstance(value, int | float) or not math.isfinite(value):
                    continue
                key = FigureKey(
                    test_kind(test.name), int(cell["block_bytes"]), int(cell["read_pct"]),
                    metric.key,
                )
                rounds = matrix.get(str(cell.get("cell")), {})
                values: tuple[float, ...] = ()
                if window is not None:
                    values = tuple(
                        rounds[r] / metric.scale for r in range(window[0], window[1] + 1)
                        if r in rounds
                    )
                out[key] = Figure(key, metric, float(value) / metric.scale, values,
                                  _steady(test), predicted=test.status == "predicted")
    return out
