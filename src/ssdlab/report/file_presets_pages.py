"""Report pages of the file-system presets (aja, diskfill, smallfiles, copy): what ran
where (the preset and its version, the directory, its file system, network share or not),
MB/s per phase as bars (per file size, per pass, per phase, per set), a table of every
measured phase with how the page cache was handled, and, for the copy sets, the averages.
"""

from __future__ import annotations

from typing import Any

from ssdlab.plan.units import format_bytes
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.run_pages import head_left
from ssdlab.store.records import RunData, TestData

MB = 1e6
DIRECTIONS = ("write", "read", "copy")
GROUP_LABEL = {"aja": "file size", "diskfill": "pass", "smallfiles": "phase", "copy": "file set"}


def _cells(test: TestData) -> list[dict[str, Any]]:
    return [c for r in test.rounds if r.status == "ok" for c in r.cells
            if isinstance(c.get("bw_bytes_per_s"), int | float) and c.get("seconds")]


def _cache_text(cell: dict[str, Any]) -> str:
    cache = _dict(cell.get("cache"))
    if cache.get("direct"):
        return "O_DIRECT"
    if cache.get("dropped"):
        text = "synced, caches dropped"
        return text + (" (tmpfs: in RAM)" if cache.get("note") else "")
    return f"buffered; not dropped: {cache.get('why', '-')}"


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _chart(test: TestData, cells: list[dict[str, Any]], anchor: str) -> str:
    groups = list(dict.fromkeys(str(c["group"]) for c in cells))
    series = []
    for k, direction in enumerate(DIRECTIONS):
        ys: list[float | None] = []
        for group in groups:
            rates = [float(c["bw_bytes_per_s"]) / MB for c in cells
                     if c["group"] == group and c["direction"] == direction]
            ys.append(_mean(rates) if rates else None)
        if any(y is not None for y in ys):
            name = "copy (mean)" if direction == "copy" else direction
            series.append(ch.Series(name, tuple(range(len(groups))), tuple(ys),
                                    colour_index=k))
    label = GROUP_LABEL.get(test.name, "phase")
    return ch.bar_chart(f"{anchor}-mbps", f"MB/s per {label}", groups, series,
                        x_label=label, y_label="MB/s",
                        y_unit="MB/s", y_log=False)


def _rows(cells: list[dict[str, Any]], frames: bool) -> list[list[str]]:
    rows = []
    for c in cells:
        row = [esc(c.get("label", c.get("cell"))), f"{int(c.get('files', 1)):,}",
               esc(format_bytes(int(c["io_bytes"]))), f"{float(c['seconds']):,.3f}",
               f"{float(c['bw_bytes_per_s']) / MB:,.1f}"]
        if frames:
            fps = c.get("frames_per_s")
            row += [f"{int(c.get('frames', 0)):,}",
                    f"{float(fps):,.1f}" if isinstance(fps, int | float) else "-"]
        rows.append([*row, esc(_cache_text(c))])
    return rows


def _averages(test: TestData) -> str:
    result = test.result if isinstance(test.result, dict) else {}
    summary = [s for s in result.get("summary") or [] if isinstance(s, dict)]
    if test.name != "copy" or not summary:
        return ""
    rows = [[esc(s["group"]), f"{int(s['count'])}", esc(format_bytes(int(s["io_bytes"]))),
             f"{float(s['mean_seconds']):,.3f}",
             f"{float(s['mean_bw_bytes_per_s']) / MB:,.1f}"] for s in summary]
    return "<h3>Averages</h3>" + table(
        ("set", "copies", "size", "mean time (s)", "mean MB/s"), rows)


def _about(run: RunData, test: TestData) -> str:
    p = test.params
    d = _dict(p.get("directory")) or run.target
    cleanup = _dict(_dict(test.result).get("cleanup"))
    share = "network share" if d.get("network_share") else "local"
    removed = cleanup.get("removed")
    return kv_table([
        ("preset", f"{p.get('preset', test.name)} version {p.get('preset_version', '?')}"),
        ("directory", f"{d.get('path')} ({d.get('fs_type')}, {share}, on "
                      f"{d.get('source') or '-'})"),
        ("plan", p.get("summary")),
        ("page cache", p.get("page_cache")),
        ("work directory", f"{cleanup.get('work_dir') or '-'}: "
                           + ("removed" if removed else "NOT removed" if removed is False
                              else "-")),
    ])


def file_preset_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    title = str(test.params.get("title", test.name))
    result = test.result if isinstance(test.result, dict) else {}
    cells = _cells(test)
    body = ""
    if test.status == "failed" or result.get("error"):
        body += banner("failed", f"{test.status}: {result.get('error', '')}")
    body += _about(run, test)
    for text in result.get("notes") or []:
        body += note(str(text))
    if cells:
        frames = any("frames_per_s" in c for c in cells)
        header = ["phase", "files", "size", "time (s)", "MB/s"]
        header += ["frames", "frames/s"] if frames else []
        body += charts(_chart(test, cells, anchor))
        body += table([*header, "page cache"], _rows(cells, frames))
        body += _averages(test)
        body += note("MB/s = 10^6 bytes per second. Write phases include fsync (fio "
                     "fsync_on_close and end_fsync); copies include sync -f of the copy.")
    else:
        body += note("no phase was measured")
    return [Page(anchor, title, body, head_left(run), run.quick)]


def _means(test: TestData) -> dict[str, float]:
    """Mean MB/s per "direction group" (e.g. "write pass 1", "copy 100x1GiB")."""
    by_key: dict[str, list[float]] = {}
    for c in _cells(test):
        key = str(c["group"]) if c["group"] == c["direction"] else f"{c['direction']} {c['group']}"
        by_key.setdefault(key, []).append(float(c["bw_bytes_per_s"]) / MB)
    return {k: _mean(v) for k, v in by_key.items()}


def file_presets_overlay(runs: list[RunData], labels: list[str]) -> str:
    """Per file-system preset run by two or more runs: their MB/s side by side."""
    out = ""
    for kind in GROUP_LABEL:
        found = [(labels[i], t) for i, run in enumerate(runs) for t in run.tests
                 if t.name == kind and _cells(t)]
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
