"""``ssdlab show``: verdicts and result tables as plain text, laid out like the reviews."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from ssdlab.analysis.predict import LABEL as PREDICTED_LABEL
from ssdlab.errors import command
from ssdlab.plan.specs import Mix, block_label
from ssdlab.plan.transport import transport_text
from ssdlab.report import consistency
from ssdlab.report.hosts_pages import host_header
from ssdlab.report.hosts_pages import show_lines as host_lines
from ssdlab.report.members_pages import member_rounds
from ssdlab.report.members_pages import show_line as members_line
from ssdlab.report.suite import quick_banner
from ssdlab.store.records import RunData, SetData, TestData
from ssdlab.units import format_bytes


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]
    lines = []
    for n, row in enumerate(body):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  " + "  ".join(cells))
        if n == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return lines


#: what ends a text cut to fit its column
CUT = "..."


def clip(text: str, width: int, sep: str = "") -> str:
    """``text`` in at most ``width`` characters; cut, it ends with "...", after the last
    whole item (``sep``-separated) that fits where there is one."""
    if len(text) <= width:
        return text
    room = width - len(CUT)
    if sep:
        kept = ""
        for item in text.split(sep):
            longer = f"{kept}{item}{sep}"
            if len(longer) > room:
                break
            kept = longer
        if kept:
            return kept + CUT
    return text[:room] + CUT


def num(value: Any, digits: int = 0) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}"


def _cells(test: TestData) -> list[dict[str, Any]]:
    cells = test.result.get("cells", []) if isinstance(test.result, dict) else []
    return [c for c in cells if isinstance(c, dict)]


def iops_table(test: TestData, memory: Collection[str] = ()) -> list[str]:
    """The IOPS matrix (``memory``: the ids of cells that measured memory: marked)."""
    cells = _cells(test)
    blocks = sorted({int(c["block_bytes"]) for c in cells}, reverse=True)
    mixes = sorted({int(c["read_pct"]) for c in cells}, reverse=True)
    by_key = {(int(c["block_bytes"]), int(c["read_pct"])): c for c in cells}
    header = ["block size \\ read/write", *[Mix(m).label for m in mixes]]
    rows = [[block_label(b), *[marked(by_key.get((b, m)), "iops", 0, memory) for m in mixes]]
            for b in blocks]
    return text_table(header, rows)


def marked(cell: dict[str, Any] | None, key: str, digits: int,
           memory: Collection[str] = ()) -> str:
    """A cell's figure, with the consistency mark where its cell has one."""
    return num((cell or {}).get(key), digits) + consistency.cell_mark(cell, memory)


def _mib_per_s(cell: dict[str, Any] | None, memory: Collection[str]) -> str:
    value = (cell or {}).get("bw_bytes_per_s")
    text = num(float(value) / 2**20, 1) if isinstance(value, int | float) else "-"
    return text + consistency.cell_mark(cell, memory)


def throughput_table(tests: list[TestData], memory: Collection[str] = ()) -> list[str]:
    rows = []
    for test in tests:
        cells = {int(c["read_pct"]): c for c in _cells(test)}
        if cells:
            block = int(next(iter(cells.values()))["block_bytes"])
            rows.append(
                [
                    f"{block_label(block)} sequential",
                    _mib_per_s(cells.get(100), memory),
                    _mib_per_s(cells.get(0), memory),
                ]
            )
    return text_table(["block size", "read MiB/s", "write MiB/s"], rows) if rows else []


def latency_table(test: TestData, memory: Collection[str] = ()) -> list[str]:
    rows = []
    for c in sorted(_cells(test), key=lambda c: (-int(c["block_bytes"]), -int(c["read_pct"]))):
        rows.append(
            [
                f"{block_label(int(c['block_bytes']))} {Mix(int(c['read_pct'])).label}"
                + consistency.cell_mark(c, memory),
                *[
                    num(c.get(k), 1)
                    for k in (
                        "lat_mean_us",
                        "lat_max_us",
                        "lat_p99_us",
                        "lat_p99_9_us",
                        "lat_p99_99_us",
                    )
                ],
            ]
        )
    return text_table(
        ["cell (1 thread, QD 1)", "mean us", "max us", "p99 us", "p99.9 us", "p99.99 us"], rows
    )


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


def _target_line(t: dict[str, Any]) -> str:
    """What the run ran on: a device or test file, or a directory (the file presets)."""
    head = f"target {t.get('path')} ({t.get('device_class')}): "
    if t.get("kind") == "directory" and "logical_sector_bytes" not in t:
        free = t.get("free_bytes")
        return (head + f"mounted at {t.get('mount_point') or '-'} from {t.get('source') or '-'}"
                f", {format_bytes(free) if isinstance(free, int) else '-'} free at the start")
    if t.get("kind") == "set":
        members = t.get("members") if isinstance(t.get("members"), list) else []
        return (f"target {len(members or [])} member devices {t.get('path')}: model "
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


def verdict_line(test: TestData) -> str:
    primary = test.verdicts.get("primary") if isinstance(test.verdicts, dict) else None
    transition = test.result.get("transition") if isinstance(test.result, dict) else None
    if isinstance(transition, dict) and transition.get("message"):
        extra = str(primary.get("message", "")) if isinstance(primary, dict) else ""
        return f"{transition['message']}" + (f"; {extra}" if extra else "")
    if isinstance(primary, dict) and primary.get("message"):
        return str(primary.get("message", ""))
    if isinstance(test.result, dict) and test.result.get("message"):
        return str(test.result["message"])
    return str(test.result.get("error", test.status)) if isinstance(test.result, dict) else ""


#: parameters worth a line for tests of the other suites, in this order
SUITE_PARAMS = ("round_seconds", "max_rounds", "threads", "iodepth", "block_bytes",
                "waits_s", "bursts", "burst_seconds", "target_latency_us", "op_pcts",
                "amount_bytes", "purge")


def _preset_name(p: dict[str, Any]) -> str | None:
    preset = p.get("preset")
    if isinstance(preset, dict):  # recorded as the preset's identity
        p = preset
        preset = p.get("preset")
    if not preset:
        return None
    return f"preset {preset} v{p.get('preset_version', '?')}"


def params_line(test: TestData) -> str:
    p = test.params
    cells = p.get("cells") or [{}]
    if "rule" not in p or "tracking_set" not in p:  # not a PTS test
        shown = [f"{k.replace('_', ' ')} {p[k]}" for k in SUITE_PARAMS
                 if p.get(k) not in (None, "", [])]
        name = _preset_name(p)
        shown = [name, *shown] if name else shown
        return "  " + ", ".join(shown) if shown else f"  (parameters: see {command()} export)"
    return (
        f"  rule {p.get('rule')} ({p.get('window')}-round window), tracking "
        f"{p.get('tracking_set')}, threads {cells[0].get('threads')} x QD "
        f"{cells[0].get('iodepth')}, {p.get('cell_seconds')} s per cell, "
        f"purge {p.get('purge')}"
    )


def state_text(status: str) -> str:
    """A test's state as ``show`` heads it: a predicted test is not a SNIA steady state."""
    if status == "not_steady":
        return "STEADY STATE NOT REACHED"
    if status == "predicted":
        return f"STEADY STATE NOT REACHED; {PREDICTED_LABEL}"
    return status


def prediction_line(test: TestData) -> str | None:
    """What ``--predict`` stopped on (its message starts with its label), if it did."""
    prediction = test.result.get("prediction") if isinstance(test.result, dict) else None
    if not isinstance(prediction, dict) or not prediction.get("message"):
        return None
    return str(prediction["message"])


def render_run(run: RunData) -> str:
    from ssdlab.suites import find
    lines = header_lines(run) + consistency.header_lines(run)
    suite = find(run.suite)
    pages = suite.pages() if suite is not None else None
    members = member_rounds(run.events)
    checks = consistency.run_checks(run)
    for test in run.tests:
        lines += ["", f"== {test.params.get('title', test.name)} [{state_text(test.status)}]"]
        show = pages.show_of(test.name) if pages is not None else None
        if show is not None:
            lines += show(run, test)
        else:  # a suite unknown here
            lines += [params_line(test), f"  verdict: {verdict_line(test)}"]
        if members.get(test.name):
            lines.append(members_line(members[test.name]))
        lines += consistency.check_lines(checks.get(test.name), test)
        lines += host_lines(run, test)
    if run.quick:
        lines += ["", f"*** {quick_banner([run.suite])} ***"]
    return "\n".join(lines) + "\n"


# -- what ``ssdlab run`` prints when a run ends ---------------------------------------------


def quick_note(run: RunData, what: str = ": not a valid PTS result") -> str:
    return f" (QUICK profile{what})" if run.quick else ""


def run_line(run: RunData, store_path: object, note: str = "") -> str:
    """``run ID STATUS[ (QUICK ...)]; results in STORE``."""
    return f"run {run.run_id} {run.status_text}{note}; results in {store_path}"


def see_line(run: RunData) -> str:
    cmd = command()
    return f"  see them: {cmd} show {run.run_id}    report: {cmd} report {run.run_id} -o DIR"


def failed_tests_error(run: RunData) -> str | None:
    """The one-line error of a run in which tests failed (None: none did)."""
    failed = [t.name for t in run.tests if t.status == "failed"]
    if not failed:
        return None
    return f"test(s) failed: {', '.join(failed)} (see `{command()} show {run.run_id}`)"


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


def _listed(d: dict[str, Any], key: str) -> list[Any]:
    value = d.get(key)
    return value if isinstance(value, list) else []


def _mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
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
        lines.append(f"  {test.params.get('title', test.name)} [{state_text(test.status)}]: "
                     f"{verdict_line(test)}")
    return lines
