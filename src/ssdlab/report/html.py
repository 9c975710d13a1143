"""HTML building blocks of the report: the document, pages, tables, banners.

The report is one self-contained file: its stylesheet and script (``assets/``) are
inlined, charts are inline SVG, fonts are the system's; nothing is fetched, so it works
offline and prints the same. Every page is a ``<section class="page">`` that starts a
new sheet in print and carries a header naming the run (and the quick-profile warning
when the run was a quick one).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources

QUICK_TEXT = "QUICK PROFILE: shortened rounds, for demos and tests; not a valid PTS result"
NOT_STEADY_TEXT = "STEADY STATE NOT REACHED"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def asset(name: str) -> str:
    return resources.files("ssdlab.report").joinpath("assets", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Page:
    """One printed page (or more, if it overflows) of the report."""

    anchor: str
    title: str
    body: str
    head_left: str = ""
    quick: bool = False
    toc: bool = True  # listed in the table of contents


def page_html(page: Page) -> str:
    quick = f'<div class="banner quick">{esc(QUICK_TEXT)}</div>' if page.quick else ""
    return (
        f'<section class="page" id="{esc(page.anchor)}">'
        f'<div class="page-head"><span>{page.head_left}</span><span>ssdlab report</span></div>'
        f"{quick}<h2>{esc(page.title)}</h2>{page.body}</section>"
    )


def document(title: str, pages: Sequence[Page], cover: str, *, interactive: bool = True) -> str:
    """The report page. ``interactive=False`` leaves out the hover and toggle script: the
    copy that is printed to PDF, where it has nothing to do and costs Chromium time."""
    toc_items = "".join(
        f'<li><a href="#{esc(p.anchor)}">{esc(p.title)}</a></li>' for p in pages if p.toc
    )
    cover_page = (
        f'<section class="page" id="cover">{cover}'
        f'<nav class="toc"><h3>Contents</h3><ol>{toc_items}</ol></nav></section>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style></head>"
        f'<body><main>{cover_page}{"".join(page_html(p) for p in pages)}</main>'
        + (f'<div id="tip" role="tooltip"></div><script>{asset("report.js")}</script>'
           if interactive else "")
        + "</body></html>\n"
    )


_NUMERIC = re.compile(r"^[-+]?[\d,.]+\s?(%|x|us|ms|IOPS|MiB/s|MB/s)?$")


def _num_class(cell: str) -> str:
    """Right-align cells that hold a number (tables of text stay left-aligned)."""
    first = cell.split("<br>", 1)[0].strip()
    return "num" if _NUMERIC.match(first) else ""


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    cls: str = "",
    row_classes: Sequence[str] | None = None,
    cell_classes: Sequence[Sequence[str]] | None = None,
) -> str:
    """A table of already-escaped cell HTML (use :func:`esc` on text)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    thead = f"<thead><tr>{head}</tr></thead>" if any(h for h in header) else ""
    body = []
    for i, row in enumerate(rows):
        rc = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = []
        for j, cell in enumerate(row):
            cc = cell_classes[i][j] if cell_classes and j < len(cell_classes[i]) else ""
            cc = " ".join(c for c in (cc, _num_class(cell) if j else "") if c)
            cells.append(f'<td class="{cc}">{cell}</td>' if cc else f"<td>{cell}</td>")
        body.append(f"<tr{rc}>{''.join(cells)}</tr>")
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>{thead}<tbody>{''.join(body)}</tbody></table>"


def kv_table(pairs: Iterable[tuple[str, object]]) -> str:
    rows = [(esc(k), esc(v if v not in (None, "") else "-")) for k, v in pairs]
    return table(("", ""), rows, cls="kv")


def figure(svg: str, caption: str = "") -> str:
    cap = f'<figcaption class="small">{esc(caption)}</figcaption>' if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def charts(*svgs: str, two: bool = False) -> str:
    inner = "".join(svg if svg.startswith("<figure") else figure(svg) for svg in svgs)
    return f'<div class="charts{" two" if two else ""}">{inner}</div>'


def banner(kind: str, text: str) -> str:
    return f'<div class="banner {esc(kind)}">{esc(text)}</div>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'
