"""Report pages of the file-system presets (aja, diskfill, smallfiles, copy): what ran
where (the preset and its version, the directory, its file system, network share or not),
MB/s per phase as bars (per file size, per pass, per phase, per set), a table of every
measured phase with how the page cache was handled, and, for the copy sets, the averages.

Also the rest of the four suites' report part (one :class:`SuitePages` for the four): their
``ssdlab show`` lines, what ``ssdlab run`` prints when a run ends, and the comparison's
overlay of runs of the same preset.
"""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.errors import command
from ssdlab.plan.file_presets import phase_of
from ssdlab.plan.file_results import (
    CacheRecord,
    FilePresetResult,
    FioPhaseRecord,
    PhaseRecord,
    group_name,
)
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, text_table
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

MB = 1e6
DIRECTIONS = ("write", "read", "copy")
GROUP_LABEL = {"aja": "file size", "diskfill": "pass", "smallfiles": "phase", "copy": "file set"}


def _phases(test: TestData) -> list[PhaseRecord]:
    """The measured phases, from the test's stored rounds (also of a test that failed)."""
    return [phase for r in test.rounds if r.status == "ok" for n, c in enumerate(r.cells)
            if (phase := phase_of(c, f"{test.name} round {r.round_no} cell {n}")).seconds]


def _cache_text(cache: CacheRecord) -> str:
    if cache.direct:
        return "O_DIRECT"
    if cache.dropped:
        text = "synced, caches dropped"
        return text + (" (tmpfs: in RAM)" if cache.note else "")
    return f"buffered; not dropped: {'-' if cache.why is None else cache.why}"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _chart(test: TestData, phases: list[PhaseRecord], anchor: str) -> str:
    groups = list(dict.fromkeys(p.group for p in phases))
    series = []
    for k, direction in enumerate(DIRECTIONS):
        ys: list[float | None] = []
        for group in groups:
            rates = [p.bw_bytes_per_s / MB for p in phases
                     if p.group == group and p.direction == direction]
            ys.append(_mean(rates) if rates else None)
        if any(y is not None for y in ys):
            name = "copy (mean)" if direction == "copy" else direction
            series.append(ch.Series(name, tuple(range(len(groups))), tuple(ys),
                                    colour_index=k))
    label = GROUP_LABEL.get(test.name, "phase")
    return ch.bar_chart(f"{anchor}-mbps", f"MB/s per {label}", groups, series,
                        x_label=label, y_label="MB/s",
                        y_unit="MB/s", y_log=False)


def _frames(phase: PhaseRecord) -> tuple[int, float | None]:
    """AJA's frames in the phase and frames per second (0, None: not video frames)."""
    if isinstance(phase, FioPhaseRecord):
        return phase.frames or 0, phase.frames_per_s
    return 0, None


def _rows(phases: list[PhaseRecord], frames: bool) -> list[list[str]]:
    rows = []
    for p in phases:
        row = [esc(p.label), f"{p.files:,}", esc(format_bytes(p.io_bytes)),
               f"{p.seconds:,.3f}", f"{p.bw_bytes_per_s / MB:,.1f}"]
        if frames:
            count, fps = _frames(p)
            row += [f"{count:,}", f"{fps:,.1f}" if fps is not None else "-"]
        rows.append([*row, esc(_cache_text(p.cache))])
    return rows


def _averages(test: TestData, result: FilePresetResult) -> str:
    summary = result.summary or []
    if test.name != "copy" or not summary:
        return ""
    rows = [[esc(s.group), f"{s.count}", esc(format_bytes(s.io_bytes)),
             f"{s.mean_seconds:,.3f}", f"{s.mean_bw_bytes_per_s / MB:,.1f}"] for s in summary]
    return "<h3>Averages</h3>" + table(
        ("set", "copies", "size", "mean time (s)", "mean MB/s"), rows)


def _about(run: RunData, test: TestData, result: FilePresetResult) -> str:
    p = test.params
    directory = p.get("directory")
    d = directory if isinstance(directory, dict) and directory else run.target
    cleanup = result.cleanup
    share = "network share" if d.get("network_share") else "local"
    removed = cleanup.removed if cleanup is not None else None
    work_dir = cleanup.work_dir if cleanup is not None else None
    return kv_table([
        ("preset", f"{p.get('preset', test.name)} version {p.get('preset_version', '?')}"),
        ("directory", f"{d.get('path')} ({d.get('fs_type')}, {share}, on "
                      f"{d.get('source') or '-'})"),
        ("plan", p.get("summary")),
        ("page cache", p.get("page_cache")),
        ("work directory", f"{work_dir or '-'}: "
                           + ("removed" if removed else "NOT removed" if removed is False
                              else "-")),
    ])


def file_preset_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    title = str(test.params.get("title", test.name))
    result = result_of(test, FilePresetResult)
    phases = _phases(test)
    body = ""
    if test.status == "failed" or result.error:
        body += banner("failed", f"{test.status}: {result.error or ''}")
    body += _about(run, test, result)
    for text in result.notes or []:
        body += note(text)
    if phases:
        frames = any(_frames(p)[1] is not None for p in phases)
        header = ["phase", "files", "size", "time (s)", "MB/s"]
        header += ["frames", "frames/s"] if frames else []
        body += charts(_chart(test, phases, anchor))
        body += table([*header, "page cache"], _rows(phases, frames))
        body += _averages(test, result)
        body += note("MB/s = 10^6 bytes per second. Write phases include fsync (fio "
                     "fsync_on_close and end_fsync); copies include sync -f of the copy.")
    else:
        body += note("no phase was measured")
    return [Page(anchor, title, body, head_left(run), run.quick)]


def _means(test: TestData) -> dict[str, float]:
    """Mean MB/s per "direction group" (e.g. "write pass 1", "copy 100x1GiB")."""
    by_key: dict[str, list[float]] = {}
    for p in _phases(test):
        by_key.setdefault(group_name(p.group, p.direction), []).append(p.bw_bytes_per_s / MB)
    return {k: _mean(v) for k, v in by_key.items()}


def file_presets_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """Per file-system preset run by two or more runs: their MB/s side by side."""
    out = ""
    for kind in GROUP_LABEL:
        found = [(labels[i], t) for i, run in enumerate(runs) for t in run.tests
                 if t.name == kind and _phases(t)]
        if len(found) < 2:
            continue
        means = [(label, _means(t)) for label, t in found]
        keys = list(dict.fromkeys(k for _, m in means for k in m))
        series = [ch.Series(label, tuple(range(len(keys))), tuple(m.get(k) for k in keys),
                            colour_index=i) for i, (label, m) in enumerate(means)]
        title = str(found[0][1].params.get("title", kind))
        svg = ch.bar_chart(f"cmp-{kind}", f"{title}: MB/s, all runs", keys, series,
                           x_label=GROUP_LABEL[kind], y_label="MB/s", y_unit="MB/s",
                           y_log=False, frame=ch.Frame(width=900, height=320, right=170))
        out += f"<h3>{esc(title)}</h3>" + charts(svg)
    return out


# -- ssdlab show, and what ssdlab run prints -------------------------------------------------


def show_lines(run: RunData, test: TestData) -> list[str]:
    """The preset, the one-line verdict, and the means of each group and direction."""
    p, result = test.params, result_of(test, FilePresetResult)
    verdict = result.message or (test.status if result.error is None else result.error)
    lines = [f"  preset {p.get('preset', test.name)} v{p.get('preset_version', '?')}",
             f"  verdict: {verdict}"]
    if result.summary:
        body = [[s.group, s.direction, str(s.count), num(s.mean_seconds, 3),
                 num(s.mean_bw_bytes_per_s / MB, 1)] for s in result.summary]
        lines += ["  results (MB/s = 10^6 bytes/s, means over the repetitions):",
                  *text_table(["phase", "direction", "count", "mean s", "MB/s"], body)]
    return lines


def outcome(run: RunData, store_path: object) -> Outcome:
    """``run ID STATUS; MESSAGE``; a failed test is the run's failure."""
    test = run.test(run.suite)
    result = result_of(test, FilePresetResult)
    line = f"run {run.run_id} {run.status_text}; {result.message or test.status}"
    failed = test.status == "failed"
    return Outcome((line,), f"{run.suite} failed: {result.error} (see `{command()} show "
                   f"{run.run_id}`)" if failed else None)


#: the four suites' pages (each run has one test, named as its preset)
PAGES = SuitePages(pages=dict.fromkeys(GROUP_LABEL, file_preset_pages),
                   show=dict.fromkeys(GROUP_LABEL, show_lines), outcome=outcome,
                   overlay=file_presets_overlay)
