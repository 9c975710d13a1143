"""What a run's session reads beside fio, and keeps with the run: the drive's own count of
bytes written (its health log) at the start, on resume and at the end, and the emulated
SSD's ground truth (on several hosts, each host's). :class:`~ssdlab.run.session.RunSession`
calls these (its methods of the same names).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, cast

from ssdlab.errors import TargetError
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan.results import HealthCount, HealthEvent, HostTruthEvent
from ssdlab.run.hosts import HOST_TRUTH_KIND
from ssdlab.run.remote import RemoteSet
from ssdlab.store.db import Store
from ssdlab.targets.emulator import Emulator
from ssdlab.targets.emulator import stats as emulator_stats
from ssdlab.targets.health import read_health
from ssdlab.targets.identity import TargetInfo

#: events that keep the drive's health-log count of bytes written
HEALTH_KIND = "health"


class Session(Protocol):
    """What of the run's session these read and write."""

    info: TargetInfo
    store: Store
    run_id: str
    remote: RemoteSet | None
    emulator: Emulator | None


#: the emulated SSDs' counters a run on several hosts sums (the set's write amplification)
SUMMED_COUNTERS = ("host_write_bytes", "nand_write_bytes")


def health(s: Session, when: str) -> None:
    """Keep the drive's own count of bytes written (its health log: NVMe, the emulated
    SSD) at the start, on resume and at the end: what the run wrote, by the drive."""
    if s.remote is not None:
        return  # each host's health log is in its ground truth (host-truth events)
    try:
        reading = read_health(s.info.path, s.info.details)
    except (TargetError, ValueError) as err:
        s.store.add_event(s.run_id, None, "warning",
                          f"the drive's health log cannot be read ({err})", None)
        return
    if reading is None:
        return
    s.store.add_event(
        s.run_id, None, HEALTH_KIND,
        f"health log at {when}: {reading.host_bytes_written:,} bytes written "
        f"({reading.source})", HealthEvent(when, HealthCount(**dataclasses.asdict(reading))))


def ground_truth(s: Session, test: str | None, when: str) -> dict[str, Any] | None:
    """On the emulated SSD, keep its ground truth (WA, GC, free blocks) with the run."""
    if s.remote is not None:
        return _hosts_truth(s, test, when)
    if s.emulator is None:
        return None
    truth = emulator_stats(s.emulator)
    counters = truth.get("counters")
    waf = counters.get("write_amplification") if isinstance(counters, dict) else None
    s.store.add_event(  # the emulator's own document (JSON it wrote), kept verbatim
        s.run_id, test, "emulator-stats",
        f"emulator ground truth after {when}: write amplification {waf}",
        cast(JsonObject, truth))
    return truth


def _hosts_truth(s: Session, test: str | None, when: str) -> dict[str, Any] | None:
    """On several hosts: each host's emulator ground truth and health log, one event; the
    set's write counters (every host's summed, when every host is an emulated SSD)."""
    assert s.remote is not None
    truths = s.remote.truth()
    s.store.add_event(s.run_id, test, HOST_TRUTH_KIND,
                      f"ground truth of {len(truths)} hosts after {when}",
                      HostTruthEvent(when, truths))
    summed: dict[str, int] = {}
    for found in truths:
        counters = (found.truth.emulator or {}).get("counters")
        for name in SUMMED_COUNTERS:
            value = counters.get(name) if isinstance(counters, dict) else None
            if not isinstance(value, int):
                return None
            summed[name] = summed.get(name, 0) + value
    return {"counters": summed} if summed else None
