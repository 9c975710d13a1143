"""Build a prepared latency-vs-IOPS run for tests, without fio or a real device."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ssdlab.plan.latency_iops import LatencyIopsArgs, build_options, build_plan
from ssdlab.run.latency_iops_run import LatencyIopsPrepared
from ssdlab.run.prepare import PreparedTarget
from tests.support.prepared import GIB, file_info

HOST = {"hostname": "test", "cpu_count": 2, "numa_nodes": [{"node": 0, "cpulist": "0-1"}]}


def make_prepared(
    tmp_path: Path,
    args: LatencyIopsArgs,
    *,
    capacity: int = GIB,
    sector: int = 512,
    numa_node: int | None = None,
    host: dict[str, object] | None = None,
    cpus: int = 2,
) -> LatencyIopsPrepared:
    info = dataclasses.replace(file_info(tmp_path / "target.img", capacity, sector),
                               numa_node=numa_node)
    base = PreparedTarget(info, False, dict(host or HOST), {"ssdlab": "test", "fio": "3.33"})
    options = build_options(args, cpus)
    return LatencyIopsPrepared(base, options, build_plan(options, capacity, sector), args)
