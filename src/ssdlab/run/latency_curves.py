"""The curves of a latency-vs-IOPS run as it goes: each curve's points (one per queue
depth, as measured) and why it stopped; the curves of a stopped run restored from the
store; and the records the test's result is made of (the curves with their host-bound
points, the PCIe link; the host-bound and NUMA verdicts are plan/results.py's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from ssdlab.analysis.hostbound import CpuPoint
from ssdlab.analysis.ladder import LadderPoint, StopDecision
from ssdlab.plan.latency_iops import CurveKey
from ssdlab.plan.latency_records import (
    CurveRecord,
    LadderStop,
    LatencyIopsResult,
    PcieLink,
    PointRecord,
)
from ssdlab.plan.results import HostCpuUse
from ssdlab.store.records import TestData

#: a curve's stop that leaves it to be finished by ``ssdlab resume``
UNFINISHED = ("interrupted", "failed", "")


@dataclass
class Curve:
    """One curve of the run: its points in queue-depth order, and why it stopped (None:
    it goes on)."""

    key: CurveKey
    points: list[PointRecord] = field(default_factory=list)
    stop: LadderStop | None = None

    def stopped(self, decision: StopDecision) -> None:
        self.stop = LadderStop(decision.kind, decision.reason)

    def iodepths(self) -> set[int]:
        return {p.iodepth for p in self.points}

    def ladder_points(self) -> list[LadderPoint]:
        return [LadderPoint(p.iodepth, float(p.iops), _float(p.lat_mean_us) or 0.0)
                for p in self.points]

    def cpu_points(self) -> list[CpuPoint]:
        return [CpuPoint(self.key.threads, p.iodepth, float(p.iops), _float(p.host.host_cpu_pct))
                for p in self.points]

    def record(self, flagged: Mapping[tuple[str, int], str]) -> CurveRecord:
        """The curve as stored, its points marked host-bound where ``flagged`` (curve
        label, queue depth -> why) says so."""
        points = [dataclasses.replace(p, host_bound=reason is not None,
                                      host_bound_reason=reason)
                  for p in self.points
                  for reason in [flagged.get((self.key.label, p.iodepth))]]
        best = max(points, key=lambda p: float(p.iops), default=None)
        return CurveRecord(
            self.key.label, self.key.workload, self.key.block_bytes, self.key.read_pct,
            self.key.threads, points, self.stop,
            None if best is None else best.iops,
            None if best is None else best.iodepth,
            None if best is None else best.lat_mean_us,
        )


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _number(cell: Mapping[str, object], key: str) -> float | None:
    """A metric of a round's cell as stored (an int stays an int); None if it is none."""
    value = cell.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def point_of(round_no: int, cell: Mapping[str, object]) -> PointRecord:
    """The point a round's cell measured (``host_bound`` is judged when the result is
    made)."""
    def number(key: str) -> float:
        value = _number(cell, key)
        return 0.0 if value is None else value

    def maybe(key: str) -> float | None:
        return _number(cell, key)

    return PointRecord(
        round_no=round_no, iodepth=int(str(cell["iodepth"])),
        outstanding=int(str(cell["outstanding"])), iops=number("iops"),
        lat_mean_us=maybe("lat_mean_us"), lat_p99_us=maybe("lat_p99_us"),
        lat_p99_9_us=maybe("lat_p99_9_us"), lat_p99_99_us=maybe("lat_p99_99_us"),
        lat_max_us=maybe("lat_max_us"), read_lat_mean_us=maybe("read_lat_mean_us"),
        write_lat_mean_us=maybe("write_lat_mean_us"), bw_bytes_per_s=number("bw_bytes_per_s"),
        usr_cpu_pct=number("usr_cpu_pct"), sys_cpu_pct=number("sys_cpu_pct"),
        host=HostCpuUse(maybe("host_cpu_pct"), maybe("host_usr_pct"), maybe("host_sys_pct")),
        host_cpu_busiest_pct=maybe("host_cpu_busiest_pct"),
        iops_rise_pct=maybe("iops_rise_pct"),
    )


def restore_curves(previous: TestData) -> list[Curve]:
    """The curves of a stopped test, from its stored points in round order; a curve
    whose stored stop says it had finished stays finished, the others go on."""
    stored = LatencyIopsResult.from_json(previous.result, f"{previous.name} result")
    stops = {c.label: c.stop for c in stored.curves}
    curves: dict[CurveKey, Curve] = {}
    for rnd in sorted((r for r in previous.rounds if r.status == "ok" and r.cells),
                      key=lambda r: r.round_no):
        cell = rnd.cells[0]
        key = CurveKey(int(str(cell["block_bytes"])), int(str(cell["read_pct"])),
                       int(str(cell["threads"])))
        curves.setdefault(key, Curve(key)).points.append(point_of(rnd.round_no, cell))
    for curve in curves.values():
        stop = stops.get(curve.key.label)
        curve.stop = stop if stop is not None and stop.kind not in UNFINISHED else None
    return list(curves.values())


# -- the PCIe link as stored -----------------------------------------------------------------


def pcie_record(link: Mapping[str, object] | None) -> PcieLink | None:
    """The PCIe link of ``targets.topology.pci_attachment``, as stored."""
    if link is None:
        return None

    def text(key: str) -> str | None:
        value = link.get(key)
        return value if isinstance(value, str) else None

    return PcieLink(str(link.get("address")), text("link_speed"), text("link_width"),
                    text("max_link_speed"), text("max_link_width"))
