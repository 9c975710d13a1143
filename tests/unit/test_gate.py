"""The fio gate (engine/gate.py): the job file it writes, when it stays out of the way, and
its locks and FIFO driven by the very commands the jobs run (no fio: shells)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ssdlab.engine.gate import (
    GATE_ENV,
    MEMORY_SHARE,
    Gate,
    buffer_bytes,
    gate_job,
    gated,
    namespace_works,
)
from ssdlab.engine.jobtext import parse_job_file

ROUND = """; a round
[global]
ioengine=libaio
filename=/dev/loop7
direct=1
group_reporting=1

[a]
stonewall
rw=randread
numjobs=2

[b]
stonewall
rw=randwrite

[c]
rw=randwrite
numjobs=3

[d]
stonewall
rw=read
"""


def _options(text: str) -> dict[str, list[tuple[str, str | None]]]:
    return {job.name: list(job.options) for job in parse_job_file(text).jobs}


def test_barriers_become_prerun_waits_and_postrun_ends(tmp_path: Path) -> None:
    gated_job = gate_job(ROUND, tmp_path)
    assert gated_job is not None
    assert gated_job.threads == (2, 4, 1)  # numjobs per position: a | b, c | d
    jobs = _options(gated_job.text)
    assert list(jobs) == ["a", "b", "c", "d"]  # the same jobs, in the same order
    for name, options in jobs.items():
        keys = [k for k, _ in options]
        assert "stonewall" not in keys
        assert ("ioengine", "libaio") in options and ("filename", "/dev/loop7") in options
        position = {"a": 0, "b": 1, "c": 1, "d": 2}[name]
        say = f"| dd of={tmp_path}/ev oflag=nonblock status=none"
        assert [v for k, v in options if k == "exec_prerun"] == [
            f"echo r{position} {say} && flock -s {tmp_path}/L{position} true && "
            f"test -e {tmp_path}/go{position}"]
        assert [v for k, v in options if k == "exec_postrun"] == [f"echo {position} {say}"]
    assert [k for k, _ in jobs["b"]].count("new_group") == 1  # a position's first job
    assert "new_group" not in [k for k, _ in jobs["c"]] + [k for k, _ in jobs["a"]]
    assert gated_job.text.startswith("; a round\n")


@pytest.mark.parametrize(("change", "why"), [
    (("filename=/dev/loop7", "filename=rel.img"), "a relative file"),
    (("filename=/dev/loop7\n", ""), "no file: fio would make one in its directory"),
    (("rw=read\n", "rw=read\nstartdelay=1\n"), "ordering of its own"),
    (("rw=read\n", "rw=read\nwait_for=a\n"), "ordering of its own"),
    (("rw=read\n", "rw=read\nexec_prerun=true\n"), "its own exec"),
    (("rw=read\n", "rw=read\nwrite_iops_log=logs/x\n"), "a relative log"),
    (("[c]", "[c d]"), "a name that is not a plain file name"),
])
def test_job_files_the_gate_leaves_as_they_are(change: tuple[str, str], why: str,
                                               tmp_path: Path) -> None:
    assert gate_job(ROUND.replace(*change), tmp_path) is None, why


def test_a_file_in_an_absolute_directory_is_fine(tmp_path: Path) -> None:
    text = ROUND.replace("filename=/dev/loop7", "directory=/mnt/share\nfilename=t.tmp")
    assert gate_job(text, tmp_path) is not None
    assert gate_job(text.replace("directory=/mnt/share", "directory=share"), tmp_path) is None


def test_one_position_needs_no_gate(tmp_path: Path) -> None:
    text = ROUND.replace("[b]\nstonewall\n", "[b]\n").replace("[d]\nstonewall\n", "[d]\n")
    assert gate_job(text, tmp_path) is None


@pytest.mark.skipif(not namespace_works(), reason="needs root and util-linux unshare")
def test_the_gate_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GATE_ENV, "0")
    with gated(ROUND) as (text, cwd):
        assert (text, cwd) == (ROUND, None)
    monkeypatch.delenv(GATE_ENV)
    with gated(ROUND) as (text, cwd):
        assert cwd is not None and cwd.is_dir() and text != ROUND
    assert not cwd.exists()  # everything it made is gone


def _sh(command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", command])


def _commands(tmp_path: Path) -> tuple[tuple[int, ...], Callable[[str, str], str]]:
    gated_job = gate_job(ROUND, tmp_path)
    assert gated_job is not None
    options = _options(gated_job.text)

    def cmd(job: str, key: str) -> str:
        (value,) = [v for k, v in options[job] if k == key]
        assert value is not None
        return value

    return gated_job.threads, cmd


def _waiting(processes: list[subprocess.Popen[bytes]]) -> bool:
    time.sleep(0.3)
    return all(p.poll() is None for p in processes)


def test_a_position_starts_only_when_every_job_before_it_has_ended(tmp_path: Path) -> None:
    threads, cmd = _commands(tmp_path)
    with Gate(threads, tmp_path) as gate:
        jobs = ("a", "a", "b", "c", "c", "c")
        waiting = [_sh(cmd(name, "exec_prerun")) for name in jobs]
        assert _waiting(waiting) and gate.opened == 0  # d is not set up yet: nobody starts
        waiting.append(_sh(cmd("d", "exec_prerun")))
        for p in waiting[:2]:
            assert p.wait(10) == 0  # every job is ready: position 0 starts
        assert _waiting(waiting[2:]) and gate.opened == 1  # position 1 and 2 wait
        subprocess.run(["sh", "-c", cmd("a", "exec_postrun")], check=True)
        assert _waiting(waiting[2:])  # one of a's two clones is not enough
        subprocess.run(["sh", "-c", cmd("a", "exec_postrun")], check=True)
        for p in waiting[2:6]:
            assert p.wait(10) == 0  # all of position 1 started at once
        assert waiting[6].poll() is None and gate.opened == 2
        for name in ("b", "c", "c", "c"):
            subprocess.run(["sh", "-c", cmd(name, "exec_postrun")], check=True)
        assert waiting[6].wait(10) == 0 and gate.opened == 3


def test_jobs_that_never_set_themselves_up_hold_nobody(tmp_path: Path) -> None:
    threads, cmd = _commands(tmp_path)
    with Gate(threads, tmp_path, grace_s=0.5) as gate:
        # one of c's clones and d fail to set themselves up: they never say ready
        waiting = [_sh(cmd(name, "exec_prerun")) for name in ("a", "a", "b", "c", "c")]
        for p in waiting[:2]:
            assert p.wait(10) == 0  # the grace is over: position 0 starts with those ready
        for name in ("a", "a"):
            subprocess.run(["sh", "-c", cmd(name, "exec_postrun")], check=True)
        for p in waiting[2:]:
            assert p.wait(10) == 0
        for name in ("b", "c", "c"):  # every ready job of position 1 has ended
            subprocess.run(["sh", "-c", cmd(name, "exec_postrun")], check=True)
        deadline = time.monotonic() + 10
        while gate.opened < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gate.opened == 3  # position 2 has nobody ready: it is over as it opens


def test_when_ssdlab_is_gone_the_waiting_jobs_fail_and_ends_do_not_block(
        tmp_path: Path) -> None:
    gated_job = gate_job(ROUND, tmp_path)
    assert gated_job is not None
    prerun = next(v for k, v in _options(gated_job.text)["d"] if k == "exec_prerun") or ""
    prerun = prerun.split(" && ", 1)[1]  # its wait only: nobody else says ready
    postrun = next(v for k, v in _options(gated_job.text)["a"] if k == "exec_postrun") or ""
    with Gate(gated_job.threads, tmp_path):
        waiting = _sh(prerun)
        time.sleep(0.2)
        assert waiting.poll() is None
    # the gate closed without opening position 2: its lock is free, but there is no go file
    assert waiting.wait(10) != 0
    ended = subprocess.run(["sh", "-c", postrun], capture_output=True, timeout=10, check=False)
    assert ended.returncode != 0  # the FIFO has no reader: the write fails at once


def test_jobs_run_as_processes_through_the_gate(tmp_path: Path) -> None:
    threaded = ROUND.replace("direct=1\n", "direct=1\nthread=1\n")
    gated_job = gate_job(threaded, tmp_path)
    assert gated_job is not None
    for options in _options(gated_job.text).values():
        assert "thread" not in [k for k, _ in options]
        assert ("direct", "1") in options


def test_buffers_are_the_sum_of_jobs_x_depth_x_largest_block() -> None:
    text = ("[global]\nfilename=/dev/loop7\n\n[a]\nbs=128k\niodepth=32\nnumjobs=2\n\n"
            "[b]\nstonewall\nbsrange=4k-1M\niodepth=8\n\n[c]\nstonewall\n\n"
            "[d]\nstonewall\nbssplit=4k/10:64k/90\niodepth=4\nnumjobs=3\n")
    jobs = parse_job_file(text).jobs
    assert buffer_bytes(jobs) == (2 * 32 * 128 * 1024 + 8 * (1 << 20) + 4096
                                  + 3 * 4 * 64 * 1024)


def test_a_round_whose_buffers_would_not_fit_runs_as_it_is(tmp_path: Path) -> None:
    heavy = ROUND.replace("direct=1\n", "direct=1\nbs=1M\niodepth=256\n")
    need = (2 + 1 + 3 + 1) * 256 * (1 << 20)  # every clone of every position at once
    assert gate_job(heavy, tmp_path, memory=int(need / MEMORY_SHARE)) is not None
    assert gate_job(heavy, tmp_path, memory=int(need / MEMORY_SHARE) - 1) is None


def test_the_gate_commands_survive_fio_s_job_file_syntax(tmp_path: Path) -> None:
    gated_job = gate_job(ROUND, tmp_path)
    assert gated_job is not None
    for options in _options(gated_job.text).values():
        for key, value in options:
            if key.startswith("exec_"):
                # fio ends an option's value at a comment character
                assert value is not None and ";" not in value and "#" not in value
    odd = tmp_path / "a dir;x"
    odd.mkdir()
    assert gate_job(ROUND, odd) is None  # its commands could not name it plainly


DIR_PREFIX = "ssdlab-gate-"  # engine/scratch.py: ssdlab-KIND-PID-random


def test_directories_a_killed_ssdlab_left_are_swept(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid nobody has now
    left = tmp_path / f"{DIR_PREFIX}{gone.pid}-abc"
    mine = tmp_path / f"{DIR_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{DIR_PREFIX}notapid"
    for directory in (left, mine, other):
        directory.mkdir()
        (directory / "L1").touch()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(GATE_ENV, raising=False)
    with gated(ROUND) as (_, cwd):
        made = cwd
    assert not left.exists() and mine.exists() and other.exists()
    if made is not None:  # the gate's own directory is named after this process, and gone
        assert made.name.startswith(f"{DIR_PREFIX}{os.getpid()}-") and not made.exists()
