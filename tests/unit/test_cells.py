"""cell_from_job on real fio 3.33 output, window averages and tracking values."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ssdlab.engine.model import JobResult
from ssdlab.engine.parser import parse_fio_output
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.run.cells import Cell, cell_from_job, tracking_value, window_cells

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"
PCT_KEYS = {"lat_p50_us": 50.0, "lat_p99_us": 99.0, "lat_p99_9_us": 99.9, "lat_p99_99_us": 99.99}
IDENTITY = ("cell", "block_bytes", "read_pct", "pattern", "threads", "iodepth")


def raw_jobs(name: str) -> list[dict[str, Any]]:
    """The fixture's jobs, read with json alone (independently of ssdlab's parser)."""
    jobs: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.json").read_text())["jobs"]
    return jobs


def parsed_job(name: str, jobname: str) -> JobResult:
    return parse_fio_output((FIXTURES / f"{name}.json").read_text()).job(jobname)


def spec(
    name: str, read_pct: int, block: int = 4096, pattern: Pattern = Pattern.RANDOM
) -> CellSpec:
    return CellSpec(name, pattern, block, Mix(read_pct), 2, 4, 0, 2**28, runtime_s=0.5)


def fixture_cell(
    fixture: str, index: int, read_pct: int, block: int = 4096
) -> tuple[Cell, dict[str, Any]]:
    raw = raw_jobs(fixture)[index]
    job = parsed_job(fixture, raw["jobname"])
    return cell_from_job(spec(raw["jobname"], read_pct, block), job), raw


def directions_with_io(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [raw[d] for d in ("read", "write") if raw[d]["total_ios"] > 0]


def check_throughput_and_mean(cell: Cell, raw: dict[str, Any]) -> None:
    read, write = raw["read"], raw["write"]
    assert cell["iops"] == pytest.approx(read["iops"] + write["iops"])
    assert cell["read_iops"] == pytest.approx(read["iops"])
    assert cell["write_iops"] == pytest.approx(write["iops"])
    assert cell["bw_bytes_per_s"] == pytest.approx(read["bw_bytes"] + write["bw_bytes"])
    assert cell["read_bw_bytes_per_s"] == pytest.approx(read["bw_bytes"])
    assert cell["write_bw_bytes_per_s"] == pytest.approx(write["bw_bytes"])
    dirs = directions_with_io(raw)
    ios = sum(d["total_ios"] for d in dirs)
    weighted = sum(d["clat_ns"]["mean"] * d["total_ios"] for d in dirs) / ios / 1000
    assert cell["lat_mean_us"] == pytest.approx(weighted)
    assert cell["lat_max_us"] == pytest.approx(max(d["clat_ns"]["max"] for d in dirs) / 1000)
    for key, direction in (("read_lat_mean_us", read), ("write_lat_mean_us", write)):
        if direction["total_ios"]:
            assert cell[key] == pytest.approx(direction["clat_ns"]["mean"] / 1000)
        else:
            assert cell[key] is None
    assert cell["usr_cpu_pct"] == pytest.approx(raw["usr_cpu"])
    assert cell["sys_cpu_pct"] == pytest.approx(raw["sys_cpu"])
    assert cell["runtime_ms"] == raw["job_runtime"]
    assert cell["error"] == raw["error"]


# --------------------------------------------------------------------------- cell_from_job


def test_identity_keys_come_from_the_spec() -> None:
    cell, _ = fixture_cell("a_randread_4k", 0, 100)
    assert {k: cell[k] for k in IDENTITY} == {
        "cell": "randread-4k",
        "block_bytes": 4096,
        "read_pct": 100,
        "pattern": "random",
        "threads": 2,
        "iodepth": 4,
    }
    json.dumps(cell)  # JSON-ready


def test_single_direction_json_cell() -> None:
    cell, raw = fixture_cell("a_randread_4k", 0, 100)
    check_throughput_and_mean(cell, raw)
    assert cell["write_iops"] == 0
    # no histogram: fio's own percentiles of the one direction
    table = raw["read"]["clat_ns"]["percentile"]
    for key, pct in PCT_KEYS.items():
        assert cell[key] == pytest.approx(table[f"{pct:.6f}"] / 1000)


@pytest.mark.parametrize(
    ("index", "read_pct", "block"), [(0, 0, 4096), (1, 65, 65536), (2, 100, 2**20)]
)
def test_three_group_json_cells(index: int, read_pct: int, block: int) -> None:
    cell, raw = fixture_cell("b_three_groups", index, read_pct, block)
    check_throughput_and_mean(cell, raw)
    # without bins, the larger of the directions' reported percentiles
    tables = [d["clat_ns"]["percentile"] for d in directions_with_io(raw)]
    for key, pct in PCT_KEYS.items():
        fio_value = max(t[f"{pct:.6f}"] for t in tables) / 1000
        value, lat_max = cell[key], cell["lat_max_us"]
        assert isinstance(value, float) and isinstance(lat_max, float)
        assert value == pytest.approx(min(fio_value, lat_max))
        assert value <= lat_max


def _merged_bins(raw: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    merged: dict[int, int] = {}
    for direction in directions_with_io(raw):
        for value, count in direction["clat_ns"]["bins"].items():
            merged[int(value)] = merged.get(int(value), 0) + int(count)
    values = np.array(sorted(merged), dtype=np.int64)
    counts = np.array([merged[v] for v in values], dtype=np.int64)
    return values, counts


def test_mixed_json_plus_cell_percentiles_come_from_the_merged_bins() -> None:
    cell, raw = fixture_cell("c_randrw70_8k_qd1_jsonplus", 0, 70, 8192)
    check_throughput_and_mean(cell, raw)
    assert raw["read"]["total_ios"] > 0 and raw["write"]["total_ios"] > 0
    values, counts = _merged_bins(raw)
    assert counts.sum() == raw["read"]["clat_ns"]["N"] + raw["write"]["clat_ns"]["N"]
    samples = np.repeat(values, counts)
    cumulative = np.cumsum(counts)
    for key, pct in PCT_KEYS.items():
        # fio's convention: the first bucket whose cumulative count reaches pct % of all
        by_cdf = float(np.percentile(samples, pct, method="inverted_cdf"))
        by_cumsum = float(values[np.searchsorted(cumulative, pct / 100 * counts.sum())])
        assert by_cdf == by_cumsum
        assert cell[key] == pytest.approx(by_cdf / 1000)
    # merged percentiles lie between the two directions' own (fio-reported) ones
    for key, pct in PCT_KEYS.items():
        own = [raw[d]["clat_ns"]["percentile"][f"{pct:.6f}"] / 1000 for d in ("read", "write")]
        assert min(own) <= cell[key] <= max(own)


def test_single_direction_json_plus_percentiles_match_fio() -> None:
    # fio's own percentiles are bucket values: recomputing from the bins must agree exactly,
    # including 99.9 % of 2000 I/Os (a hair above the 1998th sample in fio's arithmetic)
    cell, raw = fixture_cell("h_2000_ios_jsonplus", 0, 100)
    check_throughput_and_mean(cell, raw)
    table = raw["read"]["clat_ns"]["percentile"]
    for key, pct in PCT_KEYS.items():
        # a bucket's value can lie above the exact maximum: the percentile cannot
        assert cell[key] == min(table[f"{pct:.6f}"] / 1000, cell["lat_max_us"])
    clamped = [k for k, p in PCT_KEYS.items() if table[f"{p:.6f}"] / 1000 > cell["lat_max_us"]]
    assert clamped  # this fixture's p99.99 bucket lies above its maximum


def test_a_cell_without_io_has_no_latency() -> None:
    cell, raw = fixture_cell("g_job_error", 0, 100)
    assert raw["error"] == 21
    assert cell["error"] == 21
    assert cell["iops"] == 0 and cell["bw_bytes_per_s"] == 0
    for key in ("lat_mean_us", "lat_max_us", "read_lat_mean_us", "write_lat_mean_us", *PCT_KEYS):
        assert key in cell
        assert cell[key] is None


# --------------------------------------------------------------------------- window_cells


def synthetic(name: str, iops: float, lat_max: float, **extra: object) -> Cell:
    cell: Cell = {
        "cell": name,
        "block_bytes": 4096,
        "read_pct": 0,
        "pattern": "random",
        "threads": 4,
        "iodepth": 16,
        "iops": iops,
        "lat_mean_us": 1e6 / iops,
        "lat_max_us": lat_max,
        "error": 0,
    }
    cell.update(extra)
    return cell


def test_window_averages_numbers_and_takes_the_maximum_latency() -> None:
    rounds = [
        [synthetic("a", 100.0, 50.0), synthetic("b", 10.0, 9.0)],
        [synthetic("a", 200.0, 70.0), synthetic("b", 20.0, 8.0)],
        [synthetic("a", 600.0, 60.0), synthetic("b", 30.0, 7.0, error=5)],
    ]
    a, b = window_cells(rounds)
    assert a["cell"] == "a" and b["cell"] == "b"
    assert a["iops"] == pytest.approx(300.0)
    assert a["lat_mean_us"] == pytest.approx((1e4 + 5e3 + 1e6 / 600) / 3)
    assert a["lat_max_us"] == 70.0
    assert b["iops"] == pytest.approx(20.0)
    assert b["lat_max_us"] == 9.0
    assert (a["error"], b["error"]) == (0, 5)
    assert a["rounds"] == b["rounds"] == 3
    assert {k: a[k] for k in IDENTITY} == {k: rounds[0][0][k] for k in IDENTITY}


def test_window_of_a_real_mixed_cell_keeps_every_key() -> None:
    cells = [fixture_cell("b_three_groups", 1, 65, 65536)[0]]
    assert all(v is not None for v in cells[0].values())
    window = window_cells([cells, cells])
    for before, after in zip(cells, window, strict=True):
        assert set(after) == {*before, "rounds"}
        for key, value in before.items():
            if isinstance(value, float):
                assert after[key] == pytest.approx(value)
            else:
                assert after[key] == value


def test_window_follows_the_first_rounds_cells_by_name() -> None:
    rounds = [
        [synthetic("a", 100.0, 1.0), synthetic("b", 10.0, 1.0)],
        [synthetic("b", 30.0, 1.0), synthetic("a", 300.0, 1.0)],
    ]
    window = window_cells(rounds)
    assert [(c["cell"], c["iops"]) for c in window] == [("a", 200.0), ("b", 20.0)]
    assert window_cells([]) == []


def test_window_skips_none_values_of_some_rounds() -> None:
    rounds = [
        [synthetic("a", 100.0, 1.0, lat_p99_us=10.0)],
        [synthetic("a", 200.0, 1.0, lat_p99_us=None)],
        [synthetic("a", 300.0, 1.0, lat_p99_us=30.0)],
    ]
    (cell,) = window_cells(rounds)
    assert cell["lat_p99_us"] == pytest.approx(20.0)


def test_window_keeps_a_metric_that_is_none_in_every_round() -> None:
    rounds = [[synthetic("a", 100.0, 1.0, read_lat_mean_us=None)] for _ in range(3)]
    (cell,) = window_cells(rounds)
    assert cell["read_lat_mean_us"] is None


def test_window_averages_a_metric_missing_only_in_the_first_round() -> None:
    rounds = [
        [synthetic("a", 100.0, 1.0, write_lat_mean_us=None)],
        [synthetic("a", 100.0, 1.0, write_lat_mean_us=40.0)],
        [synthetic("a", 100.0, 1.0, write_lat_mean_us=60.0)],
    ]
    (cell,) = window_cells(rounds)
    assert cell["write_lat_mean_us"] == pytest.approx(50.0)


def test_window_of_a_real_write_only_cell_keeps_its_read_latency_key() -> None:
    cell, raw = fixture_cell("b_three_groups", 0, 0)
    assert raw["read"]["total_ios"] == 0
    (window,) = window_cells([[cell], [cell]])
    assert window["read_lat_mean_us"] is None


# --------------------------------------------------------------------------- tracking_value


def test_tracking_value() -> None:
    cells = [synthetic("a", 1234.5, 1.0), synthetic("b", 10.0, 1.0, lat_p99_us=None)]
    assert tracking_value(cells, "a", "iops") == 1234.5
    assert tracking_value(cells, "b", "lat_max_us") == 1.0
    assert math.isnan(tracking_value(cells, "missing", "iops"))
    assert math.isnan(tracking_value(cells, "b", "lat_p99_us"))
    assert math.isnan(tracking_value(cells, "a", "no_such_metric"))
    assert math.isnan(tracking_value([], "a", "iops"))


def test_tracking_value_of_a_real_cell() -> None:
    cell, raw = fixture_cell("c_randrw70_8k_qd1_jsonplus", 0, 70, 8192)
    assert tracking_value([cell], cell["cell"], "iops") == pytest.approx(  # type: ignore[arg-type]
        raw["read"]["iops"] + raw["write"]["iops"]
    )
