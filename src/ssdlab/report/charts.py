"""Charts as inline SVG: line charts and grouped bars (the 3D bar chart is
:mod:`ssdlab.report.bars3d`).

Every chart is a self-contained ``<svg>`` string: vector graphics that print as vector
in the PDF, with text as text. For the HTML report the elements carry the hooks the
report's script uses: each data mark has ``class="pt"`` and a ``data-tip`` (the hover
value; no ``<title>`` per mark, which would double what the PDF printer lays out); each
series is a ``<g class="series" data-series="k">`` and each legend entry a
``<g class="legend-item" data-series="k">`` that toggles it. Colours are the Okabe-Ito
colour-blind-safe palette; series past the palette also differ by dash and marker.
Axes carry units in their labels; a value axis switches to log scale when the data
spans decades (:func:`ssdlab.report.scales.wants_log`) unless told otherwise.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ssdlab.report.scales import Scale, fmt_axis, fmt_value, value_scale

#: Okabe & Ito (2008), ordered for contrast on white; yellow last (drawn with an outline).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#000000", "#F0E442")
DASHES = ("", "6 3", "2 3", "9 3 2 3")
FONT = "font-family:system-ui,'DejaVu Sans',Arial,sans-serif"


#: advance widths of DejaVu Sans in thousandths of an em, of " " to "~": the report's font
#: where Debian's Chromium lays it out (system-ui is DejaVu Sans there), and wider than
#: the sans-serif fonts of other systems; any other character counts as one em
_ADVANCE = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636,
    636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684,
    686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695,
    635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550,
    635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392,
    634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)
#: DejaVu Sans's ascent and descent in em: the height of a line of text's box
ASCENT, DESCENT = 0.928, 0.236
LABEL_GAP = 3.0  # px at least between two names under an axis
#: a name turned under the axis longer than this is cut with an ellipsis (its marks' tips
#: and the tables name it whole)
MAX_TURNED_PX = 170.0
TURNED_Y = 10.0  # a turned name ends this far below the axis
SIN45 = math.sqrt(0.5)


def text_width(text: str, size: float) -> float:
    """``text``'s width in px at font size ``size`` (:data:`_ADVANCE`)."""
    return size * sum(_ADVANCE[ord(c) - 32] if 32 <= ord(c) < 127 else 1000
                      for c in text) / 1000


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def esc(text: object) -> str:
    """``text`` escaped for SVG text and attribute values."""
    return html.escape(str(text), quote=True)


def px(value: float) -> str:
    """A coordinate in px as the SVG writes it (one decimal)."""
    return f"{value:.1f}"


@dataclass(frozen=True)
class Series:
    """One named series. ``y`` may hold None for a gap; ``tips`` override hover texts."""

    name: str
    x: tuple[float, ...]
    y: tuple[float | None, ...]
    style: str = "line+markers"  # "line+markers" | "line" | "markers" | "dashed"
    colour_index: int | None = None
    tips: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Band:
    """A shaded horizontal band from ``lo`` to ``hi`` (e.g. +-20 % of an average)."""

    lo: float
    hi: float
    label: str
    opacity: float = 0.12


@dataclass(frozen=True)
class Rule:
    """A horizontal reference line at ``y``."""

    y: float
    label: str
    dash: str = "4 3"


@dataclass(frozen=True)
class Frame:
    width: int = 640
    height: int = 300
    left: int = 66
    right: int = 150  # the legend column
    top: int = 30
    bottom: int = 46

    @property
    def x0(self) -> float:
        return float(self.left)

    @property
    def x1(self) -> float:
        return float(self.width - self.right)

    @property
    def y0(self) -> float:
        return float(self.height - self.bottom)

    @property
    def y1(self) -> float:
        return float(self.top)


def open_svg(kind: str, title: str, frame: Frame, chart_id: str) -> list[str]:
    """A chart's opening ``<svg>`` (its kind, id and size) and its title."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{kind}" '
        f'id="{esc(chart_id)}" role="img" aria-label="{esc(title)}" '
        f'viewBox="0 0 {frame.width} {frame.height}" width="{frame.width}" '
        f'height="{frame.height}" style="{FONT}">',
        f'<text x="{frame.width / 2:.0f}" y="17" text-anchor="middle" font-size="13" '
        f'font-weight="600">{esc(title)}</text>',
    ]


def _y_axis(scale: Scale, frame: Frame, label: str) -> list[str]:
    out = []
    for tick in scale.ticks():
        y = scale(tick)
        out.append(
            f'<line x1="{px(frame.x0)}" x2="{px(frame.x1)}" y1="{px(y)}" y2="{px(y)}" '
            f'stroke="#ddd" stroke-width="0.6"/>'
            f'<text x="{px(frame.x0 - 5)}" y="{px(y + 3.5)}" text-anchor="end" '
            f'font-size="10">{esc(fmt_axis(tick))}</text>'
        )
    mid = (frame.y0 + frame.y1) / 2
    scale_note = " (log)" if scale.log else ""
    out.append(
        f'<text transform="translate(13 {px(mid)}) rotate(-90)" text-anchor="middle" '
        f'font-size="11">{esc(label + scale_note)}</text>'
    )
    return out


def _x_axis_numeric(scale: Scale, frame: Frame, label: str, integer: bool) -> list[str]:
    out = []
    ticks = scale.ticks(8)
    if integer:
        ticks = [t for t in ticks if abs(t - round(t)) < 1e-9]
    for tick in _apart(ticks, scale):
        x = scale(tick)
        out.append(
            f'<line x1="{px(x)}" x2="{px(x)}" y1="{px(frame.y0)}" y2="{px(frame.y0 + 4)}" '
            f'stroke="#555"/><text class="xtick" x="{px(x)}" y="{px(frame.y0 + 15)}" '
            f'text-anchor="middle" font-size="10">{esc(fmt_axis(tick))}</text>'
        )
    return [*out, _x_label(frame, label)]


def _apart(ticks: Sequence[float], scale: Scale) -> list[float]:
    """Every ``n``-th tick, the fewest dropped so that no two labels touch."""
    for every in range(1, len(ticks) + 1):
        kept = list(ticks[::every])
        widths = [text_width(fmt_axis(t), 10) for t in kept]
        if all(abs(scale(b) - scale(a)) >= (wa + wb) / 2 + LABEL_GAP for a, b, wa, wb
               in zip(kept, kept[1:], widths, widths[1:], strict=False)):
            return kept
    return list(ticks[:1])


def _x_label(frame: Frame, label: str) -> str:
    return (
        f'<text class="xtitle" x="{px((frame.x0 + frame.x1) / 2)}" y="{frame.height - 6}" '
        f'text-anchor="middle" font-size="11">{esc(label)}</text>'
    )


@dataclass(frozen=True)
class CategoryAxis:
    """How category names sit under the x axis so that none touches another: side by
    side, each on one line; wrapped between words onto up to three lines; or turned 45
    degrees, only every ``every``-th shown where even turned ones would touch."""

    lines: tuple[tuple[str, ...], ...]  # each name's lines (none where it is not shown)
    size: float  # their font size
    turned: bool
    every: int
    depth: float  # px below the axis that the names reach
    left: float  # px left of the chart's left edge that a turned name would reach


def _wrapped(name: str, width: float, size: float) -> tuple[str, ...] | None:
    """``name`` broken between words into lines of at most ``width`` px (None: a word is
    wider)."""
    lines: list[str] = []
    for word in name.split(" "):
        if lines and text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        elif text_width(word, size) <= width:
            lines.append(word)
        else:
            return None
    return tuple(lines)


def _cut(name: str, size: float) -> str:
    """``name``, or as much of it as fits in :data:`MAX_TURNED_PX` with an ellipsis."""
    if text_width(name, size) <= MAX_TURNED_PX:
        return name
    while len(name) > 1 and text_width(name + "\u2026", size) > MAX_TURNED_PX:
        name = name[:-1]
    return name.rstrip() + "\u2026"


def category_axis(categories: Sequence[str], frame: Frame) -> CategoryAxis:
    """The names' layout under ``frame``'s plot (the first that fits of: one line, wrapped,
    turned)."""
    count = max(len(categories), 1)
    room = (frame.x1 - frame.x0) / count - LABEL_GAP
    if all(text_width(name, 10) <= room for name in categories):
        return CategoryAxis(tuple((name,) for name in categories), 10, False, 1,
                            14 + DESCENT * 10, 0.0)
    wrapped = [_wrapped(name, room, 9) for name in categories]
    if all(w is not None and len(w) <= 3 for w in wrapped):
        lines = tuple(w or () for w in wrapped)
        deepest = max(len(w) for w in lines)
        return CategoryAxis(lines, 9, False, 1, 14 + 11 * (deepest - 1) + DESCENT * 9, 0.0)
    size = 9.0
    # turned names are parallel strips, a step apart along the axis: sin 45 of it across
    pitch = (ASCENT + DESCENT) * size + LABEL_GAP
    every = max(1, math.ceil(pitch / ((room + LABEL_GAP) * SIN45)))
    shown = [_cut(name, size) if i % every == 0 else "" for i, name in enumerate(categories)]
    reach = [SIN45 * (text_width(name, size) + DESCENT * size) for name in shown if name]
    left = [SIN45 * (text_width(name, size) + ASCENT * size) - _category_x(i, count, frame)
            for i, name in enumerate(shown) if name]
    return CategoryAxis(tuple((name,) if name else () for name in shown), size, True, every,
                        TURNED_Y + max(reach, default=0.0), max(0.0, *left))


def with_room(axis: CategoryAxis, frame: Frame) -> Frame:
    """``frame`` grown below (and left, for turned names) so that the names and the axis
    title below them fit; the plot keeps its size."""
    # the title's baseline is 6 px above the bottom; its box clears the names by 3 px
    bottom = math.ceil(axis.depth + LABEL_GAP + ASCENT * 11 + 6)
    down = max(0, bottom - frame.bottom)
    side = math.ceil(axis.left + LABEL_GAP) if axis.left > 0 else 0
    return dataclasses.replace(frame, width=frame.width + side, left=frame.left + side,
                               height=frame.height + down, bottom=frame.bottom + down)


def _x_axis_categories(categories: Sequence[str], frame: Frame, label: str,
                       axis: CategoryAxis) -> list[str]:
    """Category names under the axis, laid out as ``axis`` says."""
    out = []
    for i, lines in enumerate(axis.lines):
        if not lines:
            continue
        x = _category_x(i, len(categories), frame)
        if axis.turned:
            y = frame.y0 + TURNED_Y
            out.append(
                f'<text class="xcat" x="{px(x)}" y="{px(y)}" text-anchor="end" '
                f'font-size="{axis.size:g}" transform="rotate(-45 {px(x)} {px(y)})">'
                f"{esc(lines[0])}</text>"
            )
            continue
        spans = "".join(
            f'<tspan x="{px(x)}" dy="{0 if n == 0 else 11}">{esc(line)}</tspan>'
            for n, line in enumerate(lines)
        )
        out.append(
            f'<text class="xcat" x="{px(x)}" y="{px(frame.y0 + 14)}" text-anchor="middle" '
            f'font-size="{axis.size:g}">{spans}</text>'
        )
    return [*out, _x_label(frame, label)]


def _category_x(index: int, count: int, frame: Frame) -> float:
    step = (frame.x1 - frame.x0) / max(count, 1)
    return frame.x0 + step * (index + 0.5)


def _frame_box(frame: Frame) -> str:
    return (
        f'<rect x="{px(frame.x0)}" y="{px(frame.y1)}" width="{px(frame.x1 - frame.x0)}" '
        f'height="{px(frame.y0 - frame.y1)}" fill="none" stroke="#888" stroke-width="0.8"/>'
    )


def _marker(kind: int, x: float, y: float, fill: str, tip: str) -> str:
    attrs = f'class="pt" data-tip="{esc(tip)}" fill="{fill}" stroke="#fff" stroke-width="0.8"'
    shape = kind % 4
    if shape == 0:
        return f'<circle cx="{px(x)}" cy="{px(y)}" r="3.4" {attrs}/>'
    if shape == 1:
        return f'<rect x="{px(x - 3)}" y="{px(y - 3)}" width="6" height="6" {attrs}/>'
    if shape == 2:
        pts = f"{px(x)},{px(y - 4)} {px(x + 3.8)},{px(y + 3)} {px(x - 3.8)},{px(y + 3)}"
        return f'<polygon points="{pts}" {attrs}/>'
    pts = f"{px(x)},{px(y - 4)} {px(x + 4)},{px(y)} {px(x)},{px(y + 4)} {px(x - 4)},{px(y)}"
    return f'<polygon points="{pts}" {attrs}/>'


def _legend(names: Sequence[tuple[int, str, str]], frame: Frame) -> list[str]:
    """Legend entries (series index, name, style) in the right-hand column."""
    out = []
    x = frame.x1 + 12
    # what fits right of the swatch in the legend column (10 px DejaVu Sans: <= 6 px a
    # character); the full name is in the entry's tooltip
    fits = max(6, int((frame.right - 12 - 23 - 2) / 6))
    rows = max(1, int((frame.height - 10 - frame.y1 - 8) // 16) + 1)  # rows above the bottom
    for row, (k, name, style) in enumerate(names):
        y = frame.y1 + 8 + row * 16
        if row == rows - 1 and len(names) > rows:
            out.append(f'<text x="{px(x)}" y="{px(y)}" font-size="10">... {len(names) - row} '
                       "more</text>")
            break
        dash = DASHES[2] if style == "dashed" else DASHES[(k // len(PALETTE)) % len(DASHES)]
        shown = name if len(name) <= fits else name[: fits - 1] + "\u2026"
        out.append(
            f'<g class="legend-item" data-series="{k}" tabindex="0" role="button" '
            f'style="cursor:pointer"><title>{esc(name)}: click to show or hide</title>'
            f'<line x1="{px(x)}" x2="{px(x + 18)}" y1="{px(y - 3)}" y2="{px(y - 3)}" '
            f'stroke="{colour(k)}" stroke-width="2.2" stroke-dasharray="{dash}"/>'
            f'<text x="{px(x + 23)}" y="{px(y)}" font-size="10">{esc(shown)}</text></g>'
        )
    return out


def line_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    y_unit: str = "",
    x_categories: Sequence[str] | None = None,
    y_log: bool | None = None,
    y_include_zero: bool = True,
    bands: Sequence[Band] = (),
    rules: Sequence[Rule] = (),
    x_rules: Sequence[Rule] = (),
    x_from_zero: bool = False,
    frame: Frame | None = None,
) -> str:
    """Lines over a numeric x axis (rounds) or over ``x_categories`` (x = index).

    ``rules`` are horizontal reference lines at a y value; ``x_rules`` vertical ones at an
    x value (``Rule.y`` holds the x), labelled at the top.
    """
    frame = frame or Frame()
    axis = category_axis(x_categories, frame) if x_categories is not None else None
    if axis is not None:
        frame = with_room(axis, frame)
    ys = [y for s in series for y in s.y if y is not None]
    extra = [v for b in bands for v in (b.lo, b.hi)] + [r.y for r in rules]
    yscale = value_scale([*ys, *extra], frame.y0, frame.y1, log=y_log,
                         include_zero=y_include_zero)
    out = open_svg("line", title, frame, chart_id)
    out += _y_axis(yscale, frame, y_label)
    xpos: Callable[[float], float]
    if x_categories is not None and axis is not None:
        categories, plot = x_categories, frame

        def xpos(v: float) -> float:
            return _category_x(int(v), len(categories), plot)

        out += _x_axis_categories(x_categories, frame, x_label, axis)
    else:
        xs = [x for s in series for x in s.x] + [r.y for r in x_rules] or [0.0, 1.0]
        lo, hi = min(xs), max(xs)
        if x_from_zero:
            lo = min(lo, 0.0)
        pad = 0.5 if hi - lo < 20 and not x_from_zero else 0.0
        xscale = Scale(lo - pad, hi + pad, frame.x0, frame.x1)
        xpos = xscale.__call__
        integer = all(abs(x - round(x)) < 1e-9 for x in xs)
        out += _x_axis_numeric(xscale, frame, x_label, integer)
    for band in bands:
        top, bottom = yscale(band.hi), yscale(band.lo)
        out.append(
            f'<rect class="band" x="{px(frame.x0)}" y="{px(top)}" width="{px(frame.x1 - frame.x0)}"'
            f' height="{px(max(bottom - top, 0.5))}" fill="#0072B2" opacity="{band.opacity}">'
            f"<title>{esc(band.label)}</title></rect>"
        )
    for rule in rules:
        y = yscale(rule.y)
        out.append(
            f'<line x1="{px(frame.x0)}" x2="{px(frame.x1)}" y1="{px(y)}" y2="{px(y)}" '
            f'stroke="#333" stroke-width="1" stroke-dasharray="{rule.dash}"/>'
            f'<text x="{px(frame.x1 - 3)}" y="{px(y - 3)}" text-anchor="end" font-size="9" '
            f'fill="#333">{esc(rule.label)}</text>'
        )
    placed: list[tuple[float, float, float]] = []  # x_rules' labels: left, right, baseline
    for rule in x_rules:
        x = xpos(rule.y)
        left, right = x + 3, x + 3 + text_width(rule.label, 9)
        y = frame.y1 + 10
        while any(a < right + LABEL_GAP and left < b + LABEL_GAP and abs(yy - y) < 11
                  for a, b, yy in placed):
            y += 11  # below a label it would touch
        placed.append((left, right, y))
        out.append(
            f'<line x1="{px(x)}" x2="{px(x)}" y1="{px(frame.y1)}" y2="{px(frame.y0)}" '
            f'stroke="#333" stroke-width="1" stroke-dasharray="{rule.dash}"/>'
            f'<text x="{px(left)}" y="{px(y)}" font-size="9" '
            f'fill="#333">{esc(rule.label)}</text>'
        )
    out.append(_frame_box(frame))
    legend = []
    for idx, s in enumerate(series):
        k = s.colour_index if s.colour_index is not None else idx
        legend.append((k, s.name, s.style))
        out.append(_series_marks(s, k, xpos, yscale, y_unit, x_categories))
    out += _legend(legend, frame)
    out.append("</svg>")
    return "".join(out)


def _series_marks(
    s: Series,
    k: int,
    xpos: Callable[[float], float],
    yscale: Scale,
    y_unit: str,
    x_categories: Sequence[str] | None,
) -> str:
    col = colour(k)
    dash = DASHES[2] if s.style == "dashed" else DASHES[(k // len(PALETTE)) % len(DASHES)]
    parts = [f'<g class="series" data-series="{k}">']
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(s.x, s.y, strict=True):
        if y is None or not math.isfinite(y):
            segments.append([])
            continue
        segments[-1].append((xpos(x), yscale(y)))
    if s.style != "markers":
        for seg in segments:
            if len(seg) > 1:
                pts = " ".join(f"{px(a)},{px(b)}" for a, b in seg)
                parts.append(
                    f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="1.8" '
                    f'stroke-dasharray="{dash}"/>'
                )
    if s.style in ("line+markers", "markers"):
        for i, (x, y) in enumerate(zip(s.x, s.y, strict=True)):
            if y is None or not math.isfinite(y):
                continue
            if s.tips is not None:
                tip = s.tips[i]
            else:
                xs = x_categories[int(x)] if x_categories is not None else (
                    str(int(x)) if x == int(x) else fmt_value(x))
                tip = f"{s.name}: {xs}: {fmt_value(y)} {y_unit}".rstrip()
            parts.append(_marker(k // len(PALETTE) + k, xpos(x), yscale(y), col, tip))
    parts.append("</g>")
    return "".join(parts)


def bar_chart(
    chart_id: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    y_unit: str = "",
    y_log: bool | None = None,
    frame: Frame | None = None,
) -> str:
    """Grouped vertical bars: one group per category, one bar per series (y[i])."""
    axis = category_axis(categories, frame or Frame())
    frame = with_room(axis, frame or Frame())
    ys = [y for s in series for y in s.y if y is not None and math.isfinite(y)]
    yscale = value_scale(ys, frame.y0, frame.y1, log=y_log)
    out = open_svg("bar", title, frame, chart_id)
    out += _y_axis(yscale, frame, y_label)
    out += _x_axis_categories(categories, frame, x_label, axis)
    out.append(_frame_box(frame))
    group = (frame.x1 - frame.x0) / max(len(categories), 1)
    width = group * 0.8 / max(len(series), 1)
    base = frame.y0
    legend = []
    for idx, s in enumerate(series):
        k = s.colour_index if s.colour_index is not None else idx
        legend.append((k, s.name, s.style))
        out.append(f'<g class="series" data-series="{k}">')
        for i, y in enumerate(s.y):
            if y is None or not math.isfinite(y) or (yscale.log and y <= 0):
                continue
            x = frame.x0 + group * i + group * 0.1 + width * idx
            top = yscale(y)
            tip = s.tips[i] if s.tips else f"{s.name}: {categories[i]}: {fmt_value(y)} {y_unit}"
            out.append(
                f'<rect class="pt" x="{px(x)}" y="{px(top)}" width="{px(max(width - 1, 1))}" '
                f'height="{px(max(base - top, 0.5))}" fill="{colour(k)}" '
                f'data-tip="{esc(tip.rstrip())}"></rect>'
            )
        out.append("</g>")
    out += _legend(legend, frame)
    out.append("</svg>")
    return "".join(out)
