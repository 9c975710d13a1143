"""Parts of the report every suite's pages module may use: chart frames, a run in a few
words (its label, page head, labels, what the drive counted as written), the title page's
generic table of tests, and the text tables of PTS-shaped results (the PTS suite's and the
published references'). Nothing here looks a suite up in the registry: pages modules
import this, and only the dispatchers (``registry.py``) reach the registry.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ssdlab.plan.specs import Mix, block_label
from ssdlab.report import charts as ch
from ssdlab.report import consistency
from ssdlab.report.consistency import memory_cells
from ssdlab.report.figures import result_cells, test_kind, test_title
from ssdlab.report.html import esc, table
from ssdlab.report.text import found_messages, num, text_table
from ssdlab.store.records import RunData, TestData

SMALL = ch.Frame(width=470, height=250, left=58, right=104, top=28, bottom=40)
WIDE = ch.Frame(width=900, height=330, right=170)


# -- a run in a few words -------------------------------------------------------------------


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


def _details(target: dict[str, object], key: str) -> dict[str, object] | None:
    details = target.get("details")
    found = details.get(key) if isinstance(details, dict) else None
    return found if isinstance(found, dict) else None


def nvme_text(target: dict[str, object]) -> str:
    """An NVMe namespace's identity in words: ``namespace 1 of controller 0, LBA format 0
    (512 B data + 0 B metadata), sanitize not supported (sanicap 0)``; "" elsewhere."""
    namespace, ctrl = _details(target, "nvme_namespace"), _details(target, "nvme_id_ctrl")
    if namespace is None:
        return ""
    text = f"namespace {namespace.get('nsid') or '-'}"
    if ctrl is not None and ctrl.get("cntlid") is not None:
        text += f" of controller {ctrl['cntlid']}"
    if namespace.get("lba_format") is not None:
        text += (f", LBA format {namespace['lba_format']} ({namespace.get('lba_data_bytes')}"
                 f" B data + {namespace.get('lba_metadata_bytes')} B metadata)")
    if ctrl is not None and isinstance(ctrl.get("sanicap"), int):
        text += (", sanitize not supported (sanicap 0)" if ctrl["sanicap"] == 0 else
                 f", sanitize supported (sanicap {ctrl['sanicap']:#x})")
    return text


def write_cache_text(target: dict[str, object]) -> str:
    """The write cache as recorded at the start (targets/write_cache.py): ``enabled (the
    drive's volatile write cache feature, NVMe feature 6); the kernel: write back``; ""
    where none was recorded."""
    state = _details(target, "write_cache")
    if state is None:
        return ""
    enabled = state.get("enabled")
    verdict = "unknown" if enabled is None else "enabled" if enabled else "disabled"
    if state.get("nvme_vwc") is not None:
        verdict += " (the drive's volatile write cache feature, NVMe feature 6)"
    elif state.get("ata_write_cache") is not None:
        verdict += " (the drive's, through ata: hdparm -W)"
    elif state.get("scsi_wce") is not None:
        verdict += " (the drive's, through scsi: the caching mode page's WCE)"
    return f"{verdict}; the kernel: {state.get('sysfs') or '-'}"


def labels_text(run: RunData) -> str:
    """The run's ``--label`` pairs, ``controller=H730, cache=wb`` ("" without any)."""
    labels = run.target.get("labels")
    if not isinstance(labels, dict):
        return ""
    return ", ".join(f"{k}={v}" for k, v in labels.items())


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def head_left(run: RunData) -> str:
    device = esc(run_label(run))
    return f"run <b>{esc(run.run_id)}</b> &middot; {device}"


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


def joined(*parts: object, sep: str) -> str:
    """Known parts joined; "-" when none is known (imported reference runs have no host)."""
    known = [str(p) for p in parts if p not in (None, "")]
    return sep.join(known) if known else "-"


def idle_cpus(host: dict[str, object]) -> str:
    """How idle CPUs behaved while fio ran, with the idle driver and governor ("-" for runs
    recorded before ssdlab kept it, and for imported reference runs)."""
    idle = host.get("cpu_idle")
    if not isinstance(idle, dict):
        return "-"
    driver = joined(idle.get("driver"), idle.get("governor"), sep=" / ")
    return f"{idle.get('wakeup_latency') or '-'}; cpuidle driver / governor: {driver}"


def finite(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


# -- the title page's table of tests --------------------------------------------------------


def _outcome(test: TestData) -> str:
    """What a test found, in a line: a suite's transition, verdict, message or error."""
    return (next((m for m in found_messages(test) if m), "")
            or str(test.result.get("error") or ""))


def tests_table(run: RunData, tests: Sequence[TestData]) -> str:
    """The title page's generic table of ``tests`` (those its suite has pages for): each
    one's status, rounds and what it found; "" without any."""
    if not tests:
        return ""
    return "<h3>Tests</h3>" + table(
        ("test", "status", "rounds", "outcome"),
        [[esc(test_title(t)), esc(t.status), str(len(t.rounds)),
          esc(_outcome(t))] for t in tests],
    )


# -- PTS-shaped results as text (the PTS suite's and published references') ----------------


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


def result_table(run: RunData, test: TestData, how: str) -> list[str]:
    """The result table of a PTS test (the throughput tests' one table under the last)."""
    if not result_cells(test):
        return []
    kind = test_kind(test.name)
    if kind == "iops":
        return [f"  IOPS ({how}):", *iops_table(test, memory_cells(run, test))]
    if kind == "latency":
        return ["  latency (window average; max over window):",
                *latency_table(test, memory_cells(run, test))]
    throughput = [t for t in run.tests if test_kind(t.name) == "throughput"]
    if kind == "throughput" and test is throughput[-1]:
        memory = frozenset().union(*(memory_cells(run, t) for t in throughput))
        return [f"  throughput ({how}):", *throughput_table(throughput, memory)]
    return []


def drive_paths_text(target: Mapping[str, object]) -> str:
    """How ssdlab asked the drive for its identity (docs/pts.md, "Purge methods"):
    ``identity through ata (hdparm -I, smartctl -i)``; "" where the run did not record it
    (a file, an older ssdlab). The write cache has its own line (:func:`write_cache_text`)."""
    details = target.get("details")
    path = details.get("identity_path") if isinstance(details, dict) else None
    if not isinstance(path, str):
        return ""
    identify = details.get("identify") if isinstance(details, dict) else None
    commands = identify.get("commands") if isinstance(identify, dict) else None
    used = f" ({', '.join(map(str, commands))})" if isinstance(commands, list) else ""
    return f"identity through {path}{used}"


def purge_text(detail: Mapping[str, object]) -> str:
    """A purge step in a few words: ``blkdiscard through scsi: ok, after scsi-sanitize
    failed``."""
    path = detail.get("path")
    text = f"{detail.get('method')}{f' through {path}' if path else ''}: "
    text += "ok" if detail.get("ok") else "FAILED"
    if detail.get("fallback_from"):
        text += f", after {detail['fallback_from']} failed"
    return text

