"""The member check before an array is built (issue 15 item 4): the outlier verdict on
constructed numbers, the read-only job file, and the check through the fake fio."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ssdlab.analysis.member_check import MemberResult, outlier_verdict, slow_metrics
from ssdlab.engine.runner import FioExecutor
from ssdlab.errors import UserError
from ssdlab.run.member_check import (
    MemberCheckFailed,
    again_order,
    check_members,
    judge_members,
    member_check_job,
    section_names,
)
from ssdlab.targets.members import data_share
from tests.support.fake_fio import FakeFio
from tests.support.fakesys import VIRTUAL, FakeSys

LOOPS = [f"/dev/loop{i}" for i in range(4)]


def _results(iops: list[float], mb_s: list[float] | None = None) -> list[MemberResult]:
    mb = mb_s or [1000.0] * len(iops)
    return [MemberResult(LOOPS[i], mb[i], v) for i, v in enumerate(iops)]


# -- the verdict --------------------------------------------------------------------


def test_one_slow_member_is_named_with_its_metric_and_numbers() -> None:
    verdict = outlier_verdict(_results([6800, 6900, 6700, 2100]))
    assert verdict.outliers == ("/dev/loop3",)
    assert ("/dev/loop3: 4 KiB random read 2,100 IOPS, 0.31x its peers' 6,800"
            in verdict.message)
    assert "1 of 4 members below 0.8x" in verdict.message
    assert len(verdict.lines) == 4
    assert verdict.lines[3].endswith("-- slow")
    assert not any(line.endswith("-- slow") for line in verdict.lines[:3])


def test_a_slow_sequential_rate_is_named_as_such() -> None:
    verdict = outlier_verdict(_results([50_000] * 4, [1091.0, 1090.0, 273.0, 1092.0]))
    assert verdict.outliers == ("/dev/loop2",)
    assert "/dev/loop2: sequential read 273.0 MB/s, 0.25x its peers' 1,091.0" in verdict.message
    assert "random read" not in verdict.message


def test_slow_on_both_metrics_names_both() -> None:
    verdict = outlier_verdict(_results([50_000, 50_000, 12_500], [1091.0, 1090.0, 273.0]))
    assert verdict.outliers == ("/dev/loop2",)
    assert "sequential read 273.0 MB/s" in verdict.message
    assert " and 4 KiB random read 12,500 IOPS, 0.25x" in verdict.message


def test_none_slow_names_none() -> None:
    # 10 % apart: noise, not an outlier
    verdict = outlier_verdict(_results([50_000, 45_000, 49_000, 52_000],
                                       [1000.0, 950.0, 1050.0, 900.0]))
    assert verdict.outliers == ()
    assert verdict.message == ("member check: no outlier among 4 members "
                               "(none below 0.8x its peers)")
    assert len(verdict.lines) == 4 and not any("slow" in line for line in verdict.lines)


def test_the_bound_is_strict_and_the_ratio_is_a_parameter() -> None:
    assert outlier_verdict(_results([1000, 1000, 800])).outliers == ()  # exactly 0.8x
    assert outlier_verdict(_results([1000, 1000, 799])).outliers == ("/dev/loop2",)
    assert outlier_verdict(_results([1000, 1000, 600]), ratio=0.5).outliers == ()
    with pytest.raises(ValueError):
        outlier_verdict(_results([1, 2]), ratio=1.0)


def test_two_members_name_the_slower_one_only() -> None:
    verdict = outlier_verdict(_results([10_000, 4_000]))
    assert verdict.outliers == ("/dev/loop1",)
    assert "0.40x its peers' 10,000" in verdict.message
    # the faster one is 2.5x its peer: marked in its line, not an outlier
    assert "(above its peers)" in verdict.lines[0]
    assert outlier_verdict(_results([10_000, 9_000])).outliers == ()


def test_one_member_or_none_gives_no_verdict() -> None:
    one = outlier_verdict(_results([10_000]))
    assert one.outliers == ()
    assert one.message == "member check: one member, nothing to compare"
    assert one.lines == ("/dev/loop0: sequential read 1,000.0 MB/s, "
                         "4 KiB random read 10,000 IOPS",)
    none = outlier_verdict([])
    assert none.outliers == () and none.lines == ()
    assert "no members, nothing to compare" in none.message


def test_zero_iops() -> None:
    # a member that read nothing is an outlier ...
    verdict = outlier_verdict(_results([6800, 6900, 0]))
    assert verdict.outliers == ("/dev/loop2",)
    assert "4 KiB random read 0 IOPS, 0.00x its peers' 6,850" in verdict.message
    # ... but against peers that read nothing there is no ratio to judge
    nothing = outlier_verdict(_results([0, 0, 0]))
    assert nothing.outliers == ()
    assert all("its peers measured none" in line for line in nothing.lines)


def test_results_are_checked() -> None:
    with pytest.raises(ValueError):
        MemberResult("/dev/loop0", float("nan"), 1.0)
    with pytest.raises(ValueError):
        MemberResult("/dev/loop0", 1.0, -1.0)
    with pytest.raises(ValueError, match="repeat"):
        outlier_verdict([MemberResult("a", 1, 1), MemberResult("a", 1, 1)])


# -- the job file -------------------------------------------------------------------


def _sections(text: str) -> list[dict[str, str]]:
    sections: list[dict[str, str]] = []
    for line in text.splitlines():
        head = re.fullmatch(r"\[(.+)\]", line)
        if head:
            sections.append({"name": head.group(1)})
        elif "=" in line and not line.startswith(";"):
            key, value = line.split("=", 1)
            sections[-1][key] = value
    return sections


def test_the_job_reads_every_member_and_never_writes() -> None:
    text = member_check_job(LOOPS, 1.5)  # 1.5 s each way per member: three passes of 0.5 s
    glob, *sections = _sections(text)
    assert glob["name"] == "global" and glob["direct"] == "1"
    assert "filename" not in glob  # each section names its member
    # read only: fio's guard is its command-line option (fio 3.33 has no job-file
    # readonly=); the header says so and check_members refuses a writing executor
    assert "fio --readonly" in text and "readonly=" not in text
    assert len(sections) == 3 * 2 * len(LOOPS)
    for pass_no in (1, 2, 3):
        for i, path in enumerate(LOOPS):
            at = 2 * len(LOOPS) * (pass_no - 1) + 2 * i
            seq, rand = sections[at], sections[at + 1]
            assert (seq["name"], rand["name"]) == section_names(i, pass_no)
            assert seq["filename"] == rand["filename"] == path
            assert (seq["rw"], seq["bs"]) == ("read", "131072")
            assert (rand["rw"], rand["bs"]) == ("randread", "4096")
            for s in (seq, rand):
                assert s["stonewall"] == "1" and s["iodepth"] == "32"
                assert s["time_based"] == "1" and s["runtime"] == "500ms"
                assert "ramp_time" not in s
    modes = {value for line in text.splitlines() if line.startswith("rw")
             for value in [line.split("=", 1)[1]]}
    assert modes == {"read", "randread"}
    assert not re.search(r"write|trim|verify", text.split("[global]", 1)[1])


def test_the_job_escapes_colons_and_refuses_bad_input() -> None:
    text = member_check_job(["/dev/disk/by-path/pci-0000:00:17.0-ata-1"], 0.5, passes=1)
    assert "filename=/dev/disk/by-path/pci-0000\\:00\\:17.0-ata-1" in text
    assert "runtime=500ms" in text and text.count("[pass1-") == 2 and "[pass2-" not in text
    with pytest.raises(UserError, match="no members"):
        member_check_job([], 1.0)
    with pytest.raises(UserError, match="more than once"):
        member_check_job(["/dev/loop0", "/dev/loop0"], 1.0)
    with pytest.raises(UserError, match="seconds"):
        member_check_job(["/dev/loop0"], 0.0)
    with pytest.raises(UserError, match="seconds"):
        member_check_job(["/dev/loop0"], 0.2)  # 67 ms sections: too short
    assert "runtime=333ms" in member_check_job(["/dev/loop0"], 1.0)
    with pytest.raises(UserError, match="passes"):
        member_check_job(["/dev/loop0"], 1.0, passes=0)
    with pytest.raises(UserError, match="not a usable"):
        member_check_job(["/dev/loop0\nrw=write"], 1.0)


# -- the check through the fake fio --------------------------------------------------


def test_check_members_through_the_fake_fio() -> None:
    # the fake's "IOPS" per section: member 3 reads a quarter as fast as the others
    def model(section: str, _round: int) -> float:
        return (2_000.0 if "seq" in section else 50_000.0) / (4 if "member3" in section
                                                               else 1)

    fio = FakeFio(model)
    lines: list[str] = []
    results = check_members(LOOPS, fio, seconds=1.0, progress=lines.append)
    assert len(fio.calls) == 1 and fio.calls[0] == member_check_job(LOOPS, 1.0)
    assert fio.calls[0].count("[pass") == 3 * 2 * len(LOOPS)
    assert [r.name for r in results] == LOOPS
    assert results[0] == MemberResult("/dev/loop0", 2_000 * 131072 / 1e6, 50_000.0)
    assert results[2].rand_read_iops == 12_500.0
    assert outlier_verdict(results).outliers == ("/dev/loop2",)
    assert lines[0].startswith("member check: 4 members")
    assert len(lines) == 5 and "/dev/loop2: sequential read 65.5 MB/s" in lines[3]


def test_each_member_counts_its_best_pass() -> None:
    # the host took the CPU from member 2's random reads in pass 1 and from member 4's
    # sequential reads in passes 2 and 3: neither is an outlier; member 3 is slow in all
    def model(section: str, _round: int) -> float:
        seq = "seq" in section
        value = 2_000.0 if seq else 50_000.0
        if "member3" in section:
            value /= 4
        if ("pass1-member2" in section and not seq) or (
                "member4" in section and seq and "pass1" not in section):
            value *= 0.6
        return value

    results = check_members(LOOPS, FakeFio(model), seconds=1.0)
    assert [r.rand_read_iops for r in results] == [50_000.0, 50_000.0, 12_500.0, 50_000.0]
    assert outlier_verdict(results).outliers == ("/dev/loop2",)
    one_pass = check_members(LOOPS, FakeFio(model), seconds=1.0, passes=1)
    assert outlier_verdict(one_pass).outliers == ("/dev/loop1", "/dev/loop2")


def test_a_failed_fio_run_fails_the_check() -> None:
    fio = FakeFio(lambda _s, _r: 1.0, fail_rounds={1})
    with pytest.raises(MemberCheckFailed, match="member check failed: fio exited"):
        check_members(LOOPS, fio, seconds=1.0)


def test_a_writing_executor_is_refused() -> None:
    with pytest.raises(ValueError, match="read-only"):
        check_members(LOOPS, FioExecutor(read_only=False), seconds=1.0)


# -- like with like: a member holding data against freshly trimmed peers (issue 30) --------


def test_a_member_holding_data_is_not_called_slow_against_empty_peers() -> None:
    """`run matrix` called the only member that held data "0.72x its peers" when the others
    were freshly trimmed: reading space without data is faster on SSDs. Members are
    compared only with peers holding data on a like share of their space."""
    shares = [1.0, 0.0, 0.0, 0.0]
    results = [MemberResult(LOOPS[i], 1000.0, iops, shares[i])
               for i, iops in enumerate([7200.0, 10_000.0, 10_100.0, 9_900.0])]
    verdict = outlier_verdict(results)
    assert verdict.outliers == ()
    assert verdict.message == (
        "member check: no outlier among 3 members (none below 0.8x its peers); not judged: "
        "/dev/loop0 holds data on 100 % of its space, its peers on 0 % (trimmed or never "
        "written): space without data reads faster than data on SSDs, so they do not "
        "compare (purge or fill the members alike first)")
    assert verdict.lines[0] == ("/dev/loop0: sequential read 1,000.0 MB/s, 4 KiB random read "
                                "7,200 IOPS; not judged: no peer holds data on a like share of "
                                "its space")
    assert "0.72x" not in verdict.message
    # the empty ones are still compared with each other
    slow = [MemberResult(r.name, r.seq_read_mb_s, 2_000.0 if r.name == LOOPS[3] else
                         r.rand_read_iops, r.data_share) for r in results]
    assert outlier_verdict(slow).outliers == (LOOPS[3],)


def test_two_unlike_members_cannot_be_judged_and_unknown_shares_are_compared() -> None:
    pair = [MemberResult(LOOPS[0], 1000.0, 7200.0, 0.9), MemberResult(LOOPS[1], 1000.0,
                                                                      10_000.0, 0.1)]
    verdict = outlier_verdict(pair)
    assert verdict.outliers == ()
    assert verdict.message.startswith("member check: cannot judge: the members hold data on "
                                      "unlike shares of their space (/dev/loop0 90 %, "
                                      "/dev/loop1 10 %) (trimmed or never written)")
    # where ssdlab cannot tell what a member holds (None), members compare as before
    unknown = [MemberResult(LOOPS[0], 1000.0, 7200.0, None),
               MemberResult(LOOPS[1], 1000.0, 10_000.0, 0.0)]
    assert outlier_verdict(unknown).outliers == (LOOPS[0],)


def test_check_members_reads_what_each_member_holds() -> None:
    def model(section: str, _round: int) -> float:
        return 2_000.0 if "seq" in section else 50_000.0
    shares = {LOOPS[0]: 1.0, LOOPS[1]: 0.0, LOOPS[2]: 0.0, LOOPS[3]: None}
    results = check_members(LOOPS, FakeFio(model), seconds=1.0, held=shares.__getitem__)
    assert [r.data_share for r in results] == [1.0, 0.0, 0.0, None]


def test_what_a_loop_device_holds_is_its_backing_file_s_allocation(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path / "fake")
    backing = tmp_path / "disk.img"
    with open(backing, "wb") as f:
        f.write(os.urandom(1 << 20))  # 1 MiB of data, then 7 MiB never written
        f.truncate(8 << 20)
        os.fsync(f.fileno())
    fake.disk("loop0", "7:0", parent=VIRTUAL)
    fake.write("loop0", "loop/backing_file", f"{backing}\n")
    fake.disk("sdb", "8:16")
    share = data_share("/dev/loop0", sysfs=fake.sys)
    assert share is not None and abs(share - 1 / 8) <= 0.02
    assert data_share("/dev/sdb", sysfs=fake.sys) is None  # a drive does not say
    backing.unlink()
    assert data_share("/dev/loop0", sysfs=fake.sys) is None  # its file deleted


# -- confirmed, not once: a member slow in the first measurement is measured again --------


def test_a_member_slow_only_once_is_not_named() -> None:
    """The member check named a healthy /dev/loop1 "0.70x its peers'" beside the slowed
    /dev/loop2: a host stall during its measurement. Measured again, it is at its peers'
    level: slow once, not again, not named; the slowed member is slow again and named."""
    first = _results([12_443, 8_619, 3_087, 12_357], [272.7, 272.7, 67.9, 271.9])
    assert slow_metrics(first) == {"/dev/loop1": ("rand_read_iops",),
                                   "/dev/loop2": ("seq_read_mb_s", "rand_read_iops")}
    again: dict[str, dict[str, float]] = {
        "seq_read_mb_s": dict(zip(LOOPS, [272.1, 271.8, 68.0, 272.5], strict=True)),
        "rand_read_iops": dict(zip(LOOPS, [12_300.0, 12_210.0, 3_090.0, 12_400.0],
                                   strict=True))}
    verdict = outlier_verdict(first, again=again)
    assert verdict.outliers == ("/dev/loop2",)
    assert verdict.unconfirmed == ("/dev/loop1",)
    assert verdict.message == (
        "member check: 1 of 4 members below 0.8x their peers twice: /dev/loop2: sequential "
        "read 67.9 MB/s, 0.25x its peers' 272.7, again 68.0 MB/s, 0.25x its peers' 272.1 and "
        "4 KiB random read 3,087 IOPS, 0.25x its peers' 12,357, again 3,090 IOPS, 0.25x its "
        "peers' 12,300; slow once, not when measured again: not named (a host stall or a "
        "drive slow at times): /dev/loop1: 4 KiB random read 8,619 IOPS, 0.70x its peers' "
        "12,357, then 12,210 IOPS, 0.99x its peers' 12,300")
    assert verdict.lines[1].endswith("; measured again: 4 KiB random read 12,210 IOPS, 0.99x "
                                     "its peers' 12,300 -- slow once, not again")
    assert verdict.lines[2].endswith(" -- slow")
    assert "measured again" not in verdict.lines[0]
    # none slow the second time: no outlier, and the verdict says who was slow once
    alone = outlier_verdict(_results([12_443, 8_619, 12_000, 12_357]),
                            again={"rand_read_iops": dict(zip(LOOPS, [12_300, 12_210,
                                                                      12_000, 12_400],
                                                              strict=True))})
    assert alone.outliers == () and alone.unconfirmed == ("/dev/loop1",)
    assert alone.message.startswith("member check: no outlier among 4 members (none below "
                                    "0.8x its peers when measured again); slow once")
    # without a second measurement the first stands (as before)
    assert outlier_verdict(first).outliers == ("/dev/loop1", "/dev/loop2")
    assert outlier_verdict(first).unconfirmed == ()


def test_judge_members_measures_the_suspects_metric_again_and_names_the_confirmed() -> None:
    """A stall during one member's measurement (every pass of member 2's random reads in
    the first fio run) and a member slow throughout on random reads (member 3): the
    second fio run reads every member at random again, members backwards, and only
    member 3 is named."""
    def model(section: str, run: int) -> float:
        if "seq" in section:
            return 2_000.0
        value = 12_500.0 if "member3" in section else 50_000.0
        return value * 0.7 if run == 1 and "member2-rand" in section else value

    fio = FakeFio(model)
    lines: list[str] = []
    check = judge_members(LOOPS, fio, seconds=1.0, progress=lines.append)
    assert len(fio.calls) == 2
    assert fio.calls[1] == member_check_job(LOOPS, 1.0, again=["rand_read_iops"])
    assert check.again == {"rand_read_iops": {LOOPS[0]: 50_000.0, LOOPS[1]: 50_000.0,
                                              LOOPS[2]: 12_500.0, LOOPS[3]: 50_000.0}}
    assert check.verdict.outliers == ("/dev/loop2",)
    assert check.verdict.unconfirmed == ("/dev/loop1",)
    assert any("measuring the 4 KiB random read of every member again" in x for x in lines)
    assert "member check: /dev/loop2 again: 4 KiB random read 12,500 IOPS" in lines
    # the second job: random reads only, read only, members backwards, rotating per pass
    sections = _sections(fio.calls[1])[1:]
    assert [s["rw"] for s in sections] == ["randread"] * 12
    assert [s["filename"] for s in sections[:4]] == LOOPS[::-1]
    assert [s["filename"] for s in sections[4:8]] == [LOOPS[2], LOOPS[1], LOOPS[0], LOOPS[3]]
    assert sections[0]["name"] == "again-pass1-member4-rand-read"
    assert "measured again" in fio.calls[1] and not re.search(
        r"write|trim|verify", fio.calls[1].split("[global]", 1)[1])
    # slow on both: both measured again, each member's sequential then random section
    both = FakeFio(lambda section, _run: (2_000.0 if "seq" in section else 50_000.0) / (
        4 if "member3" in section else 1))
    slowed = judge_members(LOOPS, both, seconds=1.0)
    assert slowed.again is not None and set(slowed.again) == {"seq_read_mb_s",
                                                              "rand_read_iops"}
    assert [s["rw"] for s in _sections(both.calls[1])[1:3]] == ["read", "randread"]
    assert slowed.verdict.outliers == ("/dev/loop2",) and slowed.verdict.unconfirmed == ()
    # nobody slow: one fio run
    quiet = FakeFio(lambda section, _run: 2_000.0 if "seq" in section else 50_000.0)
    calm = judge_members(LOOPS, quiet, seconds=1.0)
    assert len(quiet.calls) == 1 and calm.again is None and calm.verdict.outliers == ()


def test_the_second_order_never_repeats_the_first() -> None:
    assert again_order(4, 1) == [3, 2, 1, 0]
    assert again_order(4, 2) == [2, 1, 0, 3]
    assert again_order(4, 5) == [3, 2, 1, 0]
    assert again_order(1, 3) == [0]
