"""Report pages of the database suite (``ssdlab run db``), their ``ssdlab show`` lines,
what ``ssdlab run db`` prints at the end, and its comparison overlay.

Per test (sysbench OLTP on MariaDB, pgbench on PostgreSQL) a page in the manner of the
Micron 9400 review's database section: the test's message, and its warning when the
dataset fits in memory; the set-up (server, tool, threads, phases, the dataset on disk
against its estimate, the buffer and the memory that could cache it); the figures (TPS,
QPS, transactions, errors, latency average, p95, p99 and maximum, and where the
percentiles come from); this run beside the review's published figures for the same kind
of test, labelled as other hardware (:mod:`ssdlab.reference.db_published`; a different
mix or benchmark is shown as context only, in a table); the tools' per-interval TPS and
latency. A second page holds the server's settings. Across runs: per test, each run's
TPS and its average and p99 latency in grouped bars, named by the runs' labels.

Everything comes from the stored result (:class:`~ssdlab.plan.db.DbResult`). Latency is
in ms; MB are 10^6 bytes, MiB 2^20 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ssdlab.plan.db import SPEC, SUITE, SYSBENCH
from ssdlab.plan.db_records import DatasetRecord, DbResult, SecondPoint
from ssdlab.reference.db_published import PublishedDb, published_match
from ssdlab.reference.sources import cite
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import WIDE, head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import failed_tests_error, quick_note, run_line, see_line, text_table
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes, format_duration

#: the suite's tests, in the order the plan names them
TESTS = tuple(SPEC.results)
#: two bar charts side by side (bars are named under the axis, the legend names metrics)
PAIR = ch.Frame(width=470, height=270, left=62, right=110, top=28, bottom=40)
#: a comparison's bar chart: one bar (or group) per run, named by its label
ACROSS = ch.Frame(width=900, height=300, left=66, right=110, top=30, bottom=46)
THIS_RUN = "this run"
PUBLISHED = "published, other hardware"
MAX_POINTS = 600  # per timeline: more only costs layout time


def _result(test: TestData) -> DbResult:
    return result_of(test, DbResult)


def has_figures(r: DbResult) -> bool:
    """Whether a result holds a measurement (not ``{}`` nor ``{"error": ...}``)."""
    return r.error is None and (r.seconds > 0 or r.tps > 0)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _n(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _size(count: int) -> str:
    """``8.5 MiB (8.9 MB)``: binary and decimal."""
    return f"{format_bytes(count)} ({count / 1e6:,.1f} MB)"


def _workload(test: TestData, r: DbResult) -> str:
    return r.workload or str(test.params.get("workload") or "")


def _mode(test: TestData, r: DbResult) -> str:
    return r.mode or str(test.params.get("mode") or test.name.split("-", 1)[-1])


def _title(test: TestData, r: DbResult) -> str:
    server = r.server or test.params.get("server")
    return f"Database: {test.name}" + (f" on {server}" if server else "")


# ------------------------------------------------------------------------ the page


def _banners(test: TestData, r: DbResult) -> str:
    """The test's message (or why it has none), and the fits-in-memory warning."""
    if test.status == "failed" or r.error:
        out = banner("failed", f"FAILED: {r.error or 'no error was recorded'}")
    elif test.status == "interrupted":
        out = banner("failed", "INTERRUPTED (Ctrl-C): the test has no result")
    elif not has_figures(r):
        out = banner("failed", "INCOMPLETE: the run never finished this test (crash or "
                     "still running)")
    else:
        out = banner("reference", r.message or f"{r.tps:,.1f} TPS")
    warning = r.warning
    if warning is None and r.dataset is not None and r.dataset.fits_in_memory:
        warning = "the dataset fits in memory: the results measure memory more than the drive"
    return out + (banner("mismatch", f"WARNING: {warning}") if warning else "")


def _phases(test: TestData, r: DbResult) -> str:
    """The warm-up and the measured phase: as measured, else as planned (no result)."""
    warm: object = r.warmup_seconds
    measured: object = r.seconds
    how = "as the tool reports it"
    if not has_figures(r):
        warm, measured = test.params.get("warmup_seconds"), test.params.get("seconds")
        how = "planned"
    if not isinstance(warm, int | float) or not isinstance(measured, int | float):
        return "-"
    return (f"{format_duration(warm)} ({warm:,.0f} s) warm-up, not measured; then "
            f"{format_duration(measured)} ({measured:,.1f} s) measured, {how}")


def _setup_rows(test: TestData, r: DbResult) -> list[tuple[str, object]]:
    return [
        ("server", r.server or test.params.get("server")),
        ("tool", r.tool),
        ("workload", f"{_workload(test, r)} {_mode(test, r)}"),
        ("threads", r.threads or test.params.get("threads")),
        ("warm-up / measured", _phases(test, r)),
    ]


def _buffer_name(workload: str) -> str:
    return "buffer pool (InnoDB)" if workload == SYSBENCH else "shared_buffers"


def dataset_rows(d: DatasetRecord | None, workload: str) -> list[tuple[str, object]]:
    """The dataset as the run measured it, against its estimate and the memory."""
    if d is None:
        return [("dataset", "not measured (the test has no result)")]
    times = f", {d.bytes / d.estimated_bytes:.2f}x the estimate" if d.estimated_bytes else ""
    limit = ("none (no memory cgroup on the server)" if d.memory_limit_bytes is None else
             f"{_size(d.memory_limit_bytes)}, a memory cgroup on the server")
    return [
        ("dataset", d.shape),
        ("dataset on disk", f"{_size(d.bytes)} after loading; estimated "
                            f"{_size(d.estimated_bytes)}{times}"),
        (_buffer_name(workload), f"{_size(d.buffer_bytes)}, {d.buffer_ratio:.3g} of the "
                                 "dataset on disk"),
        ("memory limit", limit),
        ("memory that could cache the data", _size(d.memory_bytes)),
        ("data fit in memory", "YES: the results measure memory more than the drive"
         if d.fits_in_memory else "no: the dataset is larger than that memory"),
        ("direct I/O", "yes: the server's data files bypass the page cache (O_DIRECT)"
         if d.direct_io else "no: the page cache may hold data too"),
        ("--scale", d.scaled or "changed nothing: the dataset as planned"),
    ]


def figures_table(r: DbResult) -> str:
    """TPS, QPS, transactions, errors and the latencies (ms) of a result."""
    row = [_n(r.tps), _n(r.qps), f"{r.transactions:,}", f"{r.errors:,}",
           _ms(r.latency_avg_ms), _ms(r.latency_p95_ms), _ms(r.latency_p99_ms),
           _ms(r.latency_max_ms)]
    errors = ("sysbench's ignored errors" if r.workload == SYSBENCH
              else "pgbench's failed transactions")
    return table(("TPS", "QPS", "transactions", "errors", "avg (ms)", "p95 (ms)",
                  "p99 (ms)", "max (ms)"), [[esc(c) for c in row]]) + note(
        f"Percentiles from {r.latency_source or 'the tool'}. Errors: {errors}. "
        + ("QPS: sysbench only." if r.qps is None else "QPS: sysbench's queries per second."))


def db_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    """The pages of one stored db test: its results, then the server's settings."""
    r = _result(test)
    title = _title(test, r)
    body = _banners(test, r) + kv_table(_setup_rows(test, r)) + "<h3>Dataset and memory</h3>"
    body += kv_table(dataset_rows(r.dataset, _workload(test, r)))
    if has_figures(r):
        body += "<h3>Results</h3>" + figures_table(r) + published_html(run, test, r, anchor)
        body += timeline_html(r, anchor)
        body += "" if r.settings else note("The server's settings were not recorded.")
    pages = [Page(anchor, title, body, head_left(run), run.quick)]
    if r.settings:
        pages.append(settings_page(run, r, title, f"{anchor}-settings"))
    return pages


def settings_page(run: RunData, r: DbResult, title: str, anchor: str) -> Page:
    rows = [[esc(k), esc(v)] for k, v in r.settings.items()]
    body = note(f"As {r.server or 'the server'} reported them after the test (ssdlab's "
                "settings, and those given with --server-option, which win).") + table(
        ("setting", "value"), rows)
    return Page(anchor, f"{title}: server settings", body, head_left(run), run.quick,
                toc=False)


# ------------------------------------------------------------------------ published


def published_html(run: RunData, test: TestData, r: DbResult, anchor: str) -> str:
    """This run beside the review's figures: bars for the same kind of test, a table of
    context for a different one, nothing where the review has none."""
    match = published_match(_workload(test, r), _mode(test, r))
    if match is None:
        return ""
    p = match.published
    where = note(f"Published, other hardware: {p.device}, {p.title}, from the review "
                 f"{cite(p.source)}.")
    quick = note("This run used the quick profile (a few MB for seconds): beside the "
                 "review's hours on 100 tables of 10 million rows it shows the scale "
                 "only.") if run.quick else ""
    if match.same_kind:
        head = "<h3>Beside the review's published figures</h3>"
        shown = _published_bars(anchor, r, p) + where
    else:
        head = "<h3>The review's published figures: context only, not comparable</h3>"
        shown = _context_table(test, r, p) + where
    notes = note(match.how) + note(f"The review's set-up: {p.setup}")
    return head + quick + shown + notes + in_flight_note(r, p)


def tps_bars(chart_id: str, title: str, names: Sequence[str],
             tps: Sequence[float | None], frame: ch.Frame) -> str:
    """Average TPS, one bar per name (a run, or the review's figure)."""
    xs = tuple(float(i) for i in range(len(names)))
    return ch.bar_chart(chart_id, title, list(names),
                        [ch.Series("average TPS", xs, tuple(tps), colour_index=0)],
                        x_label="average over the measured phase",
                        y_label="transactions per second", y_unit="TPS", frame=frame)


def latency_bars(chart_id: str, title: str, names: Sequence[str],
                 results: Sequence[tuple[float | None, float | None]],
                 frame: ch.Frame) -> str:
    """Average and p99 latency (ms), a group of two bars per name."""
    xs = tuple(float(i) for i in range(len(names)))
    return ch.bar_chart(chart_id, title, list(names), [
        ch.Series("average", xs, tuple(avg for avg, _ in results), colour_index=4),
        ch.Series("p99", xs, tuple(p99 for _, p99 in results), colour_index=3),
    ], x_label="average and 99th-percentile latency", y_label="latency (ms)", y_unit="ms",
        frame=frame)


def _published_bars(anchor: str, r: DbResult, p: PublishedDb) -> str:
    names = (THIS_RUN, PUBLISHED)
    beside = f"beside the {p.device} (published)"
    tps = tps_bars(f"{anchor}-pub-tps", f"Average TPS, {beside}", names, (r.tps, p.tps), PAIR)
    lat = latency_bars(f"{anchor}-pub-lat", f"Latency, {beside}", names,
                       ((r.latency_avg_ms, r.latency_p99_ms),
                        (p.latency_avg_ms, p.latency_p99_ms)), PAIR)
    return charts(tps, lat, two=True)


def _context_table(test: TestData, r: DbResult, p: PublishedDb) -> str:
    rows = [
        [esc(f"{THIS_RUN}: {_workload(test, r)} {_mode(test, r)} on {r.server}"), esc(_n(r.tps)),
         esc(_ms(r.latency_avg_ms)), esc(_ms(r.latency_p99_ms))],
        [esc(f"{PUBLISHED}: {p.device}, {p.title}"), esc(_n(p.tps)),
         esc(_ms(p.latency_avg_ms)), esc(_ms(p.latency_p99_ms))],
    ]
    return table(("", "TPS", "avg (ms)", "p99 (ms)"), rows)


def in_flight_note(r: DbResult, p: PublishedDb) -> str:
    """Little's law on both: TPS x average latency is the number of transactions in
    flight, at most N for N client threads that each wait for their transaction; more
    says the TPS adds up several such clients."""
    parts = []
    published = p.in_flight
    if published is not None and p.threads:
        ratio = published / p.threads
        text = (f"Little's law: TPS x average latency is the number of transactions in "
                f"flight. The published figures give {published:,.0f} for the {p.threads} "
                f"threads stated ({ratio:.1f}x)")
        if ratio > 1.5:
            text += (f": the review states its set-up per VM without saying how many VMs "
                     f"ran, and its TPS looks summed over about {round(ratio)} of them, "
                     "while its latency is per transaction. Read the TPS with that in mind.")
        parts.append(text if text.endswith(".") else text + ".")
    mine = r.tps * r.latency_avg_ms / 1000
    if mine > 0 and r.threads:
        parts.append(f"This run: {mine:,.1f} in flight with {r.threads} threads.")
    return note(" ".join(parts)) if parts else ""


# ------------------------------------------------------------------------ timelines


def downsample(series: Sequence[SecondPoint], limit: int = MAX_POINTS
               ) -> tuple[list[SecondPoint], int]:
    """At most ``limit`` points, each the mean of consecutive intervals (stamped with the
    last one's time), and how many intervals each point holds."""
    step = -(-len(series) // limit) if series else 1
    if step <= 1:
        return list(series), 1
    out = []
    for i in range(0, len(series), step):
        chunk = series[i : i + step]
        n = len(chunk)
        out.append(SecondPoint(t_s=chunk[-1].t_s, tps=sum(q.tps for q in chunk) / n,
                               latency_ms=sum(q.latency_ms for q in chunk) / n,
                               errors_per_s=sum(q.errors_per_s for q in chunk) / n))
    return out, step


def _line(chart_id: str, title: str, points: Sequence[SecondPoint],
          value: Callable[[SecondPoint], float], name: str, y_label: str, y_unit: str,
          rules: Sequence[ch.Rule] = ()) -> str:
    style = "line" if len(points) > 120 else "line+markers"
    series = ch.Series(name, tuple(q.t_s for q in points),
                       tuple(value(q) for q in points), style=style, colour_index=0)
    return ch.line_chart(chart_id, title, [series], x_label="seconds into the measured phase",
                         y_label=y_label, y_unit=y_unit, y_log=False, rules=rules, frame=WIDE)


def timeline_html(r: DbResult, anchor: str) -> str:
    """TPS and latency per interval of the tool's report (and errors, when any)."""
    if not r.series:
        return note("The tool reported no intervals.")
    points, step = downsample(r.series)
    what = r.series_latency or "as the tool reported it"
    svgs = [
        _line(f"{anchor}-tps", "TPS per interval", points, lambda q: q.tps, "TPS",
              "transactions per second", "TPS", [ch.Rule(r.tps, f"average {r.tps:,.0f} TPS")]),
        _line(f"{anchor}-lat", f"Latency per interval: {what}", points,
              lambda q: q.latency_ms, "latency", "latency (ms)", "ms"),
    ]
    if any(q.errors_per_s > 0 for q in r.series):
        svgs.append(_line(f"{anchor}-err", "Errors per second", points,
                          lambda q: q.errors_per_s, "errors", "errors per second", "errors/s"))
    averaged = (f" Each point is the mean of {step} consecutive intervals."
                if step > 1 else "")
    return ("<h3>Over time</h3>" + note(f"The tool's own report of each interval of the "
                                        f"measured phase; latency: {what}.{averaged}")
            + charts(*svgs))


# ------------------------------------------------------------------------ across runs


def _measured(run: RunData, name: str) -> DbResult | None:
    test = next((t for t in run.tests if t.name == name), None)
    if run.suite != SUITE or test is None:
        return None
    r = _result(test)
    return r if has_figures(r) else None


#: what changes a figure's meaning, compared across the runs of an overlay
ASPECTS: tuple[tuple[str, Callable[[DbResult], str]], ...] = (
    ("threads", lambda r: str(r.threads)),
    ("dataset", lambda r: r.dataset.shape if r.dataset else "-"),
    ("measured seconds", lambda r: f"{r.seconds:,.0f}"),
    ("server", lambda r: r.server),
    ("buffer / dataset", lambda r: f"{r.dataset.buffer_ratio:.2g}" if r.dataset else "-"),
    ("fits in memory", lambda r: "yes" if r.dataset and r.dataset.fits_in_memory else "no"),
)


def differences(runs: Sequence[RunData], entries: Sequence[tuple[int, DbResult]]) -> list[str]:
    """The set-up aspects in which the runs of ``entries`` differ, with their values."""
    out = []
    for name, value in ASPECTS:
        values = list(dict.fromkeys(value(r) for _, r in entries))
        if len(values) > 1:
            out.append(f"{name} ({', '.join(values)})")
    if len({runs[i].quick for i, _ in entries}) > 1:
        out.append("profile (quick and full mixed)")
    return out


def _overlay_test(name: str, runs: Sequence[RunData], labels: Sequence[str],
                  entries: Sequence[tuple[int, DbResult]]) -> str:
    names = [labels[i] for i, _ in entries]
    tps = tps_bars(f"cmp-db-{name}-tps", f"{name}: average TPS", names,
                   [r.tps for _, r in entries], ACROSS)
    lat = latency_bars(f"cmp-db-{name}-lat", f"{name}: latency", names,
                       [(r.latency_avg_ms, r.latency_p99_ms) for _, r in entries], ACROSS)
    rows = [[f'<span class="swatch" style="background:{ch.colour(i)}"></span>'
             f"{esc(labels[i])}", esc(_n(r.tps)), esc(_ms(r.latency_avg_ms)),
             esc(_ms(r.latency_p95_ms)), esc(_ms(r.latency_p99_ms)), esc(r.threads),
             esc(r.dataset.shape if r.dataset else "-"),
             esc("YES" if r.dataset and r.dataset.fits_in_memory else "no")]
            for i, r in entries]
    differ = differences(runs, entries)
    warn = banner("mismatch", f"The runs differ in: {'; '.join(differ)}. Differences below "
                  "may come from the set-up, not the drives.") if differ else ""
    return (f"<h4>{esc(name)}</h4>" + warn + charts(tps, lat)
            + table(("run", "TPS", "avg (ms)", "p95 (ms)", "p99 (ms)", "threads", "dataset",
                     "fits in memory"), rows))


def db_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """HTML for the comparison page: for every db test at least two runs measured, each
    such run's TPS and latency (a run without the test is left out of its charts); ""
    when no test has two."""
    parts = []
    for name in TESTS:
        entries = [(i, r) for i, run in enumerate(runs) if (r := _measured(run, name))]
        if len(entries) >= 2:
            parts.append(_overlay_test(name, runs, labels, entries))
    if not parts:
        return ""
    return "<h3>Databases</h3>" + note(
        "Per test, each run that measured it, named by its label; latency in ms.") + "".join(
        parts)


# ------------------------------------------------------------------------ show, run's end


def _verdict(test: TestData, r: DbResult) -> str:
    if r.error or test.status == "failed":
        return f"FAILED: {r.error or 'no error was recorded'}"
    return r.message or test.status


def _dataset_line(r: DbResult) -> str | None:
    d = r.dataset
    if d is None:
        return None
    return (f"  dataset {d.shape}: {format_bytes(d.bytes)} on disk (estimated "
            f"{format_bytes(d.estimated_bytes)}); {_buffer_name(r.workload)} "
            f"{format_bytes(d.buffer_bytes)} ({d.buffer_ratio:.3g} of it); fits in memory: "
            f"{'YES' if d.fits_in_memory else 'no'}")


def show_lines(run: RunData, test: TestData) -> list[str]:
    r = _result(test)
    lines = [f"  verdict: {_verdict(test, r)}"]
    if not has_figures(r):
        return lines
    lines.append(f"  {r.server}, {r.tool}; {r.threads} threads; "
                 f"{format_duration(r.warmup_seconds)} warm-up, {r.seconds:,.1f} s measured")
    lines += text_table(["TPS", "QPS", "avg ms", "p95 ms", "p99 ms", "max ms", "errors"],
                        [[_n(r.tps), _n(r.qps), _ms(r.latency_avg_ms), _ms(r.latency_p95_ms),
                          _ms(r.latency_p99_ms), _ms(r.latency_max_ms), f"{r.errors:,}"]])
    dataset = _dataset_line(r)
    lines += [dataset] if dataset else []
    lines += [f"  WARNING: {r.warning}"] if r.warning else []
    return lines


def outcome(run: RunData, store_path: object) -> Outcome:
    lines = [run_line(run, store_path, quick_note(run, ": a try-out, not the review's sizes"))]
    for test in run.tests:
        r = _result(test)
        lines.append(f"  {test.name}: {_verdict(test, r)}")
        lines += [f"    WARNING: {r.warning}"] if r.warning else []
    lines.append(see_line(run))
    failure = failed_tests_error(run)
    if failure is None and not run.tests and run.status == "failed":
        failure = f"no database test ran: {run.message or 'the run failed'}"
    return Outcome(tuple(lines), failure)


PAGES = SuitePages(
    pages={name: db_pages for name in TESTS},
    show={name: show_lines for name in TESTS},
    outcome=outcome,
    overlay=db_overlay,
)
