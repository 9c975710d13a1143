"""The 3D bar chart as inline SVG (an oblique projection, as the SNIA IOPS page draws
it), with the hooks and palette of :mod:`ssdlab.report.charts`: each bar is a
``class="pt"`` mark with a ``data-tip``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ssdlab.report.charts import PALETTE, Frame, esc, open_svg, px
from ssdlab.report.scales import fmt_axis, fmt_value, value_scale


def _shade(hex_colour: str, factor: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(min(255, int(c * factor)) for c in (r, g, b)))


def bars_3d(
    chart_id: str,
    title: str,
    rows: Sequence[str],
    cols: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    row_label: str,
    col_label: str,
    z_label: str,
    z_unit: str = "",
    z_log: bool | None = None,
    width: int = 640,
    height: int = 420,
) -> str:
    """A 3D bar chart (oblique projection) of ``values[row][col]``, as the SNIA IOPS page.

    Rows recede into the page (the first row at the back, so put the tallest row first),
    columns run left to right; bar height is the value (log scale when the data spans
    decades). The value axis is on the left wall, its grid lines run along the left and
    back walls; bars are drawn back to front so nearer bars cover farther ones. Each
    column has its palette colour (black skipped: it hides the shading).
    """
    flat = [v for row in values for v in row if v is not None and math.isfinite(v) and v > 0]
    n_rows, n_cols = len(rows), len(cols)
    depth_dx, depth_dy = 26.0, -17.0  # one row further back moves up and right
    cell = 46.0
    x_origin = 78.0
    y_origin = height - 46.0  # the front-left floor corner
    top_room = 36.0 + n_rows * abs(depth_dy)
    z_scale = value_scale(flat, 0.0, y_origin - top_room, log=z_log)
    colours = [c for c in PALETTE if c != "#000000"]

    def floor_pt(r: float, c: float) -> tuple[float, float]:
        back = n_rows - r  # row 0 is at the back, the front edge is at r = n_rows
        return x_origin + c * cell + back * depth_dx, y_origin + back * depth_dy

    def lift(v: float) -> float:
        return z_scale(max(v, z_scale.lo)) if z_scale.log else z_scale(v)

    out = open_svg("bar3d", title, Frame(width=width, height=height), chart_id)
    fx0, fy0 = floor_pt(n_rows, 0)  # front-left
    bx0, by0 = floor_pt(0, 0)  # back-left
    bx1, by1 = floor_pt(0, n_cols)  # back-right
    top = lift(z_scale.hi)
    walls = (
        f"{px(fx0)},{px(fy0)} {px(bx0)},{px(by0)} {px(bx1)},{px(by1)} "
        f"{px(bx1)},{px(by1 - top)} {px(bx0)},{px(by0 - top)} {px(fx0)},{px(fy0 - top)}"
    )
    out.append(f'<polygon points="{walls}" fill="#f7f7f7" stroke="#bbb" stroke-width="0.6"/>')
    for tick in z_scale.ticks():
        h = lift(tick)
        out.append(
            f'<polyline points="{px(fx0)},{px(fy0 - h)} {px(bx0)},{px(by0 - h)} '
            f'{px(bx1)},{px(by1 - h)}" fill="none" stroke="#d0d0d0" stroke-width="0.6"/>'
            f'<text x="{px(fx0 - 5)}" y="{px(fy0 - h + 3)}" text-anchor="end" '
            f'font-size="9">{esc(fmt_axis(tick))}</text>'
        )
    out.append(
        f'<text transform="translate(14 {px(fy0 - top / 2)}) rotate(-90)" '
        f'text-anchor="middle" font-size="11">'
        f'{esc(z_label + (" (log)" if z_scale.log else ""))}</text>'
    )
    for r in range(n_rows):
        gx, gy = floor_pt(r + 0.5, n_cols)
        out.append(
            f'<text x="{px(gx + 4)}" y="{px(gy + 4)}" font-size="10">{esc(rows[r])}</text>'
        )
    for c in range(n_cols):
        gx, gy = floor_pt(n_rows, c + 0.5)
        out.append(
            f'<text x="{px(gx)}" y="{px(gy + 15)}" text-anchor="middle" '
            f'font-size="10">{esc(cols[c])}</text>'
        )
    out.append(
        f'<text x="{px(x_origin + n_cols * cell / 2)}" y="{height - 8}" text-anchor="middle" '
        f'font-size="11">{esc(col_label)}</text>'
    )
    rx, ry = floor_pt(n_rows / 2, n_cols)
    out.append(
        f'<text x="{px(rx + 62)}" y="{px(ry + 6)}" font-size="11">{esc(row_label)}</text>'
    )
    bar = cell * 0.56
    dx, dy = depth_dx * 0.5, depth_dy * 0.5
    for r in range(n_rows):  # back row first
        for c in range(n_cols):
            v = values[r][c]
            if v is None or not math.isfinite(v) or v <= 0:
                continue
            x, y = floor_pt(r + 0.75, c)
            x += (cell - bar) / 2
            h = lift(v)
            base = colours[c % len(colours)]
            tip = f"{rows[r]}, {cols[c]}: {fmt_value(v)} {z_unit}".rstrip()
            front = (f"{px(x)},{px(y)} {px(x + bar)},{px(y)} {px(x + bar)},{px(y - h)} "
                     f"{px(x)},{px(y - h)}")
            side = (f"{px(x + bar)},{px(y)} {px(x + bar + dx)},{px(y + dy)} "
                    f"{px(x + bar + dx)},{px(y + dy - h)} {px(x + bar)},{px(y - h)}")
            lid = (f"{px(x)},{px(y - h)} {px(x + bar)},{px(y - h)} "
                   f"{px(x + bar + dx)},{px(y + dy - h)} {px(x + dx)},{px(y + dy - h)}")
            out.append(
                f'<g class="pt bar3d" data-tip="{esc(tip)}">'
                f'<polygon points="{side}" fill="{_shade(base, 0.68)}" stroke="#fff" '
                f'stroke-width="0.4"/><polygon points="{front}" fill="{base}" stroke="#fff" '
                f'stroke-width="0.4"/><polygon points="{lid}" fill="{_shade(base, 1.22)}" '
                f'stroke="#fff" stroke-width="0.4"/></g>'
            )
    out.append("</svg>")
    return "".join(out)
