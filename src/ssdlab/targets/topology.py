"""Host CPU use and where the device sits: ``/proc/stat`` times, CPU lists, affinity,
NUMA nodes and the device's PCIe attachment (methodology 1.9). Reading only."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ssdlab.targets.identity import PROC, SYSFS, block_dir, read_attr, whole_disk_of

_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True)
class CpuTimes:
    """One ``cpu`` line of ``/proc/stat``, in clock ticks (guest time is inside user)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return (self.user + self.nice + self.system + self.idle + self.iowait + self.irq
                + self.softirq + self.steal)


@dataclass(frozen=True)
class CpuUsage:
    """Shares of all CPU time between two ``/proc/stat`` readings, in percent."""

    busy_pct: float  # everything but idle and iowait
    usr_pct: float  # user + nice
    sys_pct: float  # system + irq + softirq
    steal_pct: float


#: "cpu" (all CPUs) and "cpu0", "cpu1" ... -> their times
StatSnapshot = dict[str, CpuTimes]


def parse_proc_stat(text: str) -> StatSnapshot:
    out: StatSnapshot = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or not fields[0].startswith("cpu"):
            continue
        numbers = [int(v) for v in fields[1:9]] + [0] * max(0, 9 - len(fields))
        out[fields[0]] = CpuTimes(*numbers[:8])
    return out


def read_proc_stat(proc: Path = PROC) -> StatSnapshot:
    return parse_proc_stat((proc / "stat").read_text())


def cpu_usage(before: CpuTimes, after: CpuTimes) -> CpuUsage | None:
    """CPU use between two readings; None when no time passed."""
    total = after.total - before.total
    if total <= 0:
        return None

    def share(*names: str) -> float:
        ticks: int = sum(getattr(after, n) - getattr(before, n) for n in names)
        return ticks / total * 100

    idle = share("idle", "iowait")
    return CpuUsage(100.0 - idle, share("user", "nice"), share("system", "irq", "softirq"),
                    share("steal"))


def host_cpu_usage(before: StatSnapshot, after: StatSnapshot) -> CpuUsage | None:
    """Host-wide CPU use (the ``cpu`` line) between two snapshots; None if either lacks it."""
    if "cpu" not in before or "cpu" not in after:
        return None
    return cpu_usage(before["cpu"], after["cpu"])


def busiest_cpu_pct(
    before: StatSnapshot, after: StatSnapshot, cpus: frozenset[int]
) -> float | None:
    """The busy share of the busiest of ``cpus`` between two readings."""
    shares = []
    for cpu in cpus:
        key = f"cpu{cpu}"
        if key in before and key in after:
            usage = cpu_usage(before[key], after[key])
            if usage is not None:
                shares.append(usage.busy_pct)
    return max(shares) if shares else None


def parse_cpulist(text: str) -> frozenset[int]:
    """The kernel's cpulist notation: '0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.strip().split(",")):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process (and so fio, its child) may run on."""
    return frozenset(os.sched_getaffinity(0))


def node_cpus(host: dict[str, object]) -> dict[int, frozenset[int]]:
    """NUMA node -> CPUs, from ``host_info()["numa_nodes"]``."""
    out: dict[int, frozenset[int]] = {}
    nodes = host.get("numa_nodes")
    for entry in nodes if isinstance(nodes, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("node"), int):
            cpulist = entry.get("cpulist")
            out[int(entry["node"])] = parse_cpulist(cpulist) if isinstance(cpulist, str) else (
                frozenset())
    return out


def pci_attachment(name: str, *, sysfs: Path = SYSFS) -> dict[str, object] | None:
    """The PCI function a block device hangs off, with its link speed and width."""
    try:
        device = (block_dir(whole_disk_of(name, sysfs=sysfs), sysfs=sysfs) / "device").resolve()
    except OSError:
        return None
    for candidate in (device, *device.parents):
        if _PCI_ADDRESS.match(candidate.name):
            return {
                "address": candidate.name,
                "link_speed": read_attr(candidate / "current_link_speed"),
                "link_width": read_attr(candidate / "current_link_width"),
                "max_link_speed": read_attr(candidate / "max_link_speed"),
                "max_link_width": read_attr(candidate / "max_link_width"),
            }
    return None
