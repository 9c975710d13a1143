"""Member statistics with real fio (issue 15, item 3): a btrfs file system over loop
devices, 4 KiB random writes by fio into a file with copy-on-write off, each member's
/sys/block/*/stat read before and after. The members are found from the file's path, and
member writes per host write come out near the level's textbook value: RAID 0 1, RAID 1
and 10 2 (within 15 %, the issue's bound; the rest is btrfs' own metadata)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ssdlab.analysis.members import member_period, parse_stat, write_penalty
from ssdlab.targets.members import members_of_path, read_stats
from tests.conftest import LoopFactory

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024
FILE_BYTES = 64 * MIB


def _btrfs(loops: list[str], level: str, mount: Path) -> None:
    subprocess.run(["mkfs.btrfs", "-q", "-f", "-d", level, "-m", level, *loops], check=True,
                   capture_output=True)
    subprocess.run(["btrfs", "device", "scan", *loops], check=True, capture_output=True)
    mount.mkdir()
    subprocess.run(["mount", "-t", "btrfs", "-o", "nodatacow", loops[0], str(mount)],
                   check=True, capture_output=True)


def _fio_randwrite(path: Path, *extra: str) -> int:
    """fio's 4 KiB random direct writes on ``path``; its number of write I/Os."""
    out = subprocess.run(
        ["fio", "--name=w", f"--filename={path}", f"--size={FILE_BYTES}", "--bs=4k",
         "--ioengine=psync", "--direct=1", "--rw=randwrite", "--randrepeat=0",
         "--output-format=json", *extra],
        check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["jobs"][0]["write"]["total_ios"])


@pytest.mark.parametrize(("level", "count", "textbook"),
                         [("raid0", 2, 1.0), ("raid1", 2, 2.0), ("raid10", 4, 2.0)])
def test_write_penalty_on_btrfs_is_the_levels(level: str, count: int, textbook: float,
                                              loop_device: LoopFactory,
                                              shm_dir: Path) -> None:
    require_tool("mkfs.btrfs")
    loops = [loop_device(320 * MIB) for _ in range(count)]
    mount = shm_dir / "mnt"
    _btrfs(loops, level, mount)
    target = mount / "ssdlab.test"
    target.touch()
    subprocess.run(["chattr", "+C", str(target)], check=True)  # no copy-on-write
    _fio_randwrite(target, "--rw=write", "--bs=1m")  # lay the file out first
    subprocess.run(["sync", "-f", str(target)], check=True)

    members = members_of_path(str(target))
    assert members == sorted(Path(loop).name for loop in loops)
    before = read_stats(members)
    host_writes = _fio_randwrite(target, "--io_size=16m")
    after = read_stats(members)
    periods = [member_period(name, parse_stat(before.lines[name]),
                             parse_stat(after.lines[name]), after.at - before.at)
               for name in members]
    penalty = write_penalty(periods, host_writes, level)
    print(f"{level}: {penalty.message}; members {[(p.name, p.writes) for p in periods]}")
    assert host_writes == 16 * MIB // 4096
    assert penalty.measured is not None and penalty.textbook == textbook
    assert abs(penalty.measured - textbook) <= 0.15 * textbook, penalty.message
    # every member took its share: striped and mirrored writes spread evenly
    assert all(p.writes >= host_writes * textbook / count * 0.85 for p in periods)


def require_tool(name: str) -> None:
    from shutil import which
    if which(name) is None:
        pytest.skip(f"{name} is not installed")
