"""A set's job files merged into one and fio's output split back per target, as pure
functions: against real fio output recorded from a merged job file
(tests/fixtures/fio/3.33/i_set_two_targets.*) and against the fake fio."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from ssdlab.engine.jobfile import render
from ssdlab.engine.jobmerge import (
    SET_KEY,
    LogMove,
    first_job_file,
    log_moves,
    merge_jobs,
    own_lines,
    split_run,
)
from ssdlab.engine.jobtext import JobFileError, parse_job_file, positions
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioRun
from ssdlab.plan.specs import CellSpec, FioJob, Mix, Pattern
from tests.support.fake_fio import FakeFio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"

#: the job file of each target of the recorded set (record.sh (i)): {n} its name, {path} it
MEMBER = """; ssdlab fixture: target {n}
[global]
filename={path}
ioengine=libaio
direct=1
group_reporting=1
thread=1

[randread-4k]
stonewall
rw=randread
bs=4k
iodepth=4
numjobs=2
size=256M
time_based=1
runtime=500ms

[seqwrite-128k]
stonewall
rw=write
bs=128k
iodepth=4
numjobs=1
size=256M
time_based=1
runtime=500ms
"""


def _recorded() -> tuple[str, str, list[tuple[str, str]]]:
    """The recorded merged job file, fio's stdout of it, and the targets' own job files."""
    text = (FIXTURES / "i_set_two_targets.fio").read_text()
    paths = re.findall(r"^filename=(.+)$", text, re.M)
    members = [("t1", MEMBER.format(n="one", path=paths[0])),
               ("t2", MEMBER.format(n="two", path=paths[1]))]
    return text, (FIXTURES / "i_set_two_targets.json").read_text(), members


def _run(job_text: str, stdout: str, *, returncode: int = 0, stderr: str = "",
         error: str | None = None) -> FioRun:
    output = parse_fio_output(stdout) if stdout else None
    return FioRun(job_text, ("fio", "--output-format=json+", "--eta=never", "-"), stdout,
                  stderr, returncode, 10.0, 12.5, False, output, error)


def _cell(name: str, threads: int = 2) -> CellSpec:
    return CellSpec(name=name, pattern=Pattern.RANDOM, block_bytes=4096, mix=Mix(100),
                    threads=threads, iodepth=8, offset_bytes=0, size_bytes=1 << 26,
                    runtime_s=0.1)


# -- reading a job file ----------------------------------------------------------------


def test_global_options_are_flattened_into_each_job_as_fio_reads_them() -> None:
    parsed = parse_job_file("; head\n# too\n[global]\nfilename=/a\nbs=4k\n\n[one]\nbs=8k\n"
                            "[global]\niodepth=4\n[two]\nstonewall\n")
    assert parsed.comments == ("head", "too")
    one, two = parsed.jobs
    # a later [global] does not reach the jobs before it, and does not reset the earlier one
    assert one.options == (("filename", "/a"), ("bs", "4k"), ("bs", "8k"))
    assert two.options == (("filename", "/a"), ("bs", "4k"), ("iodepth", "4"),
                           ("stonewall", None))
    assert one.value("bs") == "8k" and two.has_flag(["stonewall"])
    assert [[j.name for j in p] for p in positions(parsed.jobs)] == [["one"], ["two"]]


def test_an_option_outside_any_section_is_refused() -> None:
    with pytest.raises(JobFileError, match="line 1"):
        parse_job_file("bs=4k\n[one]\n")


# -- merging ---------------------------------------------------------------------------


def test_the_recorded_merged_job_file_is_what_merge_jobs_writes() -> None:
    text, _, members = _recorded()
    assert merge_jobs(members, "ssdlab fixture: one fio run for a set of two targets"
                      ).text == text


def test_positions_interleave_and_only_the_first_target_keeps_stonewall() -> None:
    a = render(FioJob("/dev/a", (_cell("c1"), _cell("c2"), _cell("c3"))))
    b = render(FioJob("/dev/b", (_cell("c1"), _cell("c2"))))
    merged = merge_jobs([("t1", a), ("t2", b)])
    jobs = parse_job_file(merged.text).jobs
    assert [j.name for j in jobs] == ["t1.c1", "t2.c1", "t1.c2", "t2.c2", "t1.c3"]
    assert [j.has_flag(["stonewall"]) for j in jobs] == [True, False, True, False, True]
    assert [j.has_flag(["new_group"]) for j in jobs] == [False, True, False, True, False]
    assert "[global]" not in merged.text
    # every job carries its own target's global options, its own options after them
    assert [j.value("filename") for j in jobs] == ["/dev/a", "/dev/b", "/dev/a", "/dev/b",
                                                   "/dev/a"]
    assert all(j.value("group_reporting") == "1" for j in jobs)
    assert [m.jobs for m in merged.members] == [("c1", "c2", "c3"), ("c1", "c2")]
    assert [m.files for m in merged.members] == [("/dev/a",), ("/dev/b",)]


def test_jobs_running_together_in_a_target_stay_together() -> None:
    a = "[global]\nfilename=/a\n[w]\nrw=write\n[r]\nrw=read\n[x]\nstonewall\nrw=trim\n"
    b = "[global]\nfilename=/b\n[w]\nstonewall\nrw=write\n[r]\nrw=read\n"
    jobs = parse_job_file(merge_jobs([("t1", a), ("t2", b)]).text).jobs
    assert [j.name for j in jobs] == ["t1.w", "t1.r", "t2.w", "t2.r", "t1.x"]
    # t2's first job starts its own group; its second joins it, as in its own file
    assert [j.has_flag(["new_group"]) for j in jobs] == [False, False, True, False, False]
    assert [j.has_flag(["stonewall"]) for j in jobs] == [False, False, False, False, True]


def test_wait_for_names_the_job_of_the_same_target() -> None:
    text = "[global]\nfilename=/a\n[w]\nrw=write\n[r]\nwait_for=w\nrw=read\n"
    jobs = parse_job_file(merge_jobs([("t1", text), ("t2", text)]).text).jobs
    assert [j.value("wait_for") for j in jobs if j.name.endswith(".r")] == ["t1.w", "t2.w"]


def test_tags_must_be_unique_words() -> None:
    with pytest.raises(ValueError, match="unique"):
        merge_jobs([("t1", "[a]\n"), ("t1", "[a]\n")])


def test_logs_are_renamed_and_their_thread_numbers_mapped_back() -> None:
    a = ("[global]\nfilename=/a\nwrite_iops_log=/tmp/A/iops\nlog_avg_msec=100\n"
         "[c1]\nnumjobs=2\n[c2]\nstonewall\nnumjobs=1\n")
    b = "[global]\nfilename=/b\nwrite_iops_log=/tmp/B/iops\n[c1]\nnumjobs=3\n[c2]\nstonewall\n"
    merged = merge_jobs([("t1", a), ("t2", b)])
    jobs = parse_job_file(merged.text).jobs
    assert [j.value("write_iops_log") for j in jobs] == [
        "/tmp/A/iops.t1", "/tmp/B/iops.t2", "/tmp/A/iops.t1", "/tmp/B/iops.t2"]
    # fio numbers threads in the order of the merged file: t1.c1 1-2, t2.c1 3-5, t1.c2 6 ...
    assert merged.members[0].logs == (LogMove("/tmp/A/iops.t1", "/tmp/A/iops",
                                              ((1, 1), (2, 2), (6, 3))),)
    assert merged.members[1].logs == (LogMove("/tmp/B/iops.t2", "/tmp/B/iops",
                                              ((3, 1), (4, 2), (5, 3), (7, 4))),)
    names = ["iops.t1_iops.1.log", "iops.t1_iops.6.log", "iops.t1_clat_hist.2.log.fz",
             "iops.t1_iops.9.log", "iops_iops.1.log", "other.log"]
    assert log_moves(merged.members[0].logs[0], names) == [
        ("/tmp/A/iops.t1_clat_hist.2.log.fz", "/tmp/A/iops_clat_hist.2.log.fz"),
        ("/tmp/A/iops.t1_iops.1.log", "/tmp/A/iops_iops.1.log"),
        ("/tmp/A/iops.t1_iops.6.log", "/tmp/A/iops_iops.3.log"),
    ]


def test_a_log_named_by_its_job_follows_the_job() -> None:
    merged = merge_jobs([("t1", "[c]\nwrite_bw_log\n"), ("t2", "[c]\nwrite_bw_log\n")])
    assert merged.members[1].logs == (LogMove("t2.c", "c", ((2, 1),)),)
    assert log_moves(merged.members[1].logs[0], ["t2.c_bw.2.log"]) == [
        ("t2.c_bw.2.log", "c_bw.1.log")]


# -- splitting -------------------------------------------------------------------------


def test_recorded_output_splits_into_each_targets_own_truth() -> None:
    text, stdout, members = _recorded()
    merged = dataclasses.replace(merge_jobs(members), note={"set": "s", "fio_run": 3})
    parts = split_run(_run(text, stdout), merged)
    raw = json.loads(stdout)["jobs"]
    for tag, (_, own_text) in zip(("t1", "t2"), members, strict=True):
        part = parts[tag]
        assert part.ok and part.error is None and part.job_text == own_text
        assert part.output is not None
        assert [j.name for j in part.output.jobs] == ["randread-4k", "seqwrite-128k"]
        mine = [j for j in raw if j["jobname"].startswith(f"{tag}.")]
        for parsed, entry in zip(part.output.jobs, mine, strict=True):
            assert parsed.read.total_ios == entry["read"]["total_ios"]
            assert parsed.write.io_bytes == entry["write"]["io_bytes"]
            assert parsed.read.clat_bins_ns == {int(k): v for k, v in
                                                entry["read"]["clat_ns"].get("bins", {}).items()}
        document = part.output.documents[0]
        assert document["fio version"] == "fio-3.33"
        assert document[SET_KEY] == {"set": "s", "fio_run": 3, "tag": tag, "targets": 2,
                                     "job_file": merged.text}
        assert part.started_at == 10.0 and part.ended_at == 12.5
    # the two targets measured different things: the parts are not copies
    assert parts["t1"].output and parts["t2"].output
    assert parts["t1"].output.jobs[0].read.total_ios != parts["t2"].output.jobs[0].read.total_ios


def test_a_failed_job_is_its_own_targets_failure_only() -> None:
    text, stdout, members = _recorded()
    doc = json.loads(stdout)
    doc["jobs"][1]["error"] = 5  # t2.randread-4k
    broken = json.dumps(doc)
    run = _run(text, broken, returncode=1, stderr="fio: io_u error on file /x: EIO\n",
               error="fio job t2.randread-4k failed: error 5 (Input/output error)")
    parts = split_run(run, merge_jobs(members))
    assert parts["t1"].ok
    assert parts["t2"].error == "fio job randread-4k failed: error 5 (Input/output error)"


def test_a_run_without_output_fails_every_target() -> None:
    text, _, members = _recorded()
    run = _run(text, "", returncode=1, stderr="fio: failed parsing rw=bogus\n",
               error="fio exited with status 1: fio: failed parsing rw=bogus")
    parts = split_run(run, merge_jobs(members))
    assert {p.error for p in parts.values()} == {run.error}
    assert all(p.output is None for p in parts.values())


def test_messages_naming_another_target_are_not_a_targets() -> None:
    _, _, members = _recorded()
    merged = merge_jobs(members)
    one, two = merged.members
    text = (f"verify: bad magic header at file {two.files[0]} offset 0\n"
            f"verify: bad magic header at file {one.files[0]} offset 4096\n"
            "fio: some note for all\n"
            "t1.randread-4k: (g=0): rw=randread\n")
    assert own_lines(text, one, [two]) == (
        f"verify: bad magic header at file {one.files[0]} offset 4096\n"
        "fio: some note for all\nrandread-4k: (g=0): rw=randread\n")
    assert own_lines(text, two, [one]) == (
        f"verify: bad magic header at file {two.files[0]} offset 0\nfio: some note for all\n")


def test_the_fake_fio_runs_a_merged_file_and_each_target_gets_its_cells() -> None:
    a = render(FioJob("/dev/a", (_cell("c1"), _cell("c2"))))
    b = render(FioJob("/dev/b", (_cell("c1"),)))
    merged = merge_jobs([("t1", a), ("t2", b)])
    fake = FakeFio(lambda name, n: 1000.0 if name.startswith("t1.") else 2000.0)
    parts = split_run(fake.run(merged.text, 60.0), merged)
    assert parts["t1"].output and parts["t2"].output
    assert [(j.name, j.total_iops) for j in parts["t1"].output.jobs] == [("c1", 1000.0),
                                                                          ("c2", 1000.0)]
    assert [(j.name, j.total_iops) for j in parts["t2"].output.jobs] == [("c1", 2000.0)]


# -- the dry run -----------------------------------------------------------------------


def test_the_first_job_file_of_a_plan_is_found() -> None:
    job = render(FioJob("/dev/a", (_cell("c1"),)), "ssdlab: preconditioning")
    plan = (f"DRY RUN: nothing will be written\n== iops: 1 cell\npurge: blkdiscard\n"
            f"-- preconditioning job file:\n{job}-- job file of every round:\n[x]\nrw=read\n")
    assert first_job_file(plan) == job
    assert first_job_file("no job here\n") is None
