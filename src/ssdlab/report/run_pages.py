"""The pages of one run: its title page (the run, the device, the host, the plan, the
tests and their outcomes, warnings), then each test's pages from its suite's registered
pages module (``report/<suite>_pages.py``: the SNIA pages of a PTS test are in
``pts_pages.py``). Also what every suite's pages share: a run's label and page head."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from typing import TYPE_CHECKING

from ssdlab.analysis.predict import LABEL as PREDICTED_LABEL
from ssdlab.plan.pts import PtsResult
from ssdlab.plan.specs import Mix, block_label
from ssdlab.plan.transport import transport_text
from ssdlab.report import charts as ch
from ssdlab.report import consistency
from ssdlab.report.figures import window_rounds
from ssdlab.report.hosts_pages import hosts_page
from ssdlab.report.html import (
    NOT_STEADY_TEXT,
    Page,
    banner,
    esc,
    kv_table,
    table,
)
from ssdlab.report.members_pages import member_rounds, members_page
from ssdlab.report.suite import quick_banner
from ssdlab.report.words import plain
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

if TYPE_CHECKING:
    from ssdlab.report.suite import PageMaker, SuitePages

SMALL = ch.Frame(width=470, height=250, left=58, right=104, top=28, bottom=40)


def is_reference(run: RunData) -> bool:
    return run.read_only


def run_label(run: RunData) -> str:
    """A short name for legends: the device model (or target), and the run's time."""
    details = run.target.get("details")
    in_dir = details.get("dir") if isinstance(details, dict) else None
    where = in_dir.get("path") if isinstance(in_dir, dict) else None  # a file made in --dir
    device = run.target.get("model") or run.target_model or where or run.target.get("path")
    device = str(device or "?")
    if is_reference(run):
        return f"{device} (published)"
    labels = labels_text(run)
    return f"{device.rsplit('/', 1)[-1]} {run.run_id[4:13]}" + (f" [{labels}]" if labels else "")


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def head_left(run: RunData) -> str:
    device = esc(run_label(run))
    return f"run <b>{esc(run.run_id)}</b> &middot; {device}"


# ------------------------------------------------------------------ title page


def _identity(run: RunData) -> list[tuple[str, object]]:
    t = run.target
    capacity = t.get("capacity_bytes")
    cap_text = (
        f"{capacity:,} bytes ({format_bytes(capacity)}, {capacity / 1e9:,.1f} GB)"
        if isinstance(capacity, int) else "-"
    )
    return [
        ("target", t.get("path")),
        ("kind / class", f"{t.get('kind', '-')} / {t.get('device_class', '-')}"),
        *([("network", transport)] if (transport := transport_text(t)) else []),
        ("model", t.get("model")),
        ("serial", t.get("serial")),
        ("firmware", t.get("firmware")),
        ("capacity", cap_text),
        ("sectors (logical / physical)",
         _joined(t.get("logical_sector_bytes"), t.get("physical_sector_bytes"), sep=" / ")
         + (" B" if t.get("logical_sector_bytes") else "")),
        ("NUMA node", t.get("numa_node")),
        ("I/O scheduler", t.get("scheduler")),
        *([("labels", labels_text(run))] if labels_text(run) else []),
        *_array_rows(t),
        *([("written by the run", written_text(run))] if written_text(run) else []),
    ]


def written_by_run(run: RunData) -> tuple[int, int, int | None] | None:
    """What the drive counted as written between the run's first and last health-log
    readings: (host bytes, the count's resolution, NAND bytes or None); None without
    two readings."""
    readings = [e.detail for e in run.events if e.kind == "health" and e.detail]
    if len(readings) < 2:
        return None
    first, last = readings[0], readings[-1]
    host = int(last["host_bytes_written"]) - int(first["host_bytes_written"])
    media = (int(last["media_bytes_written"]) - int(first["media_bytes_written"])
             if last.get("media_bytes_written") is not None
             and first.get("media_bytes_written") is not None else None)
    return host, int(last["resolution_bytes"]), media


def written_text(run: RunData) -> str:
    """``12.3 GB (12,300,480,000 bytes, to 512 kB) by its health log; NAND ... (2.01x)``."""
    written = written_by_run(run)
    if written is None:
        return ""
    host, resolution, media = written
    text = (f"{host / 1e9:,.2f} GB ({host:,} bytes, to {resolution / 1e3:,.0f} kB) by the "
            "drive's own count")
    if media is not None and host > 0:
        text += f"; NAND {media / 1e9:,.2f} GB ({media / host:.2f}x)"
    return text


def labels_text(run: RunData) -> str:
    """The run's ``--label`` pairs, ``controller=H730, cache=wb`` ("" without any)."""
    labels = run.target.get("labels")
    if not isinstance(labels, dict):
        return ""
    return ", ".join(f"{k}={v}" for k, v in labels.items())


def _array_rows(t: dict[str, object]) -> list[tuple[str, object]]:
    """The array ssdlab built that the target is (or is on)."""
    details = t.get("details")
    array = details.get("array") if isinstance(details, dict) else None
    if not isinstance(array, dict):
        return []
    members = array.get("members") if isinstance(array.get("members"), list) else []
    return [
        ("array", f"{array.get('backend')} {array.get('level')}, "
                  f"{format_bytes(int(str(array.get('chunk_bytes') or 0)))} chunk, "
                  f"{format_bytes(int(str(array.get('usable_bytes') or 0)))} usable "
                  f"({array.get('backend_version') or 'version unknown'})"),
        ("array members", "; ".join(
            f"{m.get('path')} {m.get('model') or '-'} {m.get('serial') or '-'} "
            f"write cache {m.get('write_cache') or '-'}"
            for m in (members or []) if isinstance(m, dict))),
    ]


def _joined(*parts: object, sep: str) -> str:
    """Known parts joined; "-" when none is known (imported reference runs have no host)."""
    known = [str(p) for p in parts if p not in (None, "")]
    return sep.join(known) if known else "-"


def idle_cpus(host: dict[str, object]) -> str:
    """How idle CPUs behaved while fio ran, with the idle driver and governor ("-" for runs
    recorded before ssdlab kept it, and for imported reference runs)."""
    idle = host.get("cpu_idle")
    if not isinstance(idle, dict):
        return "-"
    driver = _joined(idle.get("driver"), idle.get("governor"), sep=" / ")
    return f"{idle.get('wakeup_latency') or '-'}; cpuidle driver / governor: {driver}"


def _host(run: RunData) -> list[tuple[str, object]]:
    h = run.host
    memory = h.get("memory_bytes")
    count = h.get("cpu_count")
    return [
        ("host", h.get("hostname")),
        ("CPU", _joined(h.get("cpu_model"), f"x{count}" if count else None, sep=" ")),
        ("memory", format_bytes(memory) if isinstance(memory, int) else "-"),
        ("OS / kernel", _joined(h.get("os"), h.get("kernel"), sep=" / ")),
        ("idle CPUs", idle_cpus(h)),
        ("fio", run.versions.get("fio")),
        ("ssdlab", run.versions.get("ssdlab")),
    ]


def _plan(run: RunData) -> list[tuple[str, object]]:
    options = run.plan.get("options") if isinstance(run.plan.get("options"), dict) else None
    if options is None:
        return [(str(k), plain(v)) for k, v in run.plan.items()]
    shown: list[tuple[str, object]] = []
    for key, value in options.items():
        if key.endswith("block_bytes") and isinstance(value, list):
            value = ", ".join(block_label(int(v)) for v in value)
        elif key.endswith("mixes") and isinstance(value, list):
            value = ", ".join(Mix(int(v)).label for v in value)
        elif isinstance(value, dict) and {"preset", "preset_version"} <= set(value):
            value = f"{value['preset']} version {value['preset_version']}" + (
                f" ({value['preset_title']})" if value.get("preset_title") else "")
        shown.append((key.replace("_", " "), plain(value)))
    return shown


def _test_params(test: TestData) -> list[str]:
    p = test.params
    cells = p.get("cells") or [{}]
    first = cells[0] if isinstance(cells[0], dict) else {}
    purge = next((s.detail for s in test.steps if s.kind == "purge"), None)
    precondition = next((s.detail for s in test.steps if s.kind == "precondition"), None)
    purge_text = (
        f"{purge.get('method')} ({'ok' if purge.get('ok') else 'FAILED'})" if purge else "none"
    )
    pre_text = (
        f"{format_bytes(precondition.get('io_bytes', 0))} of "
        f"{block_label(int(precondition.get('block_bytes', 0)))} sequential writes"
        if precondition else "none"
    )
    return [
        esc(p.get("title", test.name)),
        esc(f"{p.get('rule')} ({p.get('window')} rounds)"),
        esc(p.get("tracking_set", "-")),
        esc(f"{first.get('threads', '-')} x QD {first.get('iodepth', '-')}"),
        esc(f"{p.get('cell_seconds', '-')} s x {len(cells)} cells"),
        esc(purge_text),
        esc(pre_text),
        esc(_status_text(test)),
    ]


def _status_text(test: TestData) -> str:
    rounds = PtsResult.from_json(test.result).rounds_run
    window = window_rounds(test)
    if test.status == "steady" and window:
        return f"steady, rounds {window[0]}-{window[1]} of {rounds}"
    if test.status == "not_steady":
        return f"{NOT_STEADY_TEXT} in {rounds} rounds"
    if test.status == "predicted":
        return f"{NOT_STEADY_TEXT} in {rounds} rounds; {PREDICTED_LABEL}"
    return test.status


def _outcome(test: TestData) -> str:
    """What a test found, in a line: a suite's transition, verdict, message or error."""
    result = test.result
    transition = result.get("transition")
    if isinstance(transition, dict) and transition.get("message"):
        return str(transition["message"])
    primary = test.verdicts.get("primary") if isinstance(test.verdicts, dict) else None
    if isinstance(primary, dict) and primary.get("message"):
        return str(primary["message"])
    return str(result.get("message") or result.get("error") or "")


def title_page(run: RunData, anchor: str) -> Page:
    parts = []
    if is_reference(run):
        parts.append(banner("reference", "Published reference figures, imported read-only: "
                            "no rounds, no steady-state data"))
    parts.append(consistency.title_banners(run))
    parts.append(kv_table([
        ("run", run.run_id),
        ("suite / profile", f"{run.suite} / {run.profile}"),
        ("status", run.status + (f" ({run.message})" if run.message else "")),
        ("started / finished", f"{when(run.created_at)} / {when(run.finished_at)}"),
        ("command", " ".join(run.argv)),
    ]))
    parts.append('<div class="charts two"><div><h3>Device under test</h3>'
                 f"{kv_table(_identity(run))}</div><div><h3>Host and software</h3>"
                 f"{kv_table(_host(run))}</div></div>")
    parts.append(f"<h3>Test parameters</h3>{kv_table(_plan(run))}")
    suite_pages = _suite_pages(run)
    table_kind = suite_pages.title_table if suite_pages is not None else "tests"
    tests = [t for t in run.tests if t.rounds and table_kind == "pts"]
    if tests:
        parts.append("<h3>Tests</h3>" + table(
            ("test", "steady-state rule", "tracking", "threads x QD", "per round",
             "purge", "preconditioning", "outcome"),
            [_test_params(t) for t in tests],
        ))
    others = [t for t in run.tests
              if table_kind == "tests" and _suite_pages_of(run, t) is not None]
    if others:
        parts.append("<h3>Tests</h3>" + table(
            ("test", "status", "rounds", "outcome"),
            [[esc(t.params.get("title", t.name)), esc(t.status), str(len(t.rounds)),
              esc(_outcome(t))] for t in others],
        ))
    parts.append(consistency.title_section(run))
    warnings = [e for e in run.events if e.kind in ("warning", "error", "skipped")]
    if warnings:
        parts.append("<h3>Warnings</h3><ul>" + "".join(
            f"<li>{esc(e.message)}</li>" for e in warnings) + "</ul>")
    return Page(anchor, f"{run_label(run)}: run {run.run_id}", "".join(parts),
                head_left(run), run.quick)



def _suite_pages(run: RunData) -> SuitePages | None:
    """The registered pages of the run's suite (None: a suite this ssdlab does not know)."""
    from ssdlab.suites import find
    suite = find(run.suite)
    return suite.pages() if suite is not None else None


def _suite_pages_of(run: RunData, test: TestData) -> PageMaker | None:
    """The page maker of ``test`` from its suite's registered pages, if it has one."""
    pages = _suite_pages(run)
    return pages.pages_of(test.name) if pages is not None else None


def run_pages(run: RunData, index: int) -> list[Page]:
    """The title page, then each test's pages and, where the run sampled the member
    devices under its target, the test's members page (report/members_pages.py)."""
    base = f"run{index}"
    pages = [title_page(run, base)]
    members = member_rounds(run.events)
    for n, test in enumerate(run.tests):
        anchor = f"{base}-t{n}"
        maker = _suite_pages_of(run, test)
        if maker is not None:
            pages += consistency.with_checks(maker(run, test, anchor), run, test)
        if members.get(test.name):
            pages.append(members_page(run, test, members[test.name], f"{anchor}-members",
                                      head_left(run)))
        hosts = hosts_page(run, test, f"{anchor}-hosts", head_left(run))
        if hosts is not None:
            pages.append(hosts)
    banner_text = quick_banner([run.suite])
    return [dataclasses.replace(p, quick_banner=banner_text) for p in pages]


def finite(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None
