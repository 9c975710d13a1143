"""Member devices under a target and what their stat counters say (issue 15, item 3):
finding the members in a fake sysfs, per-member rates between two readings, the write
penalty, the imbalance and the slow-member verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssdlab.analysis.members import (
    MIN_IOS_TO_JUDGE,
    DiskStat,
    MemberPeriod,
    imbalance,
    member_period,
    parse_stat,
    slow_member,
    write_penalty,
)
from ssdlab.errors import TargetError
from ssdlab.targets.members import members_of_device, members_of_path, read_stats
from tests.support.fakesys import VIRTUAL, FakeSys

#: a real line of /sys/block/loop0/stat (kernel 6.x: 17 fields with discards and flushes)
STAT_LINE = ("11791711      108 303988951  7290196  7965804    21741 202607822 18215184"
             "        0  1048436 25505661      170        0 28377194      237     4032       42")


def test_parse_stat_reads_the_fields_a_period_needs() -> None:
    stat = parse_stat(STAT_LINE)
    assert stat == DiskStat(reads=11791711, read_sectors=303988951, read_ms=7290196,
                            writes=7965804, write_sectors=202607822, write_ms=18215184,
                            in_flight=0, io_ms=1048436)
    eleven = " ".join(STAT_LINE.split()[:11])  # kernels before 4.18
    assert parse_stat(eleven) == stat


@pytest.mark.parametrize("text", ["", "1 2 3", "a b c d e f g h i j k", "1 2 3 4 5 6 7 8 9 10 -1"])
def test_parse_stat_refuses_what_is_not_a_stat_line(text: str) -> None:
    with pytest.raises(ValueError, match="not a block device stat line"):
        parse_stat(text)


def _stat(reads: int = 0, writes: int = 0, wait_ms: int = 0, busy_ms: int = 0,
          sectors: int = 0) -> DiskStat:
    return DiskStat(reads=reads, read_sectors=sectors, read_ms=wait_ms // 2, writes=writes,
                    write_sectors=sectors, write_ms=wait_ms - wait_ms // 2, in_flight=0,
                    io_ms=busy_ms)


def test_a_period_gives_rates_wait_and_utilisation() -> None:
    before = _stat(reads=100, writes=1000, wait_ms=500, busy_ms=1000, sectors=8)
    after = _stat(reads=2100, writes=5000, wait_ms=6500, busy_ms=2500, sectors=8 + 80_000)
    m = member_period("sdb", before, after, 2.0)
    assert (m.reads, m.writes, m.ios) == (2000, 4000, 6000)
    assert (m.read_iops, m.write_iops) == (1000.0, 2000.0)
    assert m.read_bytes == m.write_bytes == 80_000 * 512
    assert m.write_mb_s == pytest.approx(80_000 * 512 / 2 / 1e6)
    assert m.mean_wait_ms == pytest.approx(6000 / 6000)
    assert m.utilisation_pct == pytest.approx(75.0)


def test_a_period_refuses_counters_that_went_backwards_and_no_time() -> None:
    with pytest.raises(ValueError, match="went backwards"):
        member_period("sdb", _stat(writes=10), _stat(writes=5), 1.0)
    with pytest.raises(ValueError, match="some time"):
        member_period("sdb", _stat(), _stat(), 0.0)


def _member(name: str, ios: int, wait_ms_per_io: float, writes: int | None = None
            ) -> MemberPeriod:
    w = ios if writes is None else writes
    return MemberPeriod(name=name, seconds=1.0, reads=ios - w, writes=w, read_bytes=0,
                        write_bytes=w * 4096, read_wait_ms=0,
                        write_wait_ms=round(ios * wait_ms_per_io), busy_ms=900)


def test_write_penalty_against_the_textbook_value() -> None:
    mirrored = [_member("loop1", 1000, 1.0), _member("loop2", 1000, 1.0)]
    penalty = write_penalty(mirrored, host_writes=1000, level="raid1")
    assert (penalty.measured, penalty.textbook) == (2.0, 2.0)
    assert penalty.message == "write penalty 2.00 member I/Os per host write (textbook 2 for raid1)"
    assert write_penalty(mirrored, host_writes=500, level="raidz1").textbook is None
    nothing = write_penalty(mirrored, host_writes=0, level="raid5")
    assert nothing.measured is None and nothing.textbook == 4.0


def test_a_period_with_host_reads_counts_member_writes_only() -> None:
    # a mirror that wrote 1000 host writes twice and answered only some of the 800 host
    # reads itself (the rest came from unwritten extents): its reads tell nothing
    mirrored = [_member("loop1", 1300, 1.0, writes=1000), _member("loop2", 1000, 1.0)]
    penalty = write_penalty(mirrored, host_writes=1000, level="raid1", host_reads=800)
    assert (penalty.measured, penalty.writes_only) == (2.0, True)
    assert "member reads are not counted" in penalty.message
    alone = write_penalty(mirrored, host_writes=1000, level="raid1")
    assert (alone.measured, alone.writes_only) == (2.3, False)


def test_imbalance_is_most_over_fewest() -> None:
    assert imbalance([_member("a", 1000, 1), _member("b", 500, 1)]) == 2.0
    assert imbalance([_member("a", 1000, 1)]) is None
    assert imbalance([_member("a", 1000, 1), _member("b", 0, 1)]) is None


def test_no_slow_member_among_even_peers() -> None:
    members = [_member(f"loop{i}", 5000 + 37 * i, 1.0 + 0.1 * i) for i in range(4)]
    verdict = slow_member(members, even_spread=True)
    assert verdict.member is None and verdict.message == "no slow member among 4"


def test_the_member_that_waits_longest_is_named() -> None:
    members = [_member("loop1", 5000, 1.0), _member("loop2", 5000, 4.0),
               _member("loop3", 5000, 1.1), _member("loop4", 5000, 2.0)]
    verdict = slow_member(members, even_spread=True)
    assert verdict.member == "loop2"
    assert verdict.message == ("slow member loop2: waits 4.00 ms per I/O, "
                               "3.6x its peers' 1.10 ms")


def test_a_member_doing_markedly_less_is_named_only_where_the_level_spreads_evenly() -> None:
    members = [_member("loop1", 5000, 1.0), _member("loop2", 1200, 1.0),
               _member("loop3", 5000, 1.0)]
    assert slow_member(members, even_spread=True).member == "loop2"
    assert slow_member(members, even_spread=False).member is None  # e.g. mirrored reads


def test_too_few_ios_are_not_judged() -> None:
    few = MIN_IOS_TO_JUDGE - 1
    members = [_member("loop1", few, 1.0), _member("loop2", few, 9.0)]
    assert slow_member(members, even_spread=True).member is None
    assert slow_member([_member("loop1", 5000, 1.0)], even_spread=True).member is None


@pytest.fixture
def fake(tmp_path: Path) -> FakeSys:
    return FakeSys(tmp_path)


def test_members_are_the_bottom_of_the_stack(fake: FakeSys) -> None:
    for i, name in enumerate(("sdb", "sdc", "sdd")):
        fake.disk(name, f"8:{16 * (i + 1)}")
        fake.partition(name, f"{name}1", f"8:{16 * (i + 1) + 1}", 1)
    fake.disk("md0", "9:0", parent=VIRTUAL)
    fake.disk("dm-0", "253:0", parent=VIRTUAL)
    for part in ("sdb1", "sdc1"):
        fake.stack("md0", part)
    fake.stack("dm-0", "md0")
    fake.stack("dm-0", "sdd1")
    assert members_of_device("dm-0", sysfs=fake.sys) == ["sdb", "sdc", "sdd"]
    assert members_of_device("md0", sysfs=fake.sys) == ["sdb", "sdc"]
    assert members_of_device("sdb1", sysfs=fake.sys) == ["sdb"]
    assert members_of_device("sdd", sysfs=fake.sys) == ["sdd"]


def test_members_of_a_btrfs_path_are_every_device_of_the_file_system(fake: FakeSys,
                                                                      tmp_path: Path) -> None:
    for i, name in enumerate(("loop1", "loop2", "loop3")):
        fake.disk(name, f"7:{i + 1}", parent=VIRTUAL)
    devices = fake.sys / "fs" / "btrfs" / "5f0e-uuid" / "devices"
    devices.mkdir(parents=True)
    for name in ("loop1", "loop2", "loop3"):
        (devices / name).symlink_to(fake.sys / "class" / "block" / name)
    mount = tmp_path / "mnt"
    mount.mkdir()
    fake.mount("0:45", str(mount), "btrfs", "/dev/loop2")  # anonymous dev: named by source
    (fake.sys / "class" / "block" / "loop2" / "dev").write_text("7:2\n")
    found = members_of_path(str(mount / "ssdlab.test"), sysfs=fake.sys, proc=fake.proc)
    assert found == ["loop1", "loop2", "loop3"]
    fake.mount("0:46", str(tmp_path / "shm"), "tmpfs", "tmpfs")
    assert members_of_path(str(tmp_path / "shm" / "f"), sysfs=fake.sys, proc=fake.proc) == []


def test_reading_stats_names_a_member_that_cannot_be_read(fake: FakeSys) -> None:
    fake.disk("sdb", "8:16")
    fake.write("sdb", "stat", STAT_LINE + "\n")
    reading = read_stats(["sdb"], sysfs=fake.sys)
    assert parse_stat(reading.lines["sdb"]).writes == 7965804
    fake.disk("sdc", "8:32")
    with pytest.raises(TargetError, match=r"/dev/sdc: its I/O statistics cannot be read"):
        read_stats(["sdb", "sdc"], sysfs=fake.sys)


def test_no_verdict_on_waits_when_the_peers_waited_for_nothing() -> None:
    members = [_member("loop1", 5000, 0.0), _member("loop2", 5000, 0.0),
               _member("loop3", 5000, 0.01)]
    assert slow_member(members, even_spread=True).member is None
