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

from ssdlab.analysis.members import (
    MemberPeriod,
    WritePenalty,
    member_period,
    parse_stat,
    slow_member,
    write_penalty,
)
from ssdlab.targets import emulator
from ssdlab.targets.members import members_of_path, read_stats
from tests.conftest import LoopFactory
from tests.support.browser import require_tool
from tests.support.btrfs import make_btrfs

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024
FILE_BYTES = 64 * MIB


def _fio_randwrite(path: Path, *extra: str) -> int:
    """fio's 4 KiB random direct writes on ``path`` (or what ``extra`` says); its number
    of write I/Os."""
    out = subprocess.run(
        ["fio", "--name=w", f"--filename={path}", f"--size={FILE_BYTES}", "--bs=4k",
         "--ioengine=psync", "--direct=1", "--rw=randwrite", "--randrepeat=0",
         "--output-format=json", *extra],
        check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["jobs"][0]["write"]["total_ios"])


def _random_write_penalty(level: str, count: int, loop_device: LoopFactory, shm_dir: Path
                          ) -> tuple[WritePenalty, list[MemberPeriod], int]:
    """fio's 16 MiB of 4 KiB random writes into a laid-out file with copy-on-write off on a
    btrfs ``level`` of ``count`` loop devices: the penalty, each member, the host writes."""
    require_tool("mkfs.btrfs", "btrfs-progs")
    loops = [loop_device(320 * MIB) for _ in range(count)]
    mount = shm_dir / "mnt"
    make_btrfs(loops, level, mount)
    target = mount / "ssdlab.test"
    target.touch()
    subprocess.run(["chattr", "+C", str(target)], check=True)  # no copy-on-write
    _fio_randwrite(target, "--rw=write", "--bs=1m")  # lay the file out first
    subprocess.run(["sync", "-f", str(target)], check=True)
    members = members_of_path(str(target))
    assert members == sorted(Path(loop).name for loop in loops)
    before = read_stats(members)
    host_writes = _fio_randwrite(target, "--io_size=16m")
    subprocess.run(["sync", "-f", str(target)], check=True)  # parity stripes written out
    after = read_stats(members)
    periods = [member_period(name, parse_stat(before.lines[name]),
                             parse_stat(after.lines[name]), after.at - before.at)
               for name in members]
    penalty = write_penalty(periods, host_writes, level)
    print(f"{level}: {penalty.message}; members {[(p.name, p.writes) for p in periods]}")
    assert host_writes == 16 * MIB // 4096
    return penalty, periods, host_writes


@pytest.mark.parametrize(("level", "count", "textbook"),
                         [("raid0", 2, 1.0), ("raid1", 2, 2.0), ("raid10", 4, 2.0)])
def test_write_penalty_on_btrfs_is_the_levels(level: str, count: int, textbook: float,
                                              loop_device: LoopFactory,
                                              shm_dir: Path) -> None:
    penalty, periods, host_writes = _random_write_penalty(level, count, loop_device, shm_dir)
    assert penalty.measured is not None and penalty.textbook == textbook
    assert abs(penalty.measured - textbook) <= 0.15 * textbook, penalty.message
    # every member took its share: striped and mirrored writes spread evenly
    assert all(p.writes >= host_writes * textbook / count * 0.85 for p in periods)


@pytest.mark.parametrize(("level", "count", "textbook"), [("raid5", 3, 4.0), ("raid6", 4, 6.0)])
def test_write_penalty_of_btrfs_parity_levels_is_reported_beside_the_textbook(
        level: str, count: int, textbook: float, loop_device: LoopFactory,
        shm_dir: Path) -> None:
    # btrfs RAID 5/6 read-modify-writes 64 KiB per-device stripes; its stripe cache turns
    # some small writes into full-stripe writes, so it may cost less than the textbook's
    # 4 and 6 (measured here: about 2.4 and 3.5). Reported as measured, never hidden:
    # more than striping alone costs, and not more than the textbook's read-modify-write
    penalty, _, _ = _random_write_penalty(level, count, loop_device, shm_dir)
    assert penalty.textbook == textbook
    assert f"(textbook {textbook:g} for {level})" in penalty.message
    assert penalty.measured is not None and 1.5 < penalty.measured <= 1.15 * textbook


def _read_periods(target: Path, members: list[str], seconds: float) -> list[MemberPeriod]:
    """fio's 4 KiB random reads of ``target`` for ``seconds``; each member's period."""
    before = read_stats(members)
    _fio_randwrite(target, "--rw=randread", "--time_based", f"--runtime={int(seconds * 1000)}ms")
    after = read_stats(members)
    return [member_period(name, parse_stat(before.lines[name]),
                          parse_stat(after.lines[name]), after.at - before.at)
            for name in members]


@pytest.mark.solo  # judges waits (make test runs it alone, after the rest)
@pytest.mark.parametrize("slow", [None, 2], ids=["none-slow", "third-slow"])
def test_the_slow_member_is_named_and_only_it(slow: int | None, emu_run_dir: Path,
                                              shm_dir: Path) -> None:
    # four emulated SSDs in a btrfs RAID 0, one of them (or none) with every latency of
    # its model four times as long as its peers': its reads wait about four times as long
    # (the verdict's bound is 1.5x), three runs in a row. Every member's model is slowed
    # 16x, so that a read waits about 1.2 ms in the model: at 1x (about 0.08 ms) a busy
    # host's scheduling delays alone made one healthy member wait 1.8x its peers, at 8x
    # (0.6 ms), beside other tests on a load of 10, 1.5x
    require_tool("mkfs.btrfs", "btrfs-progs")
    emus = [emulator.start(f"m{i}", "enterprise-tlc", 128 * MIB, loop=True,
                           options=["--time-scale", "64" if i == slow else "16"])
            for i in range(4)]
    loops = [str(e.loop_device) for e in emus]
    mount = shm_dir / "mnt"
    make_btrfs(loops, "raid0", mount)
    try:
        target = mount / "ssdlab.test"
        target.touch()
        subprocess.run(["chattr", "+C", str(target)], check=True)
        subprocess.run(["fio", "--name=lay", f"--filename={target}", "--size=96m",
                        "--rw=write", "--bs=1m", "--direct=1", "--output-format=json"],
                       check=True, capture_output=True)
        members = members_of_path(str(target))
        expected = None if slow is None else Path(loops[slow]).name
        for _ in range(3):
            periods = _read_periods(target, members, 3.0)  # >= 200 reads per member
            verdict = slow_member(periods, even_spread=True)
            print(verdict.message, [(p.name, p.reads, round(p.mean_wait_ms or 0, 3))
                                    for p in periods])
            assert verdict.member == expected, verdict.message
    finally:
        subprocess.run(["umount", str(mount)], check=False, capture_output=True)
        # its own members only: a bare --forget unregisters every unmounted btrfs device
        # on the machine, another test's array among them
        subprocess.run(["btrfs", "device", "scan", "--forget", *loops], check=False,
                       capture_output=True)
