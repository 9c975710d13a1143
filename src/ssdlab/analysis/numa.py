"""Did fio run on the CPUs of the device's NUMA node? (methodology 1.9)

The PCIe controller is part of a CPU socket: I/O issued from another socket's cores
crosses the interconnect, adding latency and capping IOPS. This compares the device's
NUMA node with the nodes of the CPUs fio was allowed to run on. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ssdlab.jsonrecord import Record


def format_cpulist(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 8} -> '0-3,8' (the kernel's cpulist notation)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = prev = None
    for cpu in ordered:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = cpu
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(parts)


@dataclass(frozen=True)
class NumaCheck(Record):
    """Where fio ran against the device's NUMA node (stored as the ``numa`` verdict)."""

    device_node: int | None  # None: the device reports none
    fio_cpus: str  # cpulist notation
    fio_nodes: tuple[int, ...]  # nodes of those CPUs (empty: the host reports no nodes)
    mismatch: bool  # fio may run on CPUs of another node than the device's
    message: str


def numa_check(
    device_node: int | None, fio_cpus: Iterable[int], nodes: Mapping[int, frozenset[int]]
) -> NumaCheck:
    """``nodes``: NUMA node -> its CPUs (the host's ``cpulist`` per node)."""
    cpus = frozenset(fio_cpus)
    cpu_text = format_cpulist(cpus)
    fio_nodes = tuple(sorted(n for n, members in nodes.items() if members & cpus))
    where = (f"fio ran on CPUs {cpu_text} (NUMA node{'s' if len(fio_nodes) > 1 else ''} "
             f"{', '.join(str(n) for n in fio_nodes)})" if fio_nodes
             else f"fio ran on CPUs {cpu_text}; the host reports no NUMA nodes")
    if device_node is None:
        return NumaCheck(None, cpu_text, fio_nodes, False,
                         f"the device reports no NUMA node (virtual device, file, or a host "
                         f"without NUMA); {where}")
    if not fio_nodes:
        return NumaCheck(device_node, cpu_text, fio_nodes, False,
                         f"device on NUMA node {device_node}; {where}")
    if fio_nodes == (device_node,):
        return NumaCheck(device_node, cpu_text, fio_nodes, False,
                         f"device on NUMA node {device_node}; {where}: local")
    return NumaCheck(
        device_node, cpu_text, fio_nodes, True,
        f"device on NUMA node {device_node} but {where}: I/O from other nodes crosses the "
        f"socket interconnect; pin ssdlab to the device's node "
        f"(numactl --cpunodebind={device_node} --membind={device_node} ssdlab ...)",
    )
