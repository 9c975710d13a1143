"""``ssdlab report``: stored runs -> one self-contained HTML file and a PDF of it.

Reads the store only (never a live run), so any stored or imported run can be reported
and compared. The HTML is rendered here; the PDF is Chromium printing that same file
(:mod:`ssdlab.report.pdf`), so both have the same content, with charts as vector
graphics. (The printed copy leaves out the script for hovering and toggling series,
which has nothing to do on paper.) Files are written under temporary names and renamed
when complete.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ssdlab import __version__
from ssdlab.errors import UserError, command
from ssdlab.reference.specs import VendorSpec, find_spec, load_specs, match_spec_explained
from ssdlab.report import compare_pages, run_pages
from ssdlab.report.charts import colour
from ssdlab.report.files import write_atomic
from ssdlab.report.html import Page, PrintPart, document, esc, print_parts, table
from ssdlab.report.pdf import htmls_to_pdf, print_jobs
from ssdlab.report.registry import quick_banner, report_title, run_kinds
from ssdlab.store.db import Store
from ssdlab.store.records import RunData

HTML_NAME = "report.html"
PDF_NAME = "report.pdf"


@dataclass(frozen=True)
class ReportRequest:
    run_refs: tuple[str, ...]
    out_dir: Path
    baseline: str | None = None  # a run ref; default the first run
    claims: dict[str, str] = field(default_factory=dict)  # run ref -> spec query | "none"
    auto_claims: bool = True
    pdf: bool = True
    title: str | None = None


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    pdf: Path | None
    pages: int  # sections in the HTML (a section may print on more than one sheet)
    seconds_html: float
    seconds_pdf: float


Claim = tuple[VendorSpec, str]  # the spec and how it was chosen


def _claims(
    runs: Sequence[RunData], chosen: dict[str, str], auto: bool, specs: Sequence[VendorSpec]
) -> dict[str, Claim]:
    out: dict[str, Claim] = {}
    for run in runs:
        query = chosen.get(run.run_id)
        if query is not None:
            if query.lower() != "none":
                out[run.run_id] = (find_spec(query, specs), f"chosen by the user ({query!r})")
            continue
        if not auto:
            continue
        capacity = run.target.get("capacity_bytes")
        match = match_spec_explained(
            str(run.target.get("model") or run.target_model or ""),
            capacity if isinstance(capacity, int) else None,
            specs,
        )
        if match is not None:
            out[run.run_id] = (match.spec, f"matched automatically: {match.reason}")
    return out


def _cover(runs: Sequence[RunData], title: str, labels: Sequence[str]) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        [f'<span class="swatch" style="background:{colour(i)}"></span>'
         f'<a href="#run{i}">{esc(run.run_id)}</a>', esc(labels[i]), esc(run.suite),
         esc(run.profile + (" (QUICK)" if run.quick else "")), esc(run.status)]
        for i, run in enumerate(runs)
    ]
    quick = [r.suite for r in runs if r.quick]
    warn = (f'<div class="banner quick">{esc(quick_banner(quick))} (marked runs)</div>'
            if quick else "")
    return (
        f"<h1>{esc(title)}</h1>"
        f'<p class="small">Generated {stamp} by ssdlab {esc(__version__)} from the results '
        f"store. Pages per run: {esc(', '.join(run_kinds(runs)))}; "
        "MiB/s = 2^20 bytes/s, MB/s = 10^6 bytes/s.</p>"
        + warn + table(("run", "device", "suite", "profile", "status"), rows)
    )


def render(
    runs: Sequence[RunData], *, baseline: int = 0, claims: dict[str, Claim] | None = None,
    title: str | None = None,
) -> tuple[str, int]:
    """The whole report as HTML, and its number of page sections."""
    name, pages, cover = _render_pages(runs, baseline, claims, title)
    return document(name, pages, cover), len(pages) + 1


def _render_pages(
    runs: Sequence[RunData], baseline: int, claims: dict[str, Claim] | None,
    title: str | None,
) -> tuple[str, list[Page], str]:
    """The report's title, its pages and its cover."""
    claims = claims or {}
    compared = compare_pages.build(list(runs), baseline)
    pages: list[Page] = []
    for i, run in enumerate(runs):
        pages += run_pages.run_pages(run, i)
        if run.run_id in claims:
            spec, how = claims[run.run_id]
            pages.append(compare_pages.claims_page(run, compared.labels[i], spec, how, i))
    if len(runs) > 1:
        pages.append(compare_pages.parameters_page(compared))
        pages.append(compare_pages.overlay_page(compared))
        pages += compare_pages.ratio_pages(compared)
        pages.append(compare_pages.leaderboard_page(compared))
        pages += compare_pages.label_pages(compared)
    kind = report_title(runs)
    name = title or (
        f"{compared.labels[0]}: {kind}" if len(runs) == 1
        else f"{len(runs)} runs compared: {kind}"
    )
    return name, pages, _cover(runs, name, compared.labels)


def load_runs(store: Store, refs: Sequence[str]) -> list[RunData]:
    """The runs ``refs`` name, in order (a set's id names its runs, docs/sets.md)."""
    ids = [run_id for ref in refs for run_id in store.expand(ref)]
    seen = set()
    for run_id in ids:
        if run_id in seen:
            raise UserError(f"run {run_id} is given twice; give each run once")
        seen.add(run_id)
    return [store.load(run_id) for run_id in ids]


def write_report(store: Store, request: ReportRequest) -> ReportFiles:
    """Validate everything, then write report.html (and report.pdf) into ``out_dir``."""
    if not request.run_refs:
        raise UserError(f"give at least one run (see `{command()} runs`)")
    runs = load_runs(store, request.run_refs)
    ids = [r.run_id for r in runs]
    baseline = 0
    if request.baseline is not None:
        base_id = store.resolve(request.baseline)
        if base_id not in ids:
            raise UserError(f"--baseline {request.baseline!r} is not one of the reported runs")
        baseline = ids.index(base_id)
    chosen = {store.resolve(ref): query for ref, query in request.claims.items()}
    for run_id in chosen:
        if run_id not in ids:
            raise UserError(f"--claims names run {run_id}, which is not in the report")
    claims = _claims(runs, chosen, request.auto_claims, load_specs())
    out = request.out_dir
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {out}: exists and is not a directory")
    started = time.perf_counter()
    name, pages, cover = _render_pages(runs, baseline, claims, request.title)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / HTML_NAME
    text = document(name, pages, cover)
    write_atomic(html_path, text)
    seconds_html = time.perf_counter() - started
    pdf_path = None
    seconds_pdf = 0.0
    if request.pdf:
        started = time.perf_counter()
        pdf_path = out / PDF_NAME
        _print_pdf(print_parts(name, pages, cover, print_jobs(len(text))), pdf_path)
        seconds_pdf = time.perf_counter() - started
    return ReportFiles(html_path, pdf_path, len(pages) + 1, seconds_html, seconds_pdf)


def _print_pdf(parts: Sequence[PrintPart], pdf_path: Path) -> None:
    """Print the report's static copy (no script) to ``pdf_path``, in parts printed at
    once and joined (:func:`ssdlab.report.pdf.print_jobs`), through hidden files."""
    with tempfile.TemporaryDirectory(prefix=".report.print.", dir=pdf_path.parent) as tmp:
        files = []
        for n, part in enumerate(parts):
            files.append(Path(tmp) / f"part-{n}.html")
            files[-1].write_text(part.html, encoding="utf-8")
        # no script: nothing to wait for after load
        htmls_to_pdf(files, pdf_path, stand_ins=[p.stand_ins for p in parts], settle=False)
