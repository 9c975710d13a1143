"""What a run does differently on an NBD export (targets/nbd.py): the purge.

An export has no secure erase. ssdlab trims the active range through fio's own nbd engine
(``rw=trim``: NBD_CMD_TRIM, which the server passes on as a discard, a hole punched in a
file, or whatever its plugin does) when the export says it can trim; otherwise the purge
fails with the reason and the run warns that the test does not start fresh-out-of-box.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import Executor, watchdog_seconds
from ssdlab.plan.specs import KIB, MIB, FioJob, JobSection
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.nbd import NBD_ENGINE
from ssdlab.targets.purge import PurgeOutcome
from ssdlab.units import format_bytes

METHOD = "nbd-trim"
#: trims of the largest of these that divides the range, few at a time: fio allocates
#: buffers of the block size for every I/O in flight, trims included
TRIM_BLOCKS = (16 * MIB, MIB, 64 * KIB, 4 * KIB, 512)
TRIM_DEPTH = 4
#: a trim slower than this is presumed stuck (the watchdog)
MIN_TRIM_BYTES_PER_S = 64 * MIB


def can_trim(info: TargetInfo) -> bool:
    network = info.details.get("network")
    caps = network.get("capabilities") if isinstance(network, dict) else None
    return isinstance(caps, dict) and caps.get("can_trim") is True


def trim_block(size_bytes: int) -> int:
    return next(b for b in TRIM_BLOCKS if size_bytes % b == 0)


def trim_job(info: TargetInfo, offset_bytes: int, size_bytes: int, version: str) -> str:
    """The job file that trims the range through fio's nbd engine."""
    bs = trim_block(size_bytes)
    section = JobSection("purge-trim", (("rw", "trim"), ("bs", str(bs)),
                                        ("iodepth", str(TRIM_DEPTH)),
                                        ("offset", str(offset_bytes)),
                                        ("size", str(size_bytes))))
    job = FioJob(info.path, (), NBD_ENGINE, sections=(section,))
    return render(job, f"ssdlab {version}: purge by trim\ntarget {info.path} (nbd)")


def trimmed_bytes(documents: Sequence[Mapping[str, object]]) -> int:
    """What fio reports it trimmed (its JSON's ``trim`` direction, which the parser's
    typed results leave out)."""
    total = 0
    for doc in documents:
        jobs = doc.get("jobs")
        for job in jobs if isinstance(jobs, list) else []:
            trim = job.get("trim") if isinstance(job, dict) else None
            value = trim.get("io_bytes") if isinstance(trim, dict) else None
            total += value if isinstance(value, int) else 0
    return total


def purge_nbd(info: TargetInfo, method: str, offset_bytes: int, size_bytes: int,
              executor: Executor, version: str) -> PurgeOutcome:
    """Trim the range (``auto``), or nothing (``none``); a failed outcome says why."""
    if method == "none":
        return PurgeOutcome("none", True, 0.0, None, "no purge requested")
    if not can_trim(info):
        return PurgeOutcome(METHOD, False, 0.0, None,
                            f"{info.path} does not support trim (nbdinfo: can_trim is not "
                            "true) and has no other erase; nothing was run")
    text = trim_job(info, offset_bytes, size_bytes, version)
    started = time.monotonic()
    run = executor.run(text, watchdog_seconds(size_bytes / MIN_TRIM_BYTES_PER_S),
                       json_plus=False)
    seconds = time.monotonic() - started
    trimmed = trimmed_bytes(run.output.documents) if run.output else 0
    if not run.ok:
        return PurgeOutcome(METHOD, False, seconds, run.command, f"fio: {run.error}")
    detail = (f"trimmed {format_bytes(trimmed)} at offset {offset_bytes} in "
              f"{format_bytes(trim_block(size_bytes))} trims through fio's nbd engine")
    return PurgeOutcome(METHOD, trimmed == size_bytes, seconds, run.command,
                        detail if trimmed == size_bytes else
                        f"fio trimmed {trimmed} of {size_bytes} bytes")
