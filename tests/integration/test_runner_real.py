"""The fio runner against real processes: watchdog, Ctrl-C, and a killed ssdlab."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ssdlab.engine.runner import FioExecutor, FioInterrupted
from tests.conftest import LoopFactory
from tests.support.cli import processes_using, ssdlab

MIB = 1024 * 1024


def _hanging_fio(tmp_path: Path) -> str:
    script = tmp_path / "hanging-fio"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fio-3.33; exit 0; fi\n"
                      "echo $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 600\n")
    script.chmod(0o755)
    return str(script)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    return status != "Z"


def test_watchdog_kills_a_stuck_fio(tmp_path: Path) -> None:
    fio = _hanging_fio(tmp_path)
    started = time.monotonic()
    run = FioExecutor(fio).run("[x]\n", timeout_s=1.5)
    assert time.monotonic() - started < 15
    assert run.timed_out and not run.ok
    assert "watchdog" in (run.error or "")
    assert not _alive(int((tmp_path / "pid").read_text()))


def test_ctrl_c_stops_fio(tmp_path: Path) -> None:
    fio = _hanging_fio(tmp_path)
    ticks: list[float] = []

    def tick(elapsed: float) -> None:
        ticks.append(elapsed)
        if elapsed > 1.0:
            raise KeyboardInterrupt

    with pytest.raises(FioInterrupted):
        FioExecutor(fio).run("[x]\n", timeout_s=60, on_tick=tick)
    assert ticks
    assert not _alive(int((tmp_path / "pid").read_text()))


@pytest.mark.fio
def test_real_fio_job_error_is_reported(tmp_path: Path) -> None:
    job = f"[global]\nfilename={tmp_path}\nsize=1m\n[x]\nrw=read\n"  # a directory: EISDIR
    run = FioExecutor().run(job, timeout_s=60)
    assert not run.ok
    assert run.error and ("error" in run.error or "status" in run.error)


@pytest.mark.root
@pytest.mark.fio
def test_sigint_during_a_real_run_exits_130_and_keeps_rounds(
    loop_device: LoopFactory, tmp_path: Path
) -> None:
    device = loop_device(256 * MIB)
    store = tmp_path / "s.sqlite"
    cmd = [sys.executable, "-m", "ssdlab", "run", "pts", "--target", device, "--destroy-data",
           "--profile", "quick", "--tests", "latency", "--rule", "snia", "--round-seconds", "0.2",
           "--max-rounds", "25", "--store", str(store)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        if "latency round " in line:
            seen += 1
            if seen == 2:
                break
    time.sleep(1.0)  # the third round is running now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().startswith("Error: run") and "interrupted" in err
    exported = ssdlab("export", "last", "--store", str(store))
    doc = json.loads(exported.stdout)
    assert doc["run"]["status"] == "interrupted"
    rounds = doc["tests"][0]["rounds"]
    assert len(rounds) >= 2 and all(r["status"] == "ok" for r in rounds)
    assert processes_using(device) == []  # no fio left behind
