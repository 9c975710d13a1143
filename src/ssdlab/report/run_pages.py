"""The pages of one run: its title page (the run, the device, the host, the plan, the
tests and their outcomes, warnings), then each test's pages from its suite's registered
pages module (``report/<suite>_pages.py``: the SNIA pages of a PTS test are in
``pts_pages.py``), found through the registry (``registry.py``). What every suite's pages
share (a run's label and page head ...) is in ``parts.py``."""

from __future__ import annotations

import dataclasses

from ssdlab.plan.specs import Mix, block_label
from ssdlab.plan.transport import transport_text
from ssdlab.report import consistency
from ssdlab.report.hosts_pages import hosts_page
from ssdlab.report.html import Page, banner, esc, kv_table
from ssdlab.report.members_pages import member_rounds, members_page
from ssdlab.report.parts import (
    drive_paths_text,
    head_left,
    idle_cpus,
    is_reference,
    joined,
    labels_text,
    nvme_text,
    run_label,
    when,
    write_cache_text,
    written_text,
)
from ssdlab.report.registry import pages_of, quick_banner
from ssdlab.report.words import plain
from ssdlab.store.records import RunData
from ssdlab.units import format_bytes

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
        *([("NVMe", nvme)] if (nvme := nvme_text(t)) else []),
        *([("write cache", cache)] if (cache := write_cache_text(t)) else []),
        ("capacity", cap_text),
        ("sectors (logical / physical)",
         joined(t.get("logical_sector_bytes"), t.get("physical_sector_bytes"), sep=" / ")
         + (" B" if t.get("logical_sector_bytes") else "")),
        ("NUMA node", t.get("numa_node")),
        ("I/O scheduler", t.get("scheduler")),
        *([("drive", paths)] if (paths := drive_paths_text(t)) else []),
        *([("labels", labels_text(run))] if labels_text(run) else []),
        *_array_rows(t),
        *([("written by the run", written_text(run))] if written_text(run) else []),
    ]


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


def _host(run: RunData) -> list[tuple[str, object]]:
    h = run.host
    memory = h.get("memory_bytes")
    count = h.get("cpu_count")
    return [
        ("host", h.get("hostname")),
        ("CPU", joined(h.get("cpu_model"), f"x{count}" if count else None, sep=" ")),
        ("memory", format_bytes(memory) if isinstance(memory, int) else "-"),
        ("OS / kernel", joined(h.get("os"), h.get("kernel"), sep=" / ")),
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
    suite_pages = pages_of(run)
    if suite_pages is not None and suite_pages.title_table is not None:
        parts.append(suite_pages.title_table(
            run, [t for t in run.tests if suite_pages.pages_of(t.name) is not None]))
    parts.append(consistency.title_section(run))
    warnings = [e for e in run.events if e.kind in ("warning", "error", "skipped")]
    if warnings:
        parts.append("<h3>Warnings</h3><ul>" + "".join(
            f"<li>{esc(e.message)}</li>" for e in warnings) + "</ul>")
    return Page(anchor, f"{run_label(run)}: run {run.run_id}", "".join(parts),
                head_left(run), run.quick)


def run_pages(run: RunData, index: int) -> list[Page]:
    """The title page, then each test's pages and, where the run sampled the member
    devices under its target, the test's members page (report/members_pages.py)."""
    base = f"run{index}"
    pages = [title_page(run, base)]
    members = member_rounds(run.events)
    suite_pages = pages_of(run)
    for n, test in enumerate(run.tests):
        anchor = f"{base}-t{n}"
        maker = suite_pages.pages_of(test.name) if suite_pages is not None else None
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


