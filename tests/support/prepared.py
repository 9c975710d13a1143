"""Build a Prepared run for orchestration tests without fio or a real device."""

from __future__ import annotations

from pathlib import Path

from ssdlab.plan.pts import PtsArgs, build_options, build_pts_tests
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.pts_run import PreparedPts
from ssdlab.targets.identity import TargetInfo

GIB = 1024**3


def file_info(path: Path, capacity: int = GIB, sector: int = 512) -> TargetInfo:
    return TargetInfo(
        path=str(path),
        kind="file",
        name=path.name,
        device_class="file",
        model=None,
        serial=None,
        firmware=None,
        capacity_bytes=capacity,
        logical_sector_bytes=sector,
        physical_sector_bytes=sector,
        rotational=None,
        numa_node=None,
        scheduler=None,
        discard_max_bytes=None,
        details={},
    )


def make_prepared(
    tmp_path: Path, args: PtsArgs, *, capacity: int = GIB, sector: int = 512
) -> PreparedPts:
    target = tmp_path / "target.img"
    if not target.exists():  # the fake target exists, as a real one would (sparse)
        with open(target, "wb") as fh:
            fh.truncate(capacity)
    info = file_info(target, capacity, sector)
    options = build_options(args, info.device_class, 2)
    tests = build_pts_tests(options, capacity, sector)
    prepared = PreparedTarget(info, False, {"hostname": "test", "cpu_count": 2},
                              {"ssdlab": "test", "fio": "3.33"})
    return PreparedPts(prepared, options, tests)
