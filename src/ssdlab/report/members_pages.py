"""The members page of a test (issue 15: every member, every round), for every suite: what
each member device under the target did per round (IOPS, MB/s, mean wait per I/O,
utilisation) and the write-penalty table, from the run's ``members`` events
(:mod:`ssdlab.plan.member_rounds`). :func:`ssdlab.report.run_pages.run_pages` adds it
after the pages of each test that has them; ``ssdlab show`` prints :func:`show_line`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ssdlab.plan.member_rounds import MemberRound, MemberStat, member_rounds, summarise
from ssdlab.report import charts as ch
from ssdlab.report.figures import test_title
from ssdlab.report.html import Page, charts, esc, kv_table, note, table
from ssdlab.report.scales import fmt_value
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

__all__ = ["BTRFS_PARITY_NOTE", "member_rounds", "members_page", "show_line", "summarise"]

FRAME = ch.Frame(width=470, height=250, left=58, right=104, top=28, bottom=40)

BTRFS_PARITY_NOTE = (
    "btrfs RAID 5/6 does read-modify-write on 64 KiB per-device stripes and is flagged by "
    "btrfs itself as not for production; the measured penalty differs from the textbook's")
ZFS_RAIDZ_NOTE = (
    "ZFS raidz writes whole variable-width stripes, not read-modify-write: no textbook "
    "small-write penalty applies; expect about one member's random IOPS per vdev instead")
PENALTY_NOTE = (
    "Write penalty: every member's reads and writes, less one member read per host read, "
    "per host write, over the same fio run (the textbook values are for small random "
    "writes: RAID 0 1, RAID 1 and 10 2, RAID 5 4, RAID 6 6). Large host writes are split "
    "into several member I/Os by the block layer, which inflates the count; bytes per "
    "host byte (member bytes moved less host bytes read, per host byte written) shows "
    "their cost. Imbalance: most I/Os on a member over fewest.")
#: said where rounds had a warm-up (fio's ramp_time)
RAMP_NOTE = (
    "These fio runs warmed up first (ramp_time), whose I/Os fio does not report: the "
    "members are counted from the first reading after the warm-up to the end of the run, "
    "and the host's I/Os scaled to that window (its seconds over fio's measured seconds).")


def _backend(run: RunData) -> str | None:
    details = run.target.get("details")
    array = details.get("array") if isinstance(details, dict) else None
    backend = array.get("backend") if isinstance(array, dict) else None
    return backend if isinstance(backend, str) else None


def _series(rounds: Sequence[MemberRound], names: Sequence[str],
            value: Callable[[MemberStat], float | None],
            tip: Callable[[MemberStat], str]) -> list[ch.Series]:
    """One series per member over the rounds (a gap where a round lacks the member)."""
    out = []
    for k, name in enumerate(names):
        xs, ys, tips = [], [], []
        for r in rounds:
            m = next((m for m in r.members if m.name == name), None)
            xs.append(float(r.round_no))
            ys.append(value(m) if m is not None else None)
            tips.append(f"{name}: {r.label}: {tip(m)}" if m is not None else "")
        out.append(ch.Series(name, tuple(xs), tuple(ys), colour_index=k, tips=tuple(tips)))
    return out


def _iops(m: MemberStat) -> float:
    p = m.period()
    return p.read_iops + p.write_iops


def _mb_s(m: MemberStat) -> float:
    p = m.period()
    return p.read_mb_s + p.write_mb_s


def _charts(anchor: str, rounds: Sequence[MemberRound], names: Sequence[str]) -> str:
    def chart(key: str, title: str, y_label: str, unit: str,
              value: Callable[[MemberStat], float | None],
              tip: Callable[[MemberStat], str]) -> str:
        return ch.line_chart(f"{anchor}-{key}", title, _series(rounds, names, value, tip),
                             x_label="round", y_label=y_label, y_unit=unit, frame=FRAME,
                             y_log=False)

    return charts(
        chart("iops", "IOPS per member (read + write)", "IOPS", "IOPS", _iops,
              lambda m: f"{fmt_value(m.period().read_iops, 0)} read + "
                        f"{fmt_value(m.period().write_iops, 0)} write IOPS"),
        chart("mbs", "MB/s per member (read + write)", "MB/s", "MB/s", _mb_s,
              lambda m: f"{m.period().read_mb_s:,.1f} read + "
                        f"{m.period().write_mb_s:,.1f} write MB/s"),
        chart("wait", "Mean wait per I/O", "ms", "ms", lambda m: m.period().mean_wait_ms,
              lambda m: f"{fmt_value(m.period().mean_wait_ms)} ms per I/O "
                        f"({m.reads + m.writes:,} I/Os)"),
        chart("util", "Utilisation", "% of the round busy", "%",
              lambda m: m.period().utilisation_pct,
              lambda m: f"{m.period().utilisation_pct:.1f} % busy"),
        two=True)


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _penalty_rows(rounds: Sequence[MemberRound]) -> list[list[str]]:
    rows = []
    for r in rounds:
        size = r.mean_host_write_bytes
        writes = f"{r.host_writes:,}" + (f" x {format_bytes(round(size))}" if size else "")
        rows.append([esc(r.label.removeprefix("round ").removeprefix("rounds ")),
                     esc(r.phase), f"{r.host_reads:,}", esc(writes), f"{r.member_ios:,}",
                     _num(r.write_penalty), _num(r.byte_penalty),
                     "-" if r.textbook is None else f"{r.textbook:g}", _num(r.imbalance),
                     esc(r.slow_member or "-")])
    return rows


def members_page(run: RunData, test: TestData, rounds: Sequence[MemberRound], anchor: str,
                 head: str) -> Page:
    """The members page of ``test`` (its ``rounds`` from :func:`member_rounds`); ``head``
    the page head's left part."""
    summary = summarise(rounds)
    backend = _backend(run)
    level = summary.level
    body = kv_table([
        ("members", ", ".join(summary.members)),
        ("level", f"{level}" + (f" ({backend})" if backend else "") if level else
         "unknown (not an array ssdlab built)"),
        ("rounds sampled", f"{summary.rounds}"),
        ("summary", summary.message.split(": ", 1)[-1]),
    ])
    if backend == "btrfs" and level in ("raid5", "raid6"):
        body += note(BTRFS_PARITY_NOTE)
    if backend == "zfs" and level in ("raid5", "raid6"):
        body += note(ZFS_RAIDZ_NOTE)
    body += _charts(anchor, rounds, summary.members)
    ramped = any(r.host_seconds is not None or r.note is not None for r in rounds)
    body += "<h3>Write penalty</h3>" + note(PENALTY_NOTE) + (
        note(RAMP_NOTE) if ramped else "") + table(
        ("round", "phase", "host reads", "host writes", "member I/Os", "I/Os per host write",
         "bytes per host byte", "textbook", "imbalance", "slow member"),
        _penalty_rows(rounds))
    return Page(anchor, f"Members: {test_title(test)}", body, head, run.quick)


def show_line(rounds: Sequence[MemberRound]) -> str:
    """``ssdlab show``'s line of a test's member rounds."""
    return f"  {summarise(rounds).message}"
