"""Verdicts as the review of today's merges found them (review-today items 3, 10, 11): a ZFS
level's slow member and its round count agree; the matrix's planned time has the member
re-measure as a range; a verdict names no cause nobody measured."""

from __future__ import annotations

from pathlib import Path

from ssdlab.plan.matrix import LevelResult, MatrixArgs, validate
from ssdlab.plan.planned import PlannedTime
from ssdlab.report.matrix_pages import _slow
from ssdlab.run.matrix_run import PreparedMatrix, level_verdict, planned
from ssdlab.run.member_check import planned_seconds
from ssdlab.run.prepare import PreparedTarget
from ssdlab.suites import find
from tests.support.prepared import file_info

VERDICT = "slow member nvme2n1: waits 2.00 ms per I/O, 4.9x its peers' 0.41 ms"


def _zfs(member: str | None, verdict: str, named: dict[str, int]) -> LevelResult:
    name, count = level_verdict(named, member)
    return LevelResult("raidz1", "zfs", slow_member=name, slow_rounds=count, member_rounds=5,
                       slow_basis="level", level_name="raidz1",
                       zfs={"slow_member": member, "verdict": verdict})


def test_a_zfs_slow_member_is_said_over_the_level_with_its_own_round_count() -> None:
    # the rounds named another member in 3 of 5, this one in none
    level = _zfs("nvme2n1", VERDICT, {"nvme1n1": 3})
    assert (level.slow_member, level.slow_rounds) == ("nvme2n1", 0)
    assert _slow(level) == ("nvme2n1 (over the whole level: waits 2.00 ms per I/O, 4.9x its "
                            "peers' 0.41 ms; named in 0 of 5 rounds)")
    assert "(in 0 of 5 rounds)" not in _slow(level)
    named = _zfs("nvme2n1", VERDICT, {"nvme2n1": 2, "nvme1n1": 1})
    assert _slow(named).endswith("; named in 2 of 5 rounds)")
    none = _zfs(None, "no slow member among 4", {"nvme1n1": 3})
    assert _slow(none) == "none over the whole level (the rounds named one member in 3 of 5)"
    assert "most rounds" not in _slow(none)
    assert _slow(_zfs(None, "no slow member among 4", {})) == "none over the whole level"


def test_an_older_zfs_record_does_not_print_a_round_count_of_another_member() -> None:
    older = LevelResult("raidz1", "zfs", slow_member="nvme2n1", slow_rounds=0,
                        member_rounds=5, zfs={"slow_member": "nvme2n1", "verdict": VERDICT})
    assert _slow(older) == ("nvme2n1 (over the whole level: waits 2.00 ms per I/O, 4.9x its "
                            "peers' 0.41 ms)")


def test_an_md_level_keeps_its_round_verdict() -> None:
    md = LevelResult("raid0", "md", slow_member="sdc", slow_rounds=4, member_rounds=5)
    assert _slow(md) == "sdc (in 4 of 5 rounds)"
    some = LevelResult("raid0", "md", slow_rounds=2, member_rounds=5)
    assert _slow(some) == "none in most rounds (one named in 2 of 5)"


def test_the_planned_time_has_the_member_re_measure_as_a_range(tmp_path: Path) -> None:
    paths = [tmp_path / f"m{i}.img" for i in range(4)]
    options = validate(MatrixArgs(members=",".join(map(str, paths)), levels="0",
                                  member_check_seconds=5.0))
    members = tuple(file_info(p) for p in paths)
    suite = find("pts")
    assert suite is not None
    prepared = PreparedMatrix(PreparedTarget(members[0], False, {}, {"ssdlab": "test"}),
                              options, MatrixArgs(members="x"), members, (), True, "fio", (),
                              suite)
    check = planned_seconds(4, 5.0)
    time = planned(prepared)
    assert (time.low_s, time.high_s) == (check, 2 * check)
    assert time.decides == "whether a member is measured again"
    assert "whether a member is measured again" in time.text()


def test_what_decides_a_planned_time_is_said_once() -> None:
    a = PlannedTime(1.0, 2.0, "steady state")
    b = PlannedTime(1.0, 2.0, "whether a member is measured again; steady state")
    assert (b + a + a).decides == "whether a member is measured again; steady state"
