"""``ssdlab show``: verdicts and result tables as plain text, laid out like the reviews:
the run's head, then each test's lines from its suite's registered pages (found through
``registry.py``). The text every suite's lines share is in ``text.py``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from ssdlab.errors import command
from ssdlab.plan.transport import transport_text
from ssdlab.report import consistency
from ssdlab.report.figures import test_title
from ssdlab.report.hosts_pages import host_header
from ssdlab.report.hosts_pages import show_lines as host_lines
from ssdlab.report.members_pages import member_rounds
from ssdlab.report.members_pages import show_line as members_line
from ssdlab.report.parts import drive_paths_text, nvme_text, purge_text, write_cache_text
from ssdlab.report.registry import pages_of, quick_banner
from ssdlab.report.text import num, params_line, state_text, verdict_line
from ssdlab.store.records import RunData, SetData
from ssdlab.units import format_bytes


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _reference_lines(run: RunData) -> list[str]:
    """Where an imported reference run's figures come from (it has no host, no fio)."""
    t, p = run.target, run.plan
    return [
        f"READ-ONLY REFERENCE: figures published in {p.get('source_document')}, imported "
        f"from {p.get('source_file')} ({p.get('imported_rows')} rows) on {_when(run.created_at)}",
        f"device {t.get('model') or '-'}, {num(t.get('capacity_bytes'))} bytes as published",
    ]


def _target_line(t: Mapping[str, object]) -> str:
    """What the run ran on: a device or test file, or a directory (the file presets)."""
    head = f"target {t.get('path')} ({t.get('device_class')}): "
    if t.get("kind") == "directory" and "logical_sector_bytes" not in t:
        free = t.get("free_bytes")
        return (head + f"mounted at {t.get('mount_point') or '-'} from {t.get('source') or '-'}"
                f", {format_bytes(free) if isinstance(free, int) else '-'} free at the start")
    if t.get("kind") == "set":
        members = t.get("members")
        count = len(members) if isinstance(members, list) else 0
        return (f"target {count} member devices {t.get('path')}: model "
                f"{t.get('model') or '-'}, {num(t.get('capacity_bytes'))} bytes in all")
    return (head + f"model {t.get('model') or '-'}, serial {t.get('serial') or '-'}, "
            f"firmware {t.get('firmware') or '-'}, {num(t.get('capacity_bytes'))} bytes, "
            f"sectors {t.get('logical_sector_bytes')}/{t.get('physical_sector_bytes')} B")


def header_lines(run: RunData) -> list[str]:
    t, h = run.target, run.host
    lines = [f"run {run.run_id}  suite {run.suite}  profile {run.profile}  status {run.status}"]
    if run.read_only:
        return lines + _reference_lines(run)
    if run.quick:
        lines.append(f"*** {quick_banner([run.suite])} ***")
    if run.message:
        lines.append(f"note: {run.message}")
    lines.append(f"started {_when(run.created_at)}, finished {_when(run.finished_at)}")
    if run.set_id is not None:
        lines.append(f"one run of set {run.set_id} (several targets at once: {command()} "
                     f"show {run.set_id})")
    lines += [
        _target_line(t),
        *([f"  {transport}"] if (transport := transport_text(t)) else []),
        *([f"  NVMe {nvme}"] if (nvme := nvme_text(t)) else []),
        *([f"  write cache {cache}"] if (cache := write_cache_text(t)) else []),
        *([f"  drive: {paths}"] if (paths := drive_paths_text(t)) else []),
        f"host {h.get('hostname')}: {h.get('cpu_model')} x{h.get('cpu_count')}, "
        f"kernel {h.get('kernel')}; fio {run.versions.get('fio')}, "
        f"ssdlab {run.versions.get('ssdlab')}",
    ]
    lines += host_header(run)
    labels = t.get("labels")
    if isinstance(labels, dict) and labels:
        lines.append("labels: " + ", ".join(f"{k}={v}" for k, v in labels.items()))
    details = t.get("details")
    array = details.get("array") if isinstance(details, dict) else None
    if isinstance(array, dict):
        members = array.get("members") if isinstance(array.get("members"), list) else []
        lines.append(f"array: {array.get('backend')} {array.get('level')} of "
                     f"{len(members or [])} members, chunk {array.get('chunk_bytes')} B "
                     f"({array.get('backend_version') or 'version unknown'})")
    idle = h.get("cpu_idle")
    if isinstance(idle, dict) and idle.get("wakeup_latency"):
        lines.append(f"idle CPUs: {idle['wakeup_latency']}")
    return lines


def render_run(run: RunData) -> str:
    lines = header_lines(run) + consistency.header_lines(run)
    pages = pages_of(run)
    members = member_rounds(run.events)
    checks = consistency.run_checks(run)
    for test in run.tests:
        lines += ["", f"== {test_title(test)} [{state_text(test.status)}]"]
        show = pages.show_of(test.name) if pages is not None else None
        if show is not None:
            lines += show(run, test)
        else:  # a suite unknown here
            lines += [params_line(test), f"  verdict: {verdict_line(test)}"]
        # a drive's purge: how it reached the drive (the parameters say what was asked)
        lines += [f"  purge: {purge_text(step.detail)}" for step in test.steps
                  if step.kind == "purge" and isinstance(step.detail, dict)
                  and step.detail.get("path")]
        if members.get(test.name):
            lines.append(members_line(members[test.name]))
        lines += consistency.check_lines(checks.get(test.name), test)
        lines += host_lines(run, test)
    if run.quick:
        lines += ["", f"*** {quick_banner([run.suite])} ***"]
    return "\n".join(lines) + "\n"


# -- a set of runs (several targets at once, docs/sets.md) ----------------------------------


def render_set(data: SetData, runs: dict[str, RunData]) -> str:
    """``ssdlab show SET``: the set, then one block per target: its run's status and each
    test's primary verdict."""
    detail = data.detail if isinstance(data.detail, dict) else {}
    names = _listed(detail, "names")
    by_place = dict(data.runs)
    lines = [f"set {data.set_id}  suite {data.suite}  {len(data.targets)} targets  "
             f"{len(data.runs)} runs",
             f"started {_when(data.created_at)}, ended {_when(data.finished_at)}",
             "command: " + " ".join(["ssdlab", *data.argv] if data.argv[:1] != ["ssdlab"]
                                    else data.argv)]
    if detail.get("resumed"):
        lines.append(f"resumed {detail['resumed']} time(s)")
    if isinstance(detail.get("fio_runs"), int):
        lines.append(f"fio runs: {detail['fio_runs']}, each shared by the targets still "
                     "running")
    host = detail.get("host")
    if isinstance(host, dict) and host.get("message"):
        lines.append(f"host: {host['message']}")
    numa = _mapping(detail, "numa")
    lines += [f"WARNING: NUMA: {name}: {c.get('message')}" for name, c in numa.items()
              if isinstance(c, dict) and c.get("mismatch")]
    errors = _mapping(detail, "errors")
    for place, target in enumerate(data.targets):
        name = str(names[place]) if place < len(names) else target
        lines += ["", *_set_block(place, name, target, runs.get(by_place.get(place, "")),
                                  errors.get(name))]
    return "\n".join(lines) + "\n"


def _listed(d: Mapping[str, object], key: str) -> list[object]:
    value = d.get(key)
    return value if isinstance(value, list) else []


def _mapping(d: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = d.get(key)
    return value if isinstance(value, dict) else {}


def _set_block(place: int, name: str, target: str, run: RunData | None, error: object
               ) -> list[str]:
    head = f"[{place + 1}] {name} ({target})"
    if run is None:
        return [f"{head}: no run recorded" + (f": {error}" if error else "")]
    quick = " (QUICK)" if run.quick else ""
    lines = [f"{head}: run {run.run_id} {run.status_text}{quick}"]
    for test in run.tests:
        lines.append(f"  {test_title(test)} [{state_text(test.status)}]: "
                     f"{verdict_line(test)}")
    return lines
