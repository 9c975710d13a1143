"""Idle CPUs poll while the real fio runs: ssdlab holds the kernel's 0 us wake-up latency
limit (/dev/cpu_dma_latency) for exactly as long as fio runs, and a run records it.

Another ssdlab run on the machine may hold the same limit at any moment (the kernel
applies the strictest one held), so the tests judge this process's own hold."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import threading
import time
from pathlib import Path

import pytest

from ssdlab.cpuidle import QOS_DEVICE
from ssdlab.engine.runner import FioExecutor
from tests.support.cli import sha256_of, ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]

JOB = """[global]
filename={path}
size=16m
ioengine=psync
direct=0
thread=1
[paced]
rw=randread
bs=4k
rate_iops=200
time_based=1
runtime=1500ms
"""


def limit_us() -> int:
    """The wake-up latency limit the kernel applies now (the strictest one held)."""
    value: int = struct.unpack("i", QOS_DEVICE.read_bytes()[:4])[0]
    return value


def held_here() -> bool:
    """Whether this process has the limit device open (holds a limit on it)."""
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            if fd.readlink() == QOS_DEVICE:
                return True
    return False


def limits_while(executor: FioExecutor, job: str) -> tuple[list[tuple[int, bool]], bool]:
    """Sampled every 50 ms while fio runs the job: the limit in force and whether this
    process holds one; and whether fio succeeded."""
    seen: list[tuple[int, bool]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen.append((limit_us(), held_here()))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        run = executor.run(job, 60)
    finally:
        done.set()
        sampler.join()
    return seen, run.ok


@pytest.fixture
def qos_device() -> None:
    if not QOS_DEVICE.exists():
        pytest.skip(f"{QOS_DEVICE} is not available on this kernel")


@pytest.mark.usefixtures("qos_device")
def test_the_limit_is_zero_while_fio_runs_and_restored_after(shm_dir: Path) -> None:
    # judged by this process's own hold (its open file on the device) and by the limit in
    # force while it holds it: another ssdlab run on the machine may hold a limit of its
    # own at any moment, so the limit before and after is not ours to compare
    assert not held_here()
    job = JOB.format(path=shm_dir / "paced.dat")
    seen, ok = limits_while(FioExecutor(cpu_idle="poll"), job)
    assert ok
    # 1.5 s of fio, sampled every 50 ms: held, and the limit 0, for most of it
    assert len(seen) >= 20 and seen.count((0, True)) >= len(seen) - 3, seen
    assert all(limit == 0 for limit, held in seen if held), seen
    assert not held_here()  # released with fio's end

    seen, ok = limits_while(FioExecutor(cpu_idle="system"), job)
    assert ok and not any(held for _, held in seen), seen


@pytest.mark.usefixtures("qos_device")
def test_a_run_records_how_idle_cpus_behaved(shm_dir: Path) -> None:
    store = str(shm_dir / "s.sqlite")
    target = str(shm_dir / "t.img")
    common = ("--target", target, "--size", "16MiB", "--store", store, "--profile", "quick",
              "--seconds", "0.2", "--ramp", "0", "--fractions", "100", "--workload",
              "4k-random-read")
    runs = {}
    for policy in ("poll", "system"):
        result = ssdlab("run", "curves", *common, env={"SSDLAB_CPU_IDLE": policy})
        assert result.returncode == 0, result.stderr
        match = re.search(r"^run (\S+) complete", result.stdout, re.M)
        assert match, result.stdout
        runs[policy] = match.group(1)
    for policy, run in runs.items():
        exported = ssdlab("export", run, "--store", store)
        idle = json.loads(exported.stdout)["host"]["cpu_idle"]
        assert idle["policy"] == policy
        assert idle["driver"] == (Path("/sys/devices/system/cpu/cpuidle/current_driver")
                                  .read_text().strip())
        shown = ssdlab("show", run, "--store", store).stdout
        assert idle["held"] is (True if policy == "poll" else None)
        expected = ("idle CPUs: poll while fio runs (0 us wake-up latency limit held on "
                    "/dev/cpu_dma_latency)" if policy == "poll" else
                    "idle CPUs: the host's own idle policy (SSDLAB_CPU_IDLE=system)")
        assert expected in shown, shown

    listed = ssdlab("runs", "--store", store).stdout
    target_sum = sha256_of(target)
    bad = ssdlab("run", "curves", *common, env={"SSDLAB_CPU_IDLE": "deep"})
    assert bad.returncode == 2 and bad.stdout == ""
    assert ssdlab("runs", "--store", store).stdout == listed  # no run recorded
    assert sha256_of(target) == target_sum
    assert bad.stderr.strip().splitlines() == [
        "Error: SSDLAB_CPU_IDLE='deep': give 'poll' (idle CPUs poll while fio runs, the "
        "default) or 'system' (the host's own policy)"]
