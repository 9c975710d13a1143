"""Report pages of a RAID matrix: the member check, the levels side by side (a table like
the NAS review's: each measurement's IOPS and MB/s per level, or its mean and p99 latency
where the test tracks latency, the best of each row marked; bars per level), and each
level's array, write penalty and members per round."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ssdlab.analysis.member_rounds import WRITE_METHODS
from ssdlab.analysis.members import TEXTBOOK_WRITE_PENALTY, UNCLEAR
from ssdlab.errors import command
from ssdlab.plan.array import LEVELS
from ssdlab.plan.matrix import (
    BY_LATENCY,
    BY_RATE,
    MEMBER_CHECK,
    LevelResult,
    LevelRow,
    MemberCheckResult,
    MemberCheckRow,
)
from ssdlab.plan.specs import cell_label
from ssdlab.report.charts import Series, bar_chart, line_chart
from ssdlab.report.consistency import MARK, run_checks
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, text_table
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

BTRFS_PARITY_NOTE = (
    "btrfs RAID 5/6 does read-modify-write on 64 KiB per-device stripes and is flagged by "
    "btrfs itself as not for production use; its measured write penalty differs from the "
    "textbook's.")


def levels_of(run: RunData) -> list[tuple[TestData, LevelResult]]:
    return [(t, result_of(t, LevelResult)) for t in run.tests if t.name in LEVELS]


def _penalty(r: LevelResult) -> str:
    if r.write_penalty is None:
        return "-"
    textbook = r.textbook_penalty or TEXTBOOK_WRITE_PENALTY.get(r.level)
    if textbook and r.write_method in WRITE_METHODS:  # md RAID 5/6: by the method md took
        return f"{r.write_penalty:.2f} ({textbook:g} by {WRITE_METHODS[r.write_method]})"
    return f"{r.write_penalty:.2f}" + (f" (textbook {textbook:g})" if textbook else "")


def _slow(r: LevelResult) -> str:
    """The slow-member verdict over the level's rounds, or (ZFS) over the whole level,
    with how many rounds named that member, and the outliers: other members some rounds
    named, not named for the level."""
    if r.slow_basis == "level" or (r.zfs is not None and "verdict" in r.zfs):
        return _slow_over_level(r)
    if r.slow_member:
        return f"{r.slow_member} (in {r.slow_rounds} of {r.member_rounds} rounds{_outliers(r)})"
    if r.slow_outliers:
        return f"none in most rounds ({_outliers(r)[2:]})"
    if r.slow_rounds:
        return f"none in most rounds (one named in {r.slow_rounds} of {r.member_rounds})"
    return "none"


def _outliers(r: LevelResult) -> str:
    """``; outlier, not named: nvme1n1 in 1 of 5 rounds`` (empty without outliers)."""
    named = sorted((r.slow_outliers or {}).items(), key=lambda item: (-item[1], item[0]))
    if not named:
        return ""
    return (f"; outlier{'s' if len(named) > 1 else ''}, not named: "
            + ", ".join(f"{m} in {n} of {r.member_rounds} rounds" for m, n in named))


def _slow_over_level(r: LevelResult) -> str:
    """ZFS: the verdict over the whole level (its rounds may hold too few writes to judge,
    run/zfs.py), how many of the rounds named that member too (a record made before the
    count was kept for that member says none), and the rounds' outliers."""
    verdict = str((r.zfs or {}).get("verdict") or "")
    why = verdict.split(": ", 1)[1] if r.slow_member and ": " in verdict else ""
    counted = r.slow_basis == "level" and r.member_rounds
    if r.slow_member:
        rounds = f"; named in {r.slow_rounds} of {r.member_rounds} rounds" if counted else ""
        return (f"{r.slow_member} (over the whole level{f': {why}' if why else ''}{rounds}"
                f"{_outliers(r)})")
    said = [verdict] if verdict.startswith(UNCLEAR) else []
    if r.slow_outliers:
        said.append(_outliers(r)[2:])
    elif counted and r.slow_rounds:
        said.append(f"the rounds named one member in {r.slow_rounds} of {r.member_rounds}")
    return "none over the whole level" + (f" ({'; '.join(said)})" if said else "")


@dataclass(frozen=True)
class LevelMetric:
    """A figure the levels are compared by, on the rows compared that way (``by``)."""

    key: str  # of LevelRow
    title: str
    digits: int
    lower_is_better: bool
    by: str  # BY_RATE or BY_LATENCY


#: the figures of a level comparison: rates where a test measures rates, latency where it
#: tracks latency (the PTS latency test), each with its direction
METRICS = {m.key: m for m in (
    LevelMetric("iops", "IOPS", 0, False, BY_RATE),
    LevelMetric("mb_s", "MB/s", 1, False, BY_RATE),
    LevelMetric("lat_mean_us", "mean latency (us)", 1, True, BY_LATENCY),
    LevelMetric("lat_p99_us", "p99 latency (us)", 1, True, BY_LATENCY),
)}

Key = tuple[str, str]  # (test, cell id)


def marked_keys(run: RunData, test: TestData) -> set[Key]:
    """The measurements a level's checks mark (docs/consistency.md: its latency is the
    total one, its figures contradict each other, or it measured memory, not the drive):
    the level's checks name them ``test: cell id``."""
    checks = run_checks(run).get(test.name)
    marked = checks.marked if checks is not None else []
    return {(name, cell) for c in marked for name, _, cell in [c.cell.partition(": ")] if cell}


def measurement_labels(rows: Iterable[LevelRow]) -> dict[Key, str]:
    """Each measurement as a reader names it: ``test: 4 KiB 0/100`` (the PTS cell label)
    for a cell id with its block size and mix, else the cell as stored (a preset's "SEQ1M
    Q8T1 read"); the id where two cells of a test would read the same."""
    wanted: dict[Key, str] = {}
    for row in rows:
        named = (row.block_bytes and row.read_pct is not None and " " not in row.cell)
        wanted[(row.test, row.cell)] = (cell_label(row.block_bytes or 0, int(row.read_pct or 0))
                                        if named else row.cell)
    seen = Counter((test, label) for (test, _), label in wanted.items())
    return {(test, cell): f"{test}: {label if seen[(test, label)] == 1 else cell}"
            for (test, cell), label in wanted.items()}


def _compared(levels: list[tuple[TestData, LevelResult]], metric: LevelMetric
              ) -> tuple[list[Key], dict[Key, list[float | None]]]:
    """The measurements compared by ``metric`` in order, and each one's value per level."""
    names = [r.name for _, r in levels]
    values: dict[Key, dict[str, float | None]] = {}
    for _, r in levels:
        for row in r.rows:
            if row.by == metric.by:
                values.setdefault((row.test, row.cell), {})[r.name] = getattr(row, metric.key)
    return list(values), {k: [v.get(name) for name in names] for k, v in values.items()}


def comparison_rows(levels: list[tuple[TestData, LevelResult]], metric: str,
                    marked: Sequence[set[Key]] = ()
                    ) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Header, rows and cell classes of the levels side by side on ``metric`` (a key of
    :data:`METRICS`): one row per measurement compared by it, one column per level, the
    best marked (the lowest latency, the highest rate); ``marked``: each level's
    measurements its checks mark (:func:`marked_keys`), their figures marked ``*``."""
    m = METRICS[metric]
    keys, values = _compared(levels, m)
    labels = measurement_labels(row for _, r in levels for row in r.rows)
    names = [r.name for _, r in levels]
    rows, classes = [], []
    for key in keys:
        got = values[key]
        present = [v for v in got if v is not None]
        best = (min if m.lower_is_better else max)(present) if present else None
        rows.append([esc(labels[key]), *["-" if v is None else num(v, m.digits) + (
            MARK if n < len(marked) and key in marked[n] else "") for n, v in enumerate(got)]])
        classes.append(["", *["sig-up" if v is not None and v == best and len(present) > 1
                              else "" for v in got]])
    return ["measurement", *names], rows, classes


def comparison_page(run: RunData, anchor: str) -> Page:
    levels = levels_of(run)
    body = note("Each measurement of the suite on every level of the same members, from "
                "each level's last round; the best level of each row in green: the highest "
                "IOPS and MB/s, and for a test that tracks latency the lowest mean and p99 "
                "latency. Each level's own run (its report) has every round.")
    summary = [[esc(r.name), esc(r.child_status or t.status), _penalty(r),
                "-" if r.imbalance is None else f"{r.imbalance:.2f}",
                esc(_slow(r)), esc(r.child_run or "-")] for t, r in levels]
    body += "<h3>Levels</h3>" + table(
        ("level", "status", "write penalty (median of rounds)", "imbalance (max)",
         "slow member", "its run"), summary)
    marked = [marked_keys(run, t) for t, _ in levels]
    for m in METRICS.values():
        header, rows, classes = comparison_rows(levels, m.key, marked)
        if rows:
            direction = "lower is better" if m.lower_is_better else "higher is better"
            body += (f"<h3>{esc(m.title)} per level ({direction})</h3>"
                     + table(header, rows, cell_classes=classes))
    names = [r.name for _, r in levels]
    labels = measurement_labels(row for _, r in levels for row in r.rows)
    for m in (METRICS["iops"], METRICS["lat_mean_us"]):
        keys, values = _compared(levels, m)
        if not keys:
            continue
        series = [Series(name, tuple(range(len(keys))), tuple(values[k][i] for k in keys))
                  for i, name in enumerate(names)]
        body += charts(bar_chart(f"{anchor}-{m.key}", f"{m.title} per level",
                                 [labels[k] for k in keys], series, x_label="measurement",
                                 y_label=m.title, y_unit="us" if m.by == BY_LATENCY else m.title))
    if any(r.backend == "btrfs" and r.level in ("raid5", "raid6") for _, r in levels):
        body += banner("warning", BTRFS_PARITY_NOTE)
    return Page(f"{anchor}-compare", "RAID levels compared", body, head_left(run), run.quick)


def level_page(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, LevelResult)
    a = r.array
    pairs: list[tuple[str, object]] = [
        ("array", f"{r.backend} {r.name}"),
        ("backend version", a.get("backend_version") or "-"),
        ("chunk / stripe", format_bytes(int(a.get("chunk_bytes") or 0)) if a else "-"),
        ("usable", format_bytes(int(a.get("usable_bytes") or 0)) if a else "-"),
        ("target", a.get("target") or "-"),
        ("its run", r.child_run or "-"), ("status", r.child_status or test.status),
        ("write penalty", _penalty(r)),
        *([("what ZFS wrote", zfs_figure(r))] if zfs_figure(r) else []),
        ("slow member", _slow(r)),
        ("time", f"{r.seconds:,.0f} s"),
    ]
    body = (banner("failed", r.error) if r.error else "") + kv_table(pairs)
    if r.outcome:
        body += "<h3>Its run's outcome</h3><pre>" + esc("\n".join(r.outcome)) + "</pre>"
    members = a.get("members") if isinstance(a.get("members"), list) else []
    if members:
        body += "<h3>Members</h3>" + table(
            ("device", "model", "serial", "firmware", "size", "write cache"),
            [[esc(m.get("path")), esc(m.get("model") or "-"), esc(m.get("serial") or "-"),
              esc(m.get("firmware") or "-"), esc(format_bytes(int(m.get("capacity_bytes") or 0))),
              esc(_cache_text(m))] for m in members if isinstance(m, dict)])
    if r.written:
        body += "<h3>Written by the level, by each drive's own count</h3>" + note(
            "From each member's health log before and after the level (NVMe Data Units "
            "Written, units of 512,000 bytes; the emulated SSD keeps the same count). NAND "
            "bytes where the drive reports them.") + table(
            ("member", "host bytes written", "resolution", "NAND bytes", "NAND / host"),
            [[esc(w.member), f"{w.host_bytes:,}", esc(format_bytes(w.resolution_bytes)),
              "-" if w.media_bytes is None else f"{w.media_bytes:,}",
              "-" if w.media_bytes is None or not w.host_bytes
              else f"{w.media_bytes / w.host_bytes:.2f}"] for w in r.written])
    body += _member_rounds(r, anchor)
    if r.backend == "btrfs" and r.level in ("raid5", "raid6"):
        body += banner("warning", BTRFS_PARITY_NOTE)
    pages = [Page(anchor, f"Level {r.name}", body, head_left(run), run.quick)]
    first = next((t for t in run.tests if t.name in LEVELS), None)
    if first is not None and first.name == test.name:
        pages.insert(0, comparison_page(run, anchor))
    return pages


def _cache_text(member: dict[str, object]) -> str:
    """A member's write cache: the kernel's view, and the drive's own where it said."""
    state = member.get("write_cache_state")
    sysfs = str(member.get("write_cache") or "-")
    if not isinstance(state, dict) or state.get("enabled") is None:
        return sysfs
    return f"{sysfs}; drive: {'on' if state['enabled'] else 'off'}"


def _member_rounds(r: LevelResult, anchor: str) -> str:
    if not r.members:
        return note("No member statistics were recorded for this level.")
    names = sorted({m.member for m in r.members})
    out = ""
    for attr, title, unit in (("iops", "member IOPS per round", "IOPS"),
                              ("wait_ms", "member mean wait per I/O", "ms"),
                              ("util_pct", "member utilisation", "%")):
        series = []
        for i, name in enumerate(names):
            points = [(m.seq, getattr(m, attr)) for m in r.members if m.member == name]
            series.append(Series(name, tuple(float(x) for x, _ in points),
                                 tuple(y for _, y in points), colour_index=i))
        out += charts(line_chart(f"{anchor}-{attr}", title, series, x_label="round (in order)",
                                 y_label=unit))
    return "<h3>Members per round</h3>" + out


def member_check_page(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, MemberCheckResult)
    again = _measured_again(r)
    head: tuple[str, ...] = ("member", "sequential read MB/s", "4 KiB random read IOPS")
    if again:
        head += ("measured again: MB/s", "measured again: IOPS")
    body = banner("warning" if r.outliers else "reference", r.message) + table(
        (*head, "outlier"),
        [[esc(x.path), num(x.seq_read_mb_s, 1), num(x.rand_read_iops),
          *([_again(x.seq_read_mb_s_again, 1), _again(x.rand_read_iops_again)] if again
            else []), _outlier(x)] for x in r.rows])
    return [Page(anchor, "Member check", body, head_left(run), run.quick)]


def _measured_again(r: MemberCheckResult) -> bool:
    """Whether a member was slow, and the check measured every member again."""
    return any(x.seq_read_mb_s_again is not None or x.rand_read_iops_again is not None
               for x in r.rows)


def _again(value: float | None, places: int = 0) -> str:
    return "" if value is None else num(value, places)


def _outlier(row: MemberCheckRow) -> str:
    return "yes" if row.outlier else "slow once, not again" if row.unconfirmed else ""


# -- ssdlab show, and what ssdlab run prints ---------------------------------------------


def show_level(run: RunData, test: TestData) -> list[str]:
    r = result_of(test, LevelResult)
    lines = [f"  {r.backend} {r.name}: run {r.child_run or '-'} "
             f"({r.child_status or test.status}); write penalty {_penalty(r)}, slow member "
             f"{_slow(r)}"]
    if r.write_method_note:
        lines.append(f"  write method: {r.write_method_note}")
    if zfs_figure(r):
        lines.append(f"  what ZFS wrote: {zfs_figure(r)}")
    if r.error:
        lines.append(f"  error: {r.error}")
    lines += [f"  | {line}" for line in r.outcome]
    labels = measurement_labels(r.rows)
    marked = marked_keys(run, test)
    rates = [x for x in r.rows if x.by == BY_RATE]
    if rates:
        lines += ["  " + line for line in text_table(
            ("measurement", "IOPS", "MB/s"),
            [(labels[(x.test, x.cell)] + _mark(x, marked), num(x.iops), num(x.mb_s, 1))
             for x in rates])]
    latency = [x for x in r.rows if x.by == BY_LATENCY]
    if latency:
        lines += ["  " + line for line in text_table(
            ("measurement", "mean us", "p99 us", "IOPS"),
            [(labels[(x.test, x.cell)] + _mark(x, marked), num(x.lat_mean_us, 1),
              num(x.lat_p99_us, 1), num(x.iops)) for x in latency])]
    return lines


def _mark(row: LevelRow, marked: set[Key]) -> str:
    return MARK if (row.test, row.cell) in marked else ""


def show_member_check(run: RunData, test: TestData) -> list[str]:
    r = result_of(test, MemberCheckResult)
    again = _measured_again(r)
    head: tuple[str, ...] = ("member", "seq read MB/s", "4K rand read IOPS")
    if again:
        head += ("again MB/s", "again IOPS", "outlier")
    return [f"  {r.message}", *("  " + line for line in text_table(
        head,
        [(x.path, num(x.seq_read_mb_s, 1), num(x.rand_read_iops),
          *((_again(x.seq_read_mb_s_again, 1), _again(x.rand_read_iops_again), _outlier(x))
            if again else ())) for x in r.rows]))]


def zfs_figure(r: LevelResult) -> str | None:
    """``6.72 member bytes per host byte written (the docs: 6: ...), 1.37 member writes
    per host write; the pool's own count 52,181,885 bytes, its members' 61,202,432`` for
    a ZFS level whose counts were read (None otherwise)."""
    z = r.zfs or {}
    measured, theory = z.get("member_bytes_per_host_byte"), z.get("theory")
    if not isinstance(measured, int | float) or not isinstance(theory, dict):
        return None
    text = (f"{measured:.2f} member bytes per host byte written (the docs: "
            f"{theory.get('bytes_per_host_byte', 0):g}: {theory.get('why', '')})")
    writes = z.get("member_writes_per_host_write")
    if isinstance(writes, int | float):
        text += f", {writes:.2f} member writes per host write"
    pool, members = z.get("pool_write_bytes"), z.get("member_write_bytes")
    if isinstance(pool, int) and isinstance(members, int):
        text += (f"; bytes written by the pool's own count (zpool iostat) {pool:,}, by the "
                 f"members' /sys/block {members:,}")
    return text


def outcome(run: RunData, store_path: object) -> Outcome:
    levels = levels_of(run)
    lines = [f"matrix {run.run_id} {run.status_text}; results in {store_path}"]
    lines += [f"  {r.name}: {r.child_status or t.status}, run {r.child_run or '-'}"
              + (f"; {zfs_figure(r)}" if zfs_figure(r) else "") for t, r in levels]
    lines.append(f"report: {command()} report {run.run_id}")
    failed = [r.name for t, r in levels if t.status == "failed"]
    if failed:
        return Outcome(tuple(lines), f"level(s) failed: {', '.join(failed)} "
                       f"(see `{command()} show {run.run_id}`)")
    return Outcome(tuple(lines))


PAGES = SuitePages(
    pages={MEMBER_CHECK: member_check_page, **{lv: level_page for lv in LEVELS}},
    show={MEMBER_CHECK: show_member_check, **{lv: show_level for lv in LEVELS}},
    outcome=outcome,
)
