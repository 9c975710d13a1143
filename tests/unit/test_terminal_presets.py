"""`ssdlab show` prints the review presets' result tables, not only a summary line."""

from __future__ import annotations

from typing import Any

from ssdlab.plan.curves import CurvesResult
from ssdlab.report import block_preset_pages, curves_pages, file_presets_pages, replay_pages
from ssdlab.report.text import params_line
from ssdlab.store import records


def _test(name: str, result: dict[str, Any],
          params: dict[str, Any] | None = None) -> records.TestData:
    return records.TestData(name, "complete", params or {}, {}, result)


def _run(test: records.TestData) -> records.RunData:
    """A stored run of one test, as ``show`` gets it."""
    return records.RunData(
        run_id="r", created_at=0.0, finished_at=None, suite=test.name, profile="default",
        quick=False, status="complete", message="", target_path="/t", target_model=None,
        read_only=False, target={}, host={}, plan={}, versions={}, argv=[], tests=[test])


def test_block_preset_rows_show_best_and_mean() -> None:
    rows = [{"group": "SEQ1M Q8T1", "mode": "read", "passes": 3,
             "best": {"mb_per_s": 3512.25, "iops": 3349.4, "lat_mean_us": 2388.1},
             "mean": {"mb_per_s": 3400.0, "iops": 3242.5, "lat_mean_us": 2466.7}}]
    test = _test("cdm", {"rows": rows}, {"preset": "cdm", "preset_version": 1})
    shown = block_preset_pages.show_lines(_run(test), test)
    assert shown[:2] == ["  preset cdm v1", "  verdict: complete"]
    lines = shown[2:]
    assert "best MB/s" in lines[1] and "mean MB/s" in lines[1]
    row = lines[3].split()
    assert row[:3] == ["SEQ1M", "Q8T1", "read"]
    assert row[3:] == ["3,512.2", "3,400.0", "3,349", "2,388.1", "3"]


def test_file_preset_summary_in_mb_per_s() -> None:
    summary = [{"group": "copy 1", "direction": "copy", "count": 3, "io_bytes": 1_030_000_000,
                "mean_seconds": 2.5, "mean_bw_bytes_per_s": 412_000_000.0}]
    test = _test("copy", {"summary": summary})
    lines = file_presets_pages.show_lines(_run(test), test)
    assert lines[-1].split() == ["copy", "1", "copy", "3", "2.500", "412.0"]


def test_curve_points_flag_short_ones() -> None:
    points = [{"kind": "max", "iops": 50_000.0, "lat_mean_us": 600.0, "lat_p99_us": 900.0},
              {"kind": "fraction", "fraction_pct": 10, "target_iops": 5_000.0, "iops": 4_990.0,
               "delivered_pct": 99.8, "lat_mean_us": 100.0, "lat_p99_us": 200.0,
               "host_cpu_pct": 41.6, "host_steal_pct": 0.4, "short": False},
              {"kind": "fraction", "fraction_pct": 100, "target_iops": 50_000.0,
               "iops": 40_000.0, "delivered_pct": 80.0, "lat_mean_us": 2_000.0,
               "lat_p99_us": 5_000.0, "short": True}]
    result = {"workloads": [{"name": "sql", "title": "SQL", "max_iops": 50_000.0,
                             "points": points}]}
    lines = curves_pages.workload_tables(CurvesResult.from_json(result))
    assert lines[0] == "  SQL (max 50,000 IOPS):"
    assert lines[3].split()[:2] == ["max", "rate"]
    assert "host CPU %" in lines[1] and "steal %" in lines[1]
    assert lines[4].split() == ["10", "%", "5,000", "4,990", "99.8", "100.0", "200.0", "42",
                                "0"]
    assert lines[3].split()[-2:] == ["-", "-"]  # a point recorded without host CPU
    assert lines[5].split()[-1] == "SHORT"


def test_a_curve_without_points_says_so() -> None:
    result: dict[str, Any] = {"workloads": [{"name": "sql", "title": "SQL", "max_iops": None,
                                             "points": []}]}
    lines = curves_pages.workload_tables(CurvesResult.from_json(result))
    assert lines == ["  SQL: no point measured"]


def test_replay_and_the_preset_named_in_the_parameters() -> None:
    cell = {"iops": 1234.0, "bw_bytes_per_s": 5_000_000.0, "lat_mean_us": 80.0,
            "lat_p99_us": 150.0, "lat_max_us": 900.0}
    test = _test("replay", {"cell": cell})
    lines = replay_pages.show_lines(_run(test), test)
    assert lines[-1].split() == ["1,234", "5.0", "80.0", "150.0", "900.0"]
    params = {"preset": {"preset": "curves", "preset_version": 1}}
    assert "preset curves v1" in params_line(_test("curves", {}, params))
    assert "preset cdm v2" in params_line(_test("cdm", {}, {"preset": "cdm",
                                                             "preset_version": 2}))
