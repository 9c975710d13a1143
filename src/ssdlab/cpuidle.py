"""Idle CPUs and latency: what the host's CPUs do while they wait for I/O.

While fio waits for a completion its CPU goes idle. An idle CPU enters a sleep state
(a C-state on bare metal; on a virtual machine the vCPU halts and the hypervisor
deschedules it), and waking it again adds that state's exit latency to the I/O's
measured latency: tens to hundreds of microseconds from deep C-states, up to
milliseconds for a halted vCPU on a busy hypervisor. It matters most where the CPUs
idle most: QD1 latency and the low-rate points of a rate curve, which then measure the
host's power management rather than the drive (seen here: a 10 %-rate point of a
curve at 4.7 ms mean against 2.7 ms at the full rate).

cyclictest, rtla and tuned's latency-performance profile avoid this the way the kernel
documents for it (Documentation/power/pm_qos_interface.rst): a process writes a wake-up
latency limit of 0 us to ``/dev/cpu_dma_latency`` and keeps the file open; idle CPUs
then poll instead of sleeping, until the file is closed (by the kernel too, when the
process dies). ssdlab does the same while fio runs, by default; ``SSDLAB_CPU_IDLE=system``
leaves the host's idle policy alone. Either way the run records which it was, with the
idle driver and governor (:func:`idle_facts`).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ssdlab.errors import UserError

QOS_DEVICE = Path("/dev/cpu_dma_latency")
SYSFS_CPU = Path("/sys/devices/system/cpu")
#: how idle CPUs behave while fio runs: "poll" (ssdlab holds the limit at 0 us) or
#: "system" (the host's own policy)
POLICY_ENV = "SSDLAB_CPU_IDLE"
POLICIES = ("poll", "system")
DEFAULT_POLICY = "poll"


def policy(environ: Mapping[str, str] = os.environ) -> str:
    """The idle policy asked for in ``$SSDLAB_CPU_IDLE`` (default ``poll``)."""
    value = environ.get(POLICY_ENV, "").strip().lower() or DEFAULT_POLICY
    if value not in POLICIES:
        raise UserError(f"{POLICY_ENV}={environ[POLICY_ENV]!r}: give 'poll' (idle CPUs poll "
                        "while fio runs, the default) or 'system' (the host's own policy)")
    return value


@dataclass
class WakeupLatencyHold:
    """The 0 us wake-up latency limit, held while the object is entered (when it can be)."""

    device: Path = QOS_DEVICE
    held: bool = False
    #: why it is not held (None while held, or before entering)
    reason: str | None = None
    _fd: int | None = None

    def __enter__(self) -> WakeupLatencyHold:
        try:
            fd = os.open(self.device, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as err:
            self.reason = f"{self.device}: {err.strerror or err}"
            return self
        try:
            os.write(fd, struct.pack("i", 0))
        except OSError as err:
            os.close(fd)
            self.reason = f"{self.device}: {err.strerror or err}"
            return self
        self._fd, self.held, self.reason = fd, True, None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self.held = None, False


@contextlib.contextmanager
def idle_policy(chosen: str) -> Iterator[WakeupLatencyHold | None]:
    """Hold the 0 us limit for the block under the ``poll`` policy; nothing under ``system``."""
    if chosen != "poll":
        yield None
        return
    with WakeupLatencyHold() as hold:
        yield hold


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def idle_states(sysfs_cpu: Path = SYSFS_CPU) -> list[dict[str, object]]:
    """CPU 0's idle states: name and exit latency in microseconds, shallowest first."""
    states: list[dict[str, object]] = []
    for state in sorted((sysfs_cpu / "cpu0" / "cpuidle").glob("state[0-9]*"),
                        key=lambda p: int(p.name[5:])):
        latency = _read(state / "latency")
        states.append({"name": _read(state / "name"),
                       "exit_latency_us": int(latency) if latency and latency.isdigit()
                       else None,
                       "disabled": _read(state / "disable") == "1"})
    return states


def idle_facts(chosen: str, *, sysfs_cpu: Path = SYSFS_CPU,
               device: Path = QOS_DEVICE) -> dict[str, object]:
    """What a run records of idle CPUs: the policy, whether the limit can be held (None
    under ``system``), in words, the idle driver and governor, and the idle states."""
    if chosen == "poll":
        # can the limit be held? (the device is root-only; opening it for a moment is the
        # only honest test, and closing it at once restores the host's own limit)
        with WakeupLatencyHold(device) as probe:
            held: bool | None = probe.held
            wakeup = (f"poll while fio runs (0 us wake-up latency limit held on {device})"
                      if probe.held else
                      f"may sleep: the 0 us limit could not be held ({probe.reason})")
    else:
        held = None
        wakeup = f"the host's own idle policy ({POLICY_ENV}=system)"
    return {
        "policy": chosen,
        "held": held,
        "wakeup_latency": wakeup,
        "driver": _read(sysfs_cpu / "cpuidle" / "current_driver"),
        "governor": _read(sysfs_cpu / "cpuidle" / "current_governor")
        or _read(sysfs_cpu / "cpuidle" / "current_governor_ro"),
        "states": idle_states(sysfs_cpu),
    }
