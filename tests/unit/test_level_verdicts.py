"""Verdicts as the review of today's merges found them (review-today items 3, 10, 11): a ZFS
level's slow member and its round count agree; the matrix's planned time has the member
re-measure as a range; a verdict names no cause nobody measured. And a level's slow member
under host noise (issue 32: a ZFS round in the VM lab named nvme1n1 at 3.1x beside the
truly slow nvme2n1): named for the level only in most of its rounds or, over a whole
level, only standing clear of the next; a one-round outlier is said, not named."""

from __future__ import annotations

from pathlib import Path

from ssdlab.analysis.member_rounds import LevelSlow, level_slow
from ssdlab.analysis.members import SLOW_CLEAR_RATIO, MemberPeriod, slow_member
from ssdlab.plan.matrix import LevelResult, MatrixArgs, validate
from ssdlab.plan.planned import PlannedTime
from ssdlab.report.matrix_pages import _slow
from ssdlab.run.matrix_run import PreparedMatrix, planned
from ssdlab.run.member_check import planned_seconds
from ssdlab.run.prepare import PreparedTarget
from ssdlab.suites import find
from tests.support.prepared import file_info

VERDICT = "slow member nvme2n1: waits 2.00 ms per I/O, 4.9x its peers' 0.41 ms"


def _zfs(member: str | None, verdict: str, named: dict[str, int],
         outliers: bool = False) -> LevelResult:
    slow = level_slow(named, 5, over_level=True, verdict=member)
    return LevelResult("raidz1", "zfs", slow_member=slow.member, slow_rounds=slow.rounds,
                       member_rounds=5, slow_basis="level", level_name="raidz1",
                       zfs={"slow_member": member, "verdict": verdict},
                       slow_outliers=slow.outliers or None if outliers else None)


def _md(named: dict[str, int], rounds: int = 5) -> LevelResult:
    slow = level_slow(named, rounds)
    return LevelResult("raid0", "md", slow_member=slow.member, slow_rounds=slow.rounds,
                       member_rounds=rounds, slow_outliers=slow.outliers or None)


def _waits(**ms_per_io: float) -> list[MemberPeriod]:
    """Members of 1000 I/Os each over 1 s, waiting so long per I/O."""
    return [MemberPeriod(name, 1.0, 0, 1000, 0, 1000 * 4096, 0, round(1000 * ms), 900)
            for name, ms in ms_per_io.items()]


def test_a_member_is_slow_for_an_md_level_only_in_most_of_its_rounds() -> None:
    # the truly slow member in 4 of 5 rounds; host noise named another in the fifth
    assert level_slow({"nvme2n1": 4, "nvme1n1": 1}, 5) == LevelSlow("nvme2n1", 4,
                                                                    {"nvme1n1": 1})
    assert _slow(_md({"nvme2n1": 4, "nvme1n1": 1})) == (
        "nvme2n1 (in 4 of 5 rounds; outlier, not named: nvme1n1 in 1 of 5 rounds)")
    # half the rounds is not most of them: an outlier of two rounds, never the level's
    assert level_slow({"nvme1n1": 2, "nvme2n1": 2}, 4) == LevelSlow(
        None, 2, {"nvme1n1": 2, "nvme2n1": 2})
    one = _md({"nvme1n1": 1})
    assert one.slow_member is None
    assert _slow(one) == "none in most rounds (outlier, not named: nvme1n1 in 1 of 5 rounds)"
    assert level_slow({}, 5) == LevelSlow(None, 0, {})
    assert _slow(_md({})) == "none"


def test_a_zfs_level_names_its_verdict_and_says_the_rounds_outliers() -> None:
    level = _zfs("nvme2n1", VERDICT, {"nvme2n1": 3, "nvme1n1": 1}, outliers=True)
    assert (level.slow_member, level.slow_rounds) == ("nvme2n1", 3)
    assert _slow(level) == ("nvme2n1 (over the whole level: waits 2.00 ms per I/O, 4.9x its "
                            "peers' 0.41 ms; named in 3 of 5 rounds; outlier, not named: "
                            "nvme1n1 in 1 of 5 rounds)")
    # the whole level named none: the rounds' members are outliers, not its slow member
    none = _zfs(None, "no slow member among 4", {"nvme1n1": 1, "nvme3n1": 1}, outliers=True)
    assert none.slow_member is None
    assert _slow(none) == ("none over the whole level (outliers, not named: nvme1n1 in 1 of 5 "
                           "rounds, nvme3n1 in 1 of 5 rounds)")


def test_over_a_whole_level_the_slow_member_must_stand_clear_of_the_next() -> None:
    # the truly slow member far above a noisy one: named, the noisy one not
    clear = slow_member(_waits(nvme0n1=0.4, nvme1n1=1.3, nvme2n1=3.0, nvme3n1=0.4),
                        even_spread=True, clear_ratio=SLOW_CLEAR_RATIO)
    assert clear.member == "nvme2n1", clear.message
    # two members slow alike (3.1x and 3.3x their peers): neither is named, both are said
    alike = _waits(nvme0n1=0.4, nvme1n1=1.24, nvme2n1=1.32, nvme3n1=0.4)
    close = slow_member(alike, even_spread=True, clear_ratio=SLOW_CLEAR_RATIO)
    assert close.member is None
    assert close.message == (
        "no slow member stands clear: nvme2n1 waits 1.32 ms per I/O, 3.3x its peers' "
        "0.40 ms; nvme1n1 waits 1.24 ms per I/O, 3.1x its peers' 0.40 ms (under 1.5x apart)")
    # a round's verdict (no margin asked) still names the one that stands out most
    assert slow_member(alike, even_spread=True).member == "nvme2n1"
    # and what a whole ZFS level that named none for want of a margin shows
    level = _zfs(None, close.message, {"nvme2n1": 2, "nvme1n1": 2}, outliers=True)
    assert _slow(level) == (
        f"none over the whole level ({close.message}; outliers, not named: nvme1n1 in 2 of 5 "
        "rounds, nvme2n1 in 2 of 5 rounds)")


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
