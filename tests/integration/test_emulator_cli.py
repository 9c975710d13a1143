"""`ssdlab emulator start|stop|status` against the real ssdlab-emu daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdlab.errors import EnvironmentProblem
from ssdlab.targets.emulator import binary
from tests.support.cli import one_line_error, ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]


@pytest.fixture
def run_dir(shm_dir: Path) -> Iterator[dict[str, str]]:
    try:
        binary()
    except EnvironmentProblem:
        pytest.skip("the emulator is not built")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    env = {"SSDLAB_EMU_RUN_DIR": str(shm_dir / "emus")}
    yield env
    ssdlab("emulator", "stop", "--all", env=env)


def _state(env: dict[str, str], name: str = "default") -> dict[str, Any]:
    state: dict[str, Any] = json.loads(Path(env["SSDLAB_EMU_RUN_DIR"], f"{name}.json").read_text())
    return state


def _mounted(path: str) -> bool:
    lines = Path("/proc/self/mounts").read_text().splitlines()
    return any(line.split()[1] == path for line in lines)


def test_start_write_stats_stop(run_dir: dict[str, str]) -> None:
    started = ssdlab("emulator", "start", "--size", "256MiB", "--loop", env=run_dir)
    assert started.returncode == 0, started.stderr
    state = _state(run_dir)
    loop, mnt = state["loop_device"], state["mountpoint"]
    assert loop.startswith("/dev/loop") and _mounted(mnt)
    fresh = ssdlab("emulator", "status", env=run_dir).stdout
    assert "no host writes yet" in fresh and "write amplification" not in fresh, fresh
    fio = subprocess.run(
        [
            "fio",
            "--name=w",
            f"--filename={loop}",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=8",
            "--size=16m",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    written = json.loads(fio.stdout)["jobs"][0]["write"]["io_bytes"]
    truth = json.loads(Path(mnt, "stats").read_text())
    assert truth["counters"]["host_write_bytes"] == written
    shown = ssdlab("emulator", "status", env=run_dir)
    assert "default: running" in shown.stdout
    waf = truth["counters"]["write_amplification"]
    assert f"write amplification {waf:.2f}\n" in shown.stdout, shown.stdout
    stopped = ssdlab("emulator", "stop", env=run_dir)
    assert stopped.returncode == 0 and stopped.stderr == ""
    assert not _mounted(mnt)
    assert (
        Path(f"/sys/block/{Path(loop).name}/loop/backing_file").exists() is False
        or Path(f"/sys/block/{Path(loop).name}/loop/backing_file").read_text().strip()
        != f"{mnt}/disk"
    )
    assert "no emulators" in ssdlab("emulator", "status", env=run_dir).stdout


def test_op_and_idle_gc_options_reach_the_model(run_dir: dict[str, str]) -> None:
    started = ssdlab(
        "emulator", "start", "--size", "128MiB", "--op", "28%", "--idle-gc", "off",
        "--time-scale", "4", env=run_dir
    )
    assert started.returncode == 0, started.stderr
    truth = json.loads(Path(_state(run_dir)["mountpoint"], "stats").read_text())
    assert truth["config"]["op"] == 0.28 and truth["config"]["effective_op"] >= 0.28
    assert truth["config"]["idle_gc"] is False and truth["state"]["idle_gc"] is False
    assert truth["config"]["time_scale"] == 4
    assert _state(run_dir)["options"] == ["--op", "0.28", "--idle-gc", "off",
                                          "--time-scale", "4.0"]


def test_a_crashed_emulator_is_reported_stale_and_cleaned_up(run_dir: dict[str, str]) -> None:
    assert ssdlab("emulator", "start", "--size", "128MiB", env=run_dir).returncode == 0
    state = _state(run_dir)
    os.kill(state["pid"], signal.SIGKILL)
    time.sleep(0.5)
    shown = ssdlab("emulator", "status", env=run_dir)
    assert "STALE" in shown.stdout
    assert ssdlab("emulator", "stop", env=run_dir).returncode == 0
    assert not _mounted(state["mountpoint"])
    assert "no emulators" in ssdlab("emulator", "status", env=run_dir).stdout


def test_bad_input(run_dir: dict[str, str]) -> None:
    bad = ssdlab("emulator", "start", "--size", "lots", env=run_dir)
    assert bad.returncode == 2
    assert "--size" in one_line_error(bad)
    for op in ("150", "-1", "lots"):
        bad_op = ssdlab("emulator", "start", "--op", op, env=run_dir)
        assert bad_op.returncode == 2
        assert f"--op {op!r}" in one_line_error(bad_op)
    for scale in ("0.5", "101", "slow"):
        bad_scale = ssdlab("emulator", "start", "--time-scale", scale, env=run_dir)
        assert bad_scale.returncode == 2
        assert f"--time-scale {scale!r}" in one_line_error(bad_scale)
    assert "no emulators" in ssdlab("emulator", "status", env=run_dir).stdout
    missing = ssdlab("emulator", "stop", "--name", "nosuch", env=run_dir)
    assert missing.returncode == 2  # a bad argument, not "no such run" (5)
    assert "--name nosuch: no emulator of that name" in one_line_error(missing)


def test_a_run_on_the_emulator_records_its_ground_truth(
    run_dir: dict[str, str], tmp_path: Path
) -> None:
    assert ssdlab("emulator", "start", "--size", "256MiB", "--loop", env=run_dir).returncode == 0
    loop = _state(run_dir)["loop_device"]
    store = str(tmp_path / "s.sqlite")
    run = ssdlab(
        "run",
        "pts",
        "--target",
        loop,
        "--destroy-data",
        "--profile",
        "quick",
        "--tests",
        "latency",
        "--latency-block-sizes",  # two cells a round: the rounds, not the cells, are checked
        "4",
        "--latency-mixes",
        "100/0,0/100",
        "--round-seconds",
        "0.2",
        "--max-rounds",
        "5",
        "--store",
        store,
        env=run_dir,
    )
    assert run.returncode == 0, run.stderr
    assert "emulated SSD default" in run.stdout
    doc = json.loads(ssdlab("export", "last", "--store", store).stdout)
    truths = [e for e in doc["events"] if e["kind"] == "emulator-stats"]
    rounds = len(doc["tests"][0]["rounds"])
    assert len(truths) == 1 + 1 + rounds + 1  # start, purge, every round, the end
    written = [t["detail"]["counters"]["host_write_bytes"] for t in truths]
    assert written == sorted(written) and written[-1] > written[1]  # preconditioning wrote
    assert truths[-1]["detail"]["counters"]["write_amplification"] >= 1.0
