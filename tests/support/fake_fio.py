"""A fake fio executor for orchestration tests: it synthesizes fio JSON for every job
section of the job file from a model, and runs it through the real parser."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioInterrupted, FioRun, TickFn
from ssdlab.targets.topology import StatSnapshot, parse_proc_stat

#: (cell name, round index starting at 1) -> IOPS
Model = Callable[[str, int], float]


def _sections(job_text: str) -> list[dict[str, str]]:
    sections: list[dict[str, str]] = []
    for line in job_text.splitlines():
        head = re.match(r"^\[(.+)\]$", line.strip())
        if head:
            sections.append({"name": head.group(1)})
        elif "=" in line and sections and not line.startswith(";"):
            key, value = line.split("=", 1)
            sections[-1][key.strip()] = value.strip()
    return [s for s in sections if s["name"] != "global"]


def _direction(iops: float, block: int, lat_us: float) -> dict[str, object]:
    ios = int(iops)
    lat_ns = lat_us * 1000
    pct = {
        "50.000000": lat_ns,
        "99.000000": lat_ns * 2,
        "99.900000": lat_ns * 3,
        "99.990000": lat_ns * 4,
    }
    stats = {"min": lat_ns / 2, "max": lat_ns * 5, "mean": lat_ns, "stddev": lat_ns / 10, "N": ios}
    return {
        "io_bytes": ios * block,
        "io_kbytes": ios * block // 1024,
        "bw_bytes": ios * block,
        "bw": ios * block // 1024,
        "iops": iops,
        "runtime": 1000 if ios else 0,
        "total_ios": ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": {**stats, **({"percentile": pct} if ios else {})},
        "lat_ns": stats,
    }


def _job(section: dict[str, str], iops: float) -> dict[str, object]:
    block = int(section.get("bs", "4096"))
    rw = section.get("rw", "randread")
    read_share = {"randread": 1.0, "read": 1.0, "randwrite": 0.0, "write": 0.0}.get(
        rw, int(section.get("rwmixread", "50")) / 100
    )
    lat_us = 1e6 / max(iops, 1.0)
    return {
        "jobname": section["name"],
        "groupid": 0,
        "error": 0,
        "job options": {},
        "read": _direction(iops * read_share, block, lat_us),
        "write": _direction(iops * (1 - read_share), block, lat_us),
        "trim": _direction(0, block, 0),
        "job_runtime": 1000,
        "usr_cpu": 1.0,
        "sys_cpu": 2.0,
    }


@dataclass
class FakeFio:
    model: Model
    #: round indexes (1-based, counting round runs) at which fio "fails"
    fail_rounds: set[int] = field(default_factory=set)
    #: round index at which the user presses Ctrl-C
    interrupt_round: int | None = None
    calls: list[str] = field(default_factory=list)
    rounds: int = 0

    def run(
        self,
        job_text: str,
        timeout_s: float,
        *,
        json_plus: bool = False,
        on_tick: TickFn | None = None,
    ) -> FioRun:
        self.calls.append(job_text)
        sections = _sections(job_text)
        is_round = not any(s["name"].startswith("wipc") for s in sections)
        if is_round:
            self.rounds += 1
            if self.rounds == self.interrupt_round:
                raise FioInterrupted()
        now = time.time()
        if is_round and self.rounds in self.fail_rounds:
            return FioRun(
                job_text,
                ("fake-fio",),
                "",
                "fio: io_u error on file: EIO",
                1,
                now,
                now,
                False,
                None,
                "fio exited with status 1: fio: io_u error",
            )
        doc = {
            "fio version": "fio-3.33",
            "jobs": [_job(s, self.model(s["name"], self.rounds)) for s in sections],
        }
        stdout = json.dumps(doc)
        return FioRun(
            job_text, ("fake-fio",), stdout, "", 0, now, now, False, parse_fio_output(stdout), None
        )


# -- latency against queue depth (latency-vs-IOPS ladders) ----------------------------


@dataclass(frozen=True)
class QueueDevice:
    """A device whose latency grows with the outstanding I/O (Little's law, one ceiling).

    Up to ``max_iops * base_us / 1e6`` outstanding I/Os every I/O takes ``base_us``; past
    that IOPS stays at ``max_iops`` and the mean latency is ``outstanding / max_iops``.
    """

    base_us: float = 100.0
    max_iops: float = 50_000.0

    def iops(self, outstanding: int) -> float:
        return min(self.max_iops, outstanding * 1e6 / self.base_us)

    def latency_us(self, outstanding: int) -> float:
        return outstanding * 1e6 / self.iops(outstanding)


def _queue_job(section: dict[str, str], device: QueueDevice) -> dict[str, object]:
    threads = int(section.get("numjobs", "1"))
    outstanding = threads * int(section.get("iodepth", "1"))
    job = _job(section, device.iops(outstanding))
    lat_us = device.latency_us(outstanding)
    block = int(section.get("bs", "4096"))
    for direction in ("read", "write"):
        stats = job[direction]
        assert isinstance(stats, dict)
        job[direction] = _direction(float(stats["iops"]), block, lat_us)
    return job


@dataclass
class QueueFakeFio:
    """An executor for ladder tests: each job's IOPS and latency from a QueueDevice.

    ``fail_calls`` and ``interrupt_call`` count every invocation from 1 (preconditioning
    included); ``points`` records (threads, iodepth) of each time-based job run. ``again``:
    the device the peak finder's second probes of a point (job files of a probe ``..., again``)
    meet, as if the drive had slowed between the probe and the re-test.
    """

    device: QueueDevice = field(default_factory=QueueDevice)
    again: QueueDevice | None = None
    fail_calls: set[int] = field(default_factory=set)
    interrupt_call: int | None = None
    calls: list[str] = field(default_factory=list)
    points: list[tuple[int, int]] = field(default_factory=list)

    @property
    def outstanding(self) -> int:
        """Outstanding I/O of the job running now (or last)."""
        return self.points[-1][0] * self.points[-1][1] if self.points else 0

    def run(
        self,
        job_text: str,
        timeout_s: float,
        *,
        json_plus: bool = False,
        on_tick: TickFn | None = None,
    ) -> FioRun:
        self.calls.append(job_text)
        sections = _sections(job_text)
        for s in sections:
            if "runtime" in s:
                self.points.append((int(s.get("numjobs", "1")), int(s.get("iodepth", "1"))))
        call = len(self.calls)
        if call == self.interrupt_call:
            raise FioInterrupted()
        now = time.time()
        if call in self.fail_calls:
            return FioRun(job_text, ("fake-fio",), "", "fio: io_u error on file: EIO", 1, now,
                          now, False, None, "fio exited with status 1: fio: io_u error")
        device = self.again if self.again is not None and ", again" in job_text \
            else self.device
        doc = {"fio version": "fio-3.33",
               "jobs": [_queue_job(s, device) for s in sections]}
        stdout = json.dumps(doc)
        return FioRun(job_text, ("fake-fio",), stdout, "", 0, now, now, False,
                      parse_fio_output(stdout), None)


class FakeProcStat:
    """``/proc/stat`` readings of a host whose busy share is ``busy_pct()`` at each reading.

    Every reading advances the clock by 100 ticks per CPU, ``busy_pct()`` percent of them
    busy (two thirds user, one third system).
    """

    def __init__(self, busy_pct: Callable[[], float], cpus: int = 2) -> None:
        self.busy_pct = busy_pct
        self.cpus = cpus
        self.times = [[0] * 8 for _ in range(cpus)]

    def __call__(self) -> StatSnapshot:
        busy = round(self.busy_pct())
        for t in self.times:
            t[0] += busy * 2 // 3
            t[2] += busy - busy * 2 // 3
            t[3] += 100 - busy
        total = [sum(col) for col in zip(*self.times, strict=True)]
        lines = ["cpu " + " ".join(map(str, total))]
        lines += [f"cpu{i} " + " ".join(map(str, t)) for i, t in enumerate(self.times)]
        return parse_proc_stat("\n".join(lines))
