"""Faults, injected with the emulated SSD's fault options, and a full results store:
each gives a clear message and keeps every completed result (docs/faults.md)."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdlab.targets import emulator
from tests.support.cli import one_line_error, ssdlab
from tests.support.stored import check_stored

# solo (make test runs it alone, after the rest): the watchdog's margin over a healthy
# round is 9 s
pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.solo]

MIB = 1 << 20
CELLS = ("--block-sizes", "4", "--mixes", "0/100", "--latency-block-sizes", "4",
         "--latency-mixes", "0/100", "--round-seconds", "0.2", "--no-precondition",
         "--purge", "none")
SMALL_PTS = ("--profile", "quick", "--tests", "iops,latency", "--max-rounds", "5", *CELLS)


@pytest.fixture
def emu(emu_run_dir: Path) -> tuple[emulator.Emulator, dict[str, str]]:
    started = emulator.start("faults", "enterprise-tlc", 64 * MIB, loop=True)
    return started, {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}


def control(emu: emulator.Emulator, command: str) -> None:
    Path(emu.mountpoint, "control").write_text(command + "\n")


def inject_after_rounds(store: Path, rounds: int, action: Callable[[], None]) -> threading.Thread:
    """Run ``action`` once ``rounds`` rounds of the run are committed."""
    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with sqlite3.connect(store) as conn:
                    done = conn.execute("SELECT COUNT(*) FROM rounds WHERE status = 'ok'"
                                        ).fetchone()[0]
            except sqlite3.Error:
                done = 0
            if done >= rounds:
                action()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def export(store: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ssdlab("export", "last", "--store", str(store)).stdout)
    return doc


def _ok(test: dict[str, Any]) -> list[int]:
    return [r["round"] for r in test["rounds"] if r["status"] == "ok"]


def test_silent_corruption_is_caught_every_time_with_its_location(
    emu: tuple[emulator.Emulator, dict[str, str]], tmp_path: Path
) -> None:
    device, env = emu
    store = str(tmp_path / "s.sqlite")
    clean = ssdlab("run", "verify", "--target", device.target, "--destroy-data",
                   "--store", store, env=env)
    assert clean.returncode == 0 and "no corruption" in clean.stdout, clean.stderr
    rng = random.Random(6)
    for attempt in range(5):
        control(device, "fault clear")
        injected = sorted(rng.randrange(0, 60 * MIB // 4096) * 4096 for _ in range(3))
        for offset in injected:
            control(device, f"fault corrupt-range {offset} {rng.choice([4096, 12288])}")
        found = ssdlab("run", "verify", "--target", device.target, "--destroy-data",
                       "--store", store, env=env)
        assert found.returncode == 1, found.stderr
        assert "data corruption found" in one_line_error(found)
        doc = export(Path(store))
        check_stored(store, doc["run"]["id"])  # every stored document is its declared record
        result = next(t for t in doc["tests"] if t["name"] == "verify")
        assert result["status"] == "corrupt"
        reported = [(r["offset"], r["length"]) for r in result["result"]["corrupt_ranges"]]
        for offset in injected:  # each injected range is reported where it is
            assert any(a <= offset < a + b or offset <= a < offset + 12288
                       for a, b in reported), (attempt, offset, reported)
        assert len(reported) <= len(injected) * 3
    control(device, "fault clear")


def test_io_errors_fail_the_test_with_fios_error_and_the_run_goes_on(
    emu: tuple[emulator.Emulator, dict[str, str]], tmp_path: Path
) -> None:
    device, env = emu
    store = tmp_path / "s.sqlite"
    inject_after_rounds(store, 2, lambda: control(device, f"fault eio-range 0 {64 * MIB} write"))
    run = ssdlab("run", "pts", "--target", device.target, "--destroy-data", *SMALL_PTS,
                 "--store", str(store), env=env)
    control(device, "fault clear")
    assert run.returncode == 1
    assert "test(s) failed: iops, latency" in one_line_error(run)
    doc = export(store)
    assert doc["run"]["status"] == "complete"
    iops = next(t for t in doc["tests"] if t["name"] == "iops")
    assert iops["status"] == "failed" and len(_ok(iops)) >= 2
    assert "Input/output error" in iops["result"]["error"]
    failed = [r for r in iops["rounds"] if r["status"] == "failed"]
    assert failed and failed[0]["fio_returncode"] != 0


def test_a_device_that_vanishes_stops_the_run_and_keeps_the_rounds(
    emu: tuple[emulator.Emulator, dict[str, str]], tmp_path: Path
) -> None:
    device, env = emu
    store = tmp_path / "s.sqlite"
    inject_after_rounds(store, 2, lambda: control(device, "fault vanish"))
    run = ssdlab("run", "pts", "--target", device.target, "--destroy-data", *SMALL_PTS,
                 "--store", str(store), env=env)
    control(device, "fault clear")
    assert run.returncode == 1
    message = one_line_error(run)
    assert "does not answer" in message and "the run stops here" in message
    doc = export(store)
    assert doc["run"]["status"] == "failed"
    assert [t["name"] for t in doc["tests"]] == ["iops"]  # latency never started
    assert len(_ok(doc["tests"][0])) >= 2


#: the hang: one I/O in every 500 answered this late (a round of 0.2 s is thousands of I/Os)
SPIKE_S = 20
#: the watchdog's margin (SSDLAB_WATCHDOG_MARGIN_S): it kills a round's fio 1.5 x 0.2 s +
#: 1 s (its one cell) + 8 s = 9.3 s after it started, so a healthy round may be late by
#: 9 s (a loaded host) and the hung one is killed 10.7 s before its I/O would come back
WATCHDOG_MARGIN_S = 8


def test_a_hung_fio_is_killed_by_the_watchdog(
    emu: tuple[emulator.Emulator, dict[str, str]], tmp_path: Path
) -> None:
    device, env = emu
    store = tmp_path / "s.sqlite"
    inject_after_rounds(store, 2, lambda: control(device,
                                                  f"fault latency-spike 500 {SPIKE_S * 1000}"))
    started = time.monotonic()
    run = ssdlab("run", "pts", "--target", device.target, "--destroy-data", "--profile",
                 "quick", "--tests", "iops", "--max-rounds", "5", *CELLS,
                 "--store", str(store),
                 env={**env, "SSDLAB_WATCHDOG_MARGIN_S": str(WATCHDOG_MARGIN_S)})
    control(device, "fault clear")
    # killed, not waited for: without the watchdog rounds 3 to 5 would each wait a spike
    assert run.returncode == 1 and time.monotonic() - started < 3 * SPIKE_S
    # the user sees what happened: the round killed by the watchdog, the run's outcome
    assert re.search(r"iops: FAILED: round \d+: fio did not finish in time and was killed "
                     r"by the watchdog", run.stdout)
    assert re.search(r"^run \S+ complete, 1 test\(s\) failed: iops", run.stdout, re.M)
    assert one_line_error(run).startswith("Error: test(s) failed: iops")
    doc = export(store)
    iops = doc["tests"][0]
    assert iops["status"] == "failed" and "watchdog" in iops["result"]["error"]
    assert len(_ok(iops)) >= 2


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount)],
                      capture_output=True, check=False).returncode:
        pytest.skip("cannot mount a tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def test_a_full_store_disk_is_a_clear_error_and_resume_completes(
    small_fs: Path, shm_dir: Path
) -> None:
    store = small_fs / "s.sqlite"
    target = shm_dir / "t.img"
    run = ssdlab("run", "pts", "--target", str(target), "--size", "128MiB", "--profile",
                 "quick", "--tests", "iops,latency", "--max-rounds", "8", *CELLS,
                 "--store", str(store))
    assert run.returncode == 4, run.stderr
    assert "its disk is full; everything committed before is kept" in one_line_error(run)
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        kept = conn.execute("SELECT test, round_no FROM rounds WHERE status = 'ok'"
                            " ORDER BY test, round_no").fetchall()
    assert kept
    subprocess.run(["mount", "-o", "remount,size=8M", str(small_fs)], check=True)
    resumed = ssdlab("resume", "last", "--store", str(store))
    assert resumed.returncode == 0, resumed.stderr
    doc = export(store)
    assert doc["run"]["status"] == "complete"
    for test in doc["tests"]:
        assert _ok(test) == list(range(1, len(_ok(test)) + 1))
    after = {(t["name"], r["round"]) for t in doc["tests"] for r in t["rounds"]}
    assert set(kept) <= after
