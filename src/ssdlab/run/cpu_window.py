"""Host-wide CPU use over the measured period of one fio run (methodology 1.9).

A fio run of a latency-vs-IOPS point warms up first (ramp_time) and is measured after;
the host's CPU use that matters is the measured period's. ``/proc/stat`` is read before
fio starts, at the first progress tick after the warm-up (plus fio's start-up), and after
fio ends. Without such a tick (a short run, a fake executor) the whole run is the window,
and the reading says so.
"""

from __future__ import annotations

from collections.abc import Callable

from ssdlab.targets.topology import StatSnapshot, busiest_cpu_pct, host_cpu_usage

#: fio's start-up before its ramp begins; host CPU is read from this long after the warm-up
FIO_STARTUP_S = 0.2


#: a fio run's cell on targets of other hosts (docs/hosts.md): the coordinator's CPU is not
#: theirs, so none is read (and host-bound points are not judged)
ON_HOSTS_CPU: dict[str, object] = {
    "host_cpu_pct": None, "host_usr_pct": None, "host_sys_pct": None,
    "host_steal_pct": None, "host_cpu_busiest_pct": None, "host_cpu_window_s": 0.0,
    "host_cpu_window": "not measured: the targets are on other hosts"}


class CpuWindow:
    """Host CPU over one fio run's measured period, from ``/proc/stat`` readings."""

    def __init__(self, read: Callable[[], StatSnapshot], measure_from_s: float) -> None:
        self.read = read
        self.measure_from_s = measure_from_s
        self.first = read()
        self.start: tuple[float, StatSnapshot] | None = None

    def tick(self, elapsed_s: float) -> None:
        """fio has run ``elapsed_s``: the measured period starts at the first tick past
        the warm-up."""
        if self.start is None and elapsed_s >= self.measure_from_s:
            self.start = (elapsed_s, self.read())

    def finish(self, wall_s: float, cpus: frozenset[int]) -> dict[str, object]:
        """fio ended after ``wall_s``: the host's CPU use over the window (the round
        cell's ``host_*`` metrics; the busiest of ``cpus``, those fio may run on)."""
        end = self.read()
        begin = self.start[1] if self.start else self.first
        usage = host_cpu_usage(begin, end)
        return {
            "host_cpu_pct": None if usage is None else usage.busy_pct,
            "host_usr_pct": None if usage is None else usage.usr_pct,
            "host_sys_pct": None if usage is None else usage.sys_pct,
            "host_steal_pct": None if usage is None else usage.steal_pct,
            "host_cpu_busiest_pct": busiest_cpu_pct(begin, end, cpus),
            "host_cpu_window_s": max(0.0, wall_s - self.start[0]) if self.start else wall_s,
            "host_cpu_window": "measured period" if self.start else "whole fio run",
        }
