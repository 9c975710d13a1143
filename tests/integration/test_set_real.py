"""Several targets on one host in one run (a set, docs/sets.md), for real: four emulated
SSDs in one ``ssdlab run pts``, one fio process per round for all four; a set with a
mounted device among its targets refused before any I/O; Ctrl-C while the shared fio runs,
then resuming one run by its own id and the rest by the set's; a merged job file's fio
logs back under each target's own names.

Everything is judged by counts, the stored records and the emulators' own counters, never
by how long anything took."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ssdlab.engine.jobmerge import SET_KEY, merge_jobs
from ssdlab.engine.jobtext import parse_job_file
from ssdlab.engine.mux import move_logs
from ssdlab.engine.runner import FioExecutor
from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.targets import emulator
from tests.conftest import LoopFactory
from tests.support.cli import (
    fio_processes,
    killed_at_exit,
    one_line_error,
    runner_pid,
    sha256_of,
    ssdlab,
)

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
#: the shortest PTS that still has every part: the IOPS test, two cells, 0.1 s each
PTS = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
       "0/100,100/0", "--round-seconds", "0.1", "--max-rounds", "5", "--qd", "8")


def _counters(emu: emulator.Emulator) -> dict[str, int]:
    counters = emulator.stats(emu)["counters"]
    assert isinstance(counters, dict)
    return {k: int(v) for k, v in counters.items() if k.startswith("host_")}


def _fio_records(run: RunData) -> list[tuple[str, str]]:
    """(job file, stdout) of every fio invocation stored with the run (loaded with its raw
    output): its preconditioning and its rounds."""
    out = [(s.fio.job_text, s.fio.stdout or "") for s in run.steps if s.fio is not None]
    out += [(r.job_text or "", r.stdout or "") for t in run.tests for r in t.rounds]
    return out


def _own_jobs_only(run: RunData, place: int, devices: list[str]) -> list[tuple[str, int]]:
    """Check that every stored fio record of ``run`` is its own target's alone; the shared
    fio runs (set id, number) it took part in."""
    shared = []
    others = [d for d in devices if d != run.target["path"]]
    for job_text, stdout in _fio_records(run):
        assert f"filename={run.target['path']}\n" in job_text
        assert not any(f"filename={d}\n" in job_text for d in others)
        document = json.loads(stdout[stdout.index("{"):])
        # its own jobs, under the names of its own job file, and nothing else
        assert [job["jobname"] for job in document["jobs"]] == [
            j.name for j in parse_job_file(job_text).jobs]
        mark = document[SET_KEY]
        assert mark["tag"] == f"t{place + 1}" and mark["targets"] == len(devices)
        # the combined job file names every target, each job under its target's tag
        assert all(f"filename={d}\n" in mark["job_file"] for d in devices)
        shared.append((mark["set"], mark["fio_run"]))
    return shared


def test_four_emulated_ssds_run_as_one_set(emu_run_dir: Path, shm_dir: Path) -> None:
    emus = [emulator.start(f"e{i}", "enterprise-tlc", 64 * MIB, loop=True)
            for i in range(1, 5)]
    devices = [str(e.loop_device) for e in emus]
    before = [_counters(e) for e in emus]
    listing = shm_dir / "targets.txt"
    listing.write_text(f"# two more, from a file\n{devices[2]}\n{devices[3]}  # the last\n")
    store_path = shm_dir / "r.sqlite"
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    result = ssdlab("run", "pts", "--target", devices[0], "--target", devices[1],
                    "--targets-file", str(listing), *PTS, "--destroy-data", "--store",
                    str(store_path), env=env, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout[-3000:]
    assert result.stderr == ""
    names = [os.path.basename(d) for d in devices]
    for name in names:  # every run's lines and outcome, prefixed with its target
        assert f"{name}: [QUICK] run " in result.stdout
        assert f"{name}: run " in result.stdout and " complete" in result.stdout

    with Store.open(store_path) as store:
        runs = store.list_runs()
        assert len(runs) == 4
        sets = set(store.run_sets().values())
        assert len(sets) == 1
        set_id = sets.pop()
        data = store.load_set(set_id)
        assert data.targets == devices and data.suite == "pts"
        loaded = [store.load(run_id, with_raw=True) for _, run_id in data.runs]
    assert [p for p, _ in data.runs] == [0, 1, 2, 3]
    assert [r.target["path"] for r in loaded] == devices  # in the order given
    shared: set[tuple[str, int]] = set()
    for place, run in enumerate(loaded):
        assert run.status == "complete" and run.set_id == set_id
        iops = run.test("iops")
        assert iops.status in ("steady", "not_steady")  # a verdict of its own
        assert iops.verdicts["primary"]["message"]
        assert run.target.get("details", {}).get("emulator") or "emulator-stats" in [
            e.kind for e in run.events]
        shared.update(_own_jobs_only(run, place, devices))
        assert [e.kind for e in run.events].count("set-host") == 1
    # one fio process per round for the whole set: as many as the longest run's fio
    # invocations, not the sum of the four
    calls = [len(_fio_records(r)) for r in loaded]
    assert data.detail["fio_runs"] == max(calls) == len(shared)
    assert {s for s, _ in shared} == {set_id}
    assert sum(calls) >= 4 * min(calls) > data.detail["fio_runs"]
    # each drive got its own I/O, by its own count: two capacities of preconditioning, and
    # the rounds' reads
    for emu, was in zip(emus, before, strict=True):
        now = _counters(emu)
        assert now["host_write_bytes"] - was["host_write_bytes"] >= 2 * 64 * MIB
        assert now["host_read_bytes"] > was["host_read_bytes"]

    shown = ssdlab("show", set_id, "--store", str(store_path))
    assert shown.returncode == 0 and shown.stderr == ""
    assert shown.stdout.startswith(f"set {set_id}  suite pts  4 targets  4 runs")
    for place, run in enumerate(loaded):
        assert f"[{place + 1}] {names[place]} ({devices[place]}): run {run.run_id} complete" \
            in shown.stdout
    assert shown.stdout.count("  IOPS [") == 4
    listed = ssdlab("runs", "--store", str(store_path)).stdout
    assert listed.count(set_id) == 4
    report = ssdlab("report", set_id, "-o", str(shm_dir / "report"), "--no-pdf",
                    "--store", str(store_path))
    assert report.returncode == 0, report.stderr
    html = (shm_dir / "report" / "report.html").read_text()
    assert all(r.run_id in html for r in loaded) and "4 runs compared" in html


def test_a_mounted_target_refuses_the_set_before_any_io(
        emu_run_dir: Path, shm_dir: Path, loop_device: LoopFactory) -> None:
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    emus = [emulator.start(f"r{i}", "enterprise-tlc", 64 * MIB, loop=True) for i in (1, 2)]
    mounted = loop_device(64 * MIB)
    assert subprocess.run(["mkfs.ext4", "-q", "-F", mounted], capture_output=True,
                          check=False).returncode == 0
    point = shm_dir / "mnt"
    point.mkdir()
    assert subprocess.run(["mount", "-o", "ro,noload", mounted, str(point)],
                          capture_output=True, check=False).returncode == 0
    try:
        backing = Path(f"/sys/block/{Path(mounted).name}/loop/backing_file").read_text()
        digest = sha256_of(backing.strip())
        before = [_counters(e) for e in emus]
        store_path = shm_dir / "r.sqlite"
        result = ssdlab("run", "pts", "--target", str(emus[0].loop_device), "--target",
                        mounted, "--target", str(emus[1].loop_device), *PTS,
                        f"--destroy-data={emus[0].loop_device},{mounted},"
                        f"{emus[1].loop_device}", "--store", str(store_path),
                        env={"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)})
        assert result.returncode == 3
        assert one_line_error(result) == (
            f"Error: refusing the set: {mounted}: refusing {mounted}: {mounted} is mounted "
            f"on {point}; unmount it first")
        assert result.stdout == "" and not store_path.exists()
        # not a byte written to any of them
        assert [_counters(e)["host_write_bytes"] for e in emus] == [
            b["host_write_bytes"] for b in before]
        assert sha256_of(backing.strip()) == digest
    finally:
        subprocess.run(["umount", str(point)], capture_output=True, check=False)


def _wait_for(what: str, done: Any, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _rounds(store_path: Path) -> dict[str, int]:
    with Store.open(store_path) as store:
        return {r.run_id: len(store.load(r.run_id).test("iops").rounds)
                for r in store.list_runs() if "iops" in r.tests}


def test_ctrl_c_while_the_shared_fio_runs_then_resume(shm_dir: Path) -> None:
    targets = [str(shm_dir / "a.img"), str(shm_dir / "b.img")]
    store_path = shm_dir / "r.sqlite"
    slow = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
            "0/100,100/0", "--round-seconds", "1", "--max-rounds", "5", "--qd", "4",
            "--no-precondition", "--purge", "none")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ssdlab", "run", "pts", "--target", targets[0], "--target",
         targets[1], "--size", "64MiB", *slow, "--store", str(store_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with killed_at_exit(proc):
        _wait_for("the set's first fio run", lambda: proc.poll() is not None or any(
            runner_pid(pid) == proc.pid for pid in fio_processes()))
        assert proc.poll() is None, proc.communicate()  # it ended before its first fio run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert out.count("interrupted, stopped by Ctrl-C") == 2  # each run's own outcome
    assert err.strip().splitlines()[-1].startswith("Error: set set-")
    assert "ssdlab resume set-" in err
    assert not [pid for pid in fio_processes() if runner_pid(pid) == proc.pid]
    with Store.open(store_path) as store:
        runs = {r.run_id: r.status for r in store.list_runs()}
        (set_id,) = set(store.run_sets().values())
    assert list(runs.values()) == ["interrupted"] * 2
    stopped = _rounds(store_path)
    assert len(set(stopped.values())) == 1  # both took part in every shared fio run

    first, second = sorted(runs)
    alone = ssdlab("resume", first, "--store", str(store_path), timeout=600)
    assert alone.returncode == 0, alone.stderr
    together = ssdlab("resume", set_id, "--store", str(store_path), timeout=600)
    assert together.returncode == 0, together.stderr
    assert together.stderr == ""
    with Store.open(store_path) as store:
        done = [store.load(r) for r in (first, second)]
        data = store.load_set(set_id)
    assert [r.status for r in done] == ["complete"] * 2
    for run in done:
        numbers = [r.round_no for r in run.test("iops").rounds]
        assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= stopped[
            run.run_id]
    assert data.detail["resumed"] == 1
    paths = {r.run_id: r.target["path"] for r in done}
    assert [paths[r] for _, r in data.runs] == targets  # the set's runs in the order given


def test_a_merged_runs_logs_go_back_under_each_targets_own_names(shm_dir: Path) -> None:
    texts = []
    for tag, threads in (("a", 2), ("b", 3)):
        (shm_dir / tag).mkdir()
        path = shm_dir / f"{tag}.img"
        with open(path, "wb") as fh:
            fh.truncate(16 * MIB)
        texts.append(f"[global]\nfilename={path}\nsize=16m\nthread=1\ngroup_reporting=1\n"
                     f"write_iops_log={shm_dir / tag / 'log'}\nlog_avg_msec=100\n"
                     f"[read]\nrw=randread\nbs=4k\nnumjobs={threads}\ntime_based=1\n"
                     "runtime=300ms\n[write]\nstonewall\nrw=randwrite\nbs=4k\ntime_based=1\n"
                     "runtime=300ms\n")
    merged = merge_jobs([("t1", texts[0]), ("t2", texts[1])])
    run = FioExecutor(cpu_idle="system").run(merged.text, 120.0)
    assert run.ok, run.error
    move_logs(merged)
    # as each target's own fio run would have named them: its threads 1..n
    assert sorted(os.listdir(shm_dir / "a")) == [f"log_iops.{n}.log" for n in (1, 2, 3)]
    assert sorted(os.listdir(shm_dir / "b")) == [f"log_iops.{n}.log" for n in (1, 2, 3, 4)]
    assert all((shm_dir / t / f).stat().st_size > 0 for t in ("a", "b")
               for f in os.listdir(shm_dir / t))
