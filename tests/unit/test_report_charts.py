"""Chart primitives: scales and ticks, and the SVG they produce (well-formed, hooks, units)."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssdlab.report import charts as ch
from ssdlab.report.bars3d import bars_3d
from ssdlab.report.scales import Scale, fmt_axis, fmt_value, value_scale, wants_log

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_log_is_chosen_only_when_data_spans_decades() -> None:
    assert wants_log([10, 100_000])
    assert not wants_log([10_000, 40_000])
    assert not wants_log([0, 100_000])  # zero cannot go on a log axis
    assert not wants_log([])


def test_linear_ticks_are_nice_and_cover_the_data() -> None:
    scale = value_scale([3.0, 47.0], 300.0, 0.0)
    assert scale.lo == 0 and scale.hi >= 47
    ticks = scale.ticks()
    assert ticks[0] == 0 and ticks[-1] == scale.hi
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1 and next(iter(steps)) in (5, 10, 20)


def test_log_ticks_are_decades_and_map_monotonically() -> None:
    scale = value_scale([20.0, 750_000.0], 300.0, 0.0)
    assert scale.log and scale.lo == 10 and scale.hi == 1_000_000
    assert scale.ticks() == [10, 100, 1000, 10_000, 100_000, 1_000_000]
    assert scale(10) == 300 and scale(1_000_000) == 0
    assert scale(1000) == pytest.approx(180)  # 2 of 5 decades up from 300


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.001, 1e9), min_size=1, max_size=30))
def test_every_value_falls_inside_its_scale(values: list[float]) -> None:
    scale = value_scale(values, 100.0, 0.0)
    for v in values:
        assert -1e-6 <= scale(v) <= 100.0 + 1e-6
    assert all(scale.lo * (1 - 1e-9) <= t <= scale.hi * (1 + 1e-9) for t in scale.ticks())


def test_number_formats() -> None:
    assert fmt_axis(1500) == "1.5K" and fmt_axis(2_000_000) == "2M" and fmt_axis(0.5) == "0.5"
    assert fmt_value(49687.2) == "49,687" and fmt_value(12.34) == "12.3"
    assert fmt_value(None) == "-" and fmt_value(math.nan) == "-"


def _series(n: int) -> list[ch.Series]:
    return [
        ch.Series(f"s{i} <&>", (1.0, 2.0, 3.0), (10.0 * (i + 1), None, 30.0 * (i + 1)))
        for i in range(n)
    ]


def test_line_chart_is_wellformed_svg_with_hooks_and_units() -> None:
    svg = ch.line_chart("c1", "IOPS per round", _series(3), x_label="round",
                        y_label="IOPS", y_unit="IOPS")
    root = parse(svg)
    assert root.tag == f"{SVG}svg" and root.get("data-chart") == "line"
    groups = root.findall(f".//{SVG}g[@class='series']")
    assert [g.get("data-series") for g in groups] == ["0", "1", "2"]
    points = [e for e in root.iter() if e.get("class") == "pt"]
    assert len(points) == 3 * 2  # None is a gap, not a point
    assert all(p.get("data-tip", "").endswith("IOPS") for p in points)
    assert "s0 <&>: 1: 10.0 IOPS" in [p.get("data-tip") for p in points]
    legend = root.findall(f".//{SVG}g[@class='legend-item']")
    assert len(legend) == 3
    texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "IOPS" in texts and "round" in texts


def test_log_axis_is_labelled_as_such() -> None:
    series = [ch.Series("a", (0.0, 1.0), (20.0, 500_000.0))]
    svg = ch.line_chart("c2", "t", series, x_label="block size", y_label="IOPS",
                        x_categories=["4 KiB", "1024 KiB"])
    assert "IOPS (log)" in svg and "4 KiB" in svg


def test_more_series_than_colours_differ_by_dash() -> None:
    full = [ch.Series(f"s{i}", (1.0, 2.0), (1.0 + i, 2.0 + i)) for i in range(10)]
    svg = ch.line_chart("c3", "t", full, x_label="x", y_label="y")
    root = parse(svg)
    lines = [e for e in root.iter(f"{SVG}polyline")]
    assert lines[0].get("stroke") == lines[8].get("stroke")
    assert lines[0].get("stroke-dasharray") != lines[8].get("stroke-dasharray")


def test_bar_chart_and_3d_bars() -> None:
    bars = ch.bar_chart("b", "t", ["read", "write"],
                        [ch.Series("MiB/s", (0.0, 1.0), (1000.0, 128.0))],
                        x_label="direction", y_label="MiB/s", y_unit="MiB/s")
    rects = [e for e in parse(bars).iter(f"{SVG}rect") if e.get("class") == "pt"]
    assert len(rects) == 2
    values: list[list[float | None]] = [[100.0, None, 3.0], [40_000.0, 2_000.0, 10.0]]
    svg3d = bars_3d("d", "IOPS", ["4 KiB", "1024 KiB"], ["100/0", "65/35", "0/100"],
                    values, row_label="block size", col_label="mix", z_label="IOPS")
    root = parse(svg3d)
    bars3d = [e for e in root.iter(f"{SVG}g") if e.get("class") == "pt bar3d"]
    assert len(bars3d) == 5
    assert all(len(b.findall(f"{SVG}polygon")) == 3 for b in bars3d)
    assert "IOPS (log)" in svg3d


def test_scale_of_a_single_value_is_not_degenerate() -> None:
    scale = value_scale([5.0, 5.0], 100.0, 0.0, include_zero=False)
    assert scale.hi > scale.lo
    assert Scale(1, 1, 0, 10)(1) == 5


@pytest.mark.parametrize("frame", [ch.Frame(), ch.Frame(width=470, right=104)])
def test_legend_names_fit_their_column_and_keep_the_full_name_as_tooltip(
    frame: ch.Frame,
) -> None:
    name = "Toshiba CM5-R (published, StorageReview 2021)"
    svg = ch.line_chart("c4", "t", [ch.Series(name, (1.0, 2.0), (1.0, 2.0))],
                        x_label="x", y_label="y", frame=frame)
    item = parse(svg).find(f".//{SVG}g[@class='legend-item']")
    assert item is not None
    shown = item.find(f"{SVG}text")
    assert shown is not None and shown.text is not None and shown.text.endswith("\u2026")
    x = float(shown.get("x", "0"))
    # DejaVu Sans at 10 px averages under 6 px a character
    assert x + 6 * len(shown.text) <= frame.width
    tip = item.find(f"{SVG}title")
    assert tip is not None and tip.text is not None and tip.text.startswith(name)
