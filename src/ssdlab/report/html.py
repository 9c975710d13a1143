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

from ssdlab.plan.suite import QUICK_TEXT
from ssdlab.report.words import plain

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
    #: the banner of a quick run's page: its suite's words (report/registry.py quick_banner)
    quick_banner: str = f"QUICK PROFILE: {QUICK_TEXT}"


def page_html(page: Page) -> str:
    quick = f'<div class="banner quick">{esc(page.quick_banner)}</div>' if page.quick else ""
    return (
        f'<section class="page" id="{esc(page.anchor)}">'
        f'<div class="page-head"><span>{page.head_left}</span><span>ssdlab report</span></div>'
        f"{quick}<h2>{esc(page.title)}</h2>{page.body}</section>"
    )


def _cover_section(cover: str, pages: Sequence[Page]) -> str:
    toc_items = "".join(
        f'<li><a href="#{esc(p.anchor)}">{esc(p.title)}</a></li>' for p in pages if p.toc
    )
    return (
        f'<section class="page" id="cover">{cover}'
        f'<nav class="toc"><h3>Contents</h3><ol>{toc_items}</ol></nav></section>'
    )


def _shell(title: str, body: str, tail: str = "") -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style></head>"
        f"<body><main>{body}</main>{tail}</body></html>\n"
    )


def document(title: str, pages: Sequence[Page], cover: str, *, interactive: bool = True) -> str:
    """The report page. ``interactive=False`` leaves out the hover and toggle script: the
    copy that is printed to PDF, where it has nothing to do and costs Chromium time."""
    body = _cover_section(cover, pages) + "".join(page_html(p) for p in pages)
    script = f'<div id="tip" role="tooltip"></div><script>{asset("report.js")}</script>'
    return _shell(title, body, script if interactive else "")


@dataclass(frozen=True)
class PrintPart:
    """One part of the report's print copy, printed by its own Chromium (in parallel).

    ``html`` holds a run of consecutive sections (the first part also the cover), plus,
    out of sight and taking no room, what keeps the links between parts: an empty
    element for each section that a link in this part points to in another part (so
    Chromium keeps the link; ``stand_ins`` names them, and their destinations in this
    part's PDF are not the real ones), and a hidden link to each section of this part
    that another part links to (Chromium writes a destination only for a linked target).
    """

    html: str
    stand_ins: frozenset[str]


_ID = re.compile(r'\bid="([^"]*)"')
_HREF = re.compile(r'href="#([^"]*)"')
#: absolutely placed and of no size: it neither moves anything nor adds a page
_OUT_OF_SIGHT = "position:absolute;left:0;top:0;width:0;height:0;overflow:hidden"


def print_parts(title: str, pages: Sequence[Page], cover: str, parts: int) -> list[PrintPart]:
    """The print copy (no script) cut at section boundaries into ``parts`` parts of about
    equal work (one section each when there are fewer sections). Printed one after another and
    joined, they make the same pages and links as :func:`document` printed whole."""
    sections = [_cover_section(cover, pages)] + [page_html(p) for p in pages]
    groups = _balanced_runs(sections, parts)
    bodies = ["".join(group) for group in groups]
    ids = [set(_ID.findall(body)) for body in bodies]
    links = [set(_HREF.findall(body)) for body in bodies]
    every_id = set().union(*ids)
    out = []
    for i, body in enumerate(bodies):
        elsewhere = (links[i] - ids[i]) & every_id  # a link to nowhere is left to Chromium
        wanted = set().union(*(links[j] for j in range(len(bodies)) if j != i)) & ids[i]
        keep = "".join(f'<a id="{a}"></a>' for a in sorted(elsewhere)) + "".join(
            f'<a href="#{a}" style="display:none"></a>' for a in sorted(wanted)
        )
        tail = f'<div aria-hidden="true" style="{_OUT_OF_SIGHT}">{keep}</div>' if keep else ""
        out.append(PrintPart(_shell(title, body, tail), frozenset(elsewhere)))
    return out


def _balanced_runs(items: Sequence[str], parts: int) -> list[list[str]]:
    """``parts`` consecutive runs of ``items`` (one per item when there are fewer items),
    of about equal printing work. The work is the number of tags: Chromium's time goes
    with the elements it lays out and paints, not with their bytes (20-run report: the
    comparison pages, mostly tables, took 4.3x the time of a run's pages, for 4.1x their
    tags and 1.7x their bytes)."""
    parts = max(1, min(parts, len(items)))
    work = [item.count("<") for item in items]
    total = sum(work)
    runs: list[list[str]] = [[]]
    done = 0
    for n, item in enumerate(items):
        past_share = done + work[n] / 2 > total * len(runs) / parts
        must = len(items) - n == parts - len(runs)  # one item left for each run to come
        if runs[-1] and len(runs) < parts and (past_share or must):
            runs.append([])
        runs[-1].append(item)
        done += work[n]
    return runs


_NUMERIC = re.compile(r"^[-+]?[\d,.]+\s?(%|x|us|ms|IOPS|MiB/s|MB/s)?$")


def _num_class(cell: str) -> str:
    """Right-align cells that hold a number (tables of text stay left-aligned)."""
    first = cell.split("<br>", 1)[0].strip()
    return "num" if _NUMERIC.match(first) else ""


#: a table cell's text breaks only between words (report.css); a run of this many
#: characters or more without a space that is neither a word nor a number (a path, a
#: job name, a hash) is a token that may break anywhere, where it must. The text itself
#: is kept as it is (no <wbr>): the HTML still holds every path and id verbatim
LONG_TOKEN_CHARS = 24
_TAG = re.compile(r"(<[^>]*>)")
_LONG = re.compile(rf"\S{{{LONG_TOKEN_CHARS},}}")
_WORD_OR_NUMBER = re.compile(
    r"[(\"'\[]*(?:[^\W\d_]+(?:[-'’/][^\W\d_]+)*|[-+]?[\d.,]+)[)\"'\].,;:!?%]*"
)


def _tokens_breakable(cell: str) -> str:
    """``cell`` (HTML) with each long token of its text in ``<span class="tok">``, which
    may break anywhere; words and numbers stay whole. Cells with inline SVG are left as
    they are."""
    if "<svg" in cell:
        return cell
    parts = _TAG.split(cell)
    for i in range(0, len(parts), 2):  # the text between the tags
        parts[i] = _LONG.sub(_token_span, parts[i])
    return "".join(parts)


def _token_span(match: re.Match[str]) -> str:
    text = match.group()
    if _WORD_OR_NUMBER.fullmatch(html.unescape(text)):
        return text
    return f'<span class="tok">{text}</span>'


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    cls: str = "",
    row_classes: Sequence[str] | None = None,
    cell_classes: Sequence[Sequence[str]] | None = None,
) -> str:
    """A table of already-escaped cell HTML (use :func:`esc` on text). Its cells break
    lines between words only; long tokens (paths, ids) may break anywhere."""
    head = "".join(f"<th>{_tokens_breakable(h)}</th>" for h in header)
    thead = f"<thead><tr>{head}</tr></thead>" if any(h for h in header) else ""
    body = []
    for i, row in enumerate(rows):
        rc = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = []
        for j, cell in enumerate(row):
            cc = cell_classes[i][j] if cell_classes and j < len(cell_classes[i]) else ""
            cc = " ".join(c for c in (cc, _num_class(cell) if j else "") if c)
            text = _tokens_breakable(cell)
            cells.append(f'<td class="{cc}">{text}</td>' if cc else f"<td>{text}</td>")
        body.append(f"<tr{rc}>{''.join(cells)}</tr>")
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>{thead}<tbody>{''.join(body)}</tbody></table>"


def kv_table(pairs: Iterable[tuple[str, object]]) -> str:
    """Named values, each in words (:func:`ssdlab.report.words.plain`)."""
    rows = [(esc(k), esc(plain(v))) for k, v in pairs]
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
