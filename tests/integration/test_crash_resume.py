"""20 SIGKILLs at random moments of a real quick PTS run, each followed by ``ssdlab
resume``: no completed round is lost or changed, and the run ends complete."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import fio_processes, processes_using, ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.slow]

KILLS = 20
RUN = ("--size", "128MiB", "--profile", "quick", "--tests", "iops,throughput,latency",
       "--block-sizes", "4", "--mixes", "0/100", "--latency-block-sizes", "4",
       "--latency-mixes", "0/100", "--round-seconds", "0.3", "--max-rounds", "8")

Rounds = dict[tuple[str, int], tuple[str, str]]


def committed(store: Path) -> Rounds:
    if not store.exists():
        return {}
    try:
        with sqlite3.connect(store) as conn:
            rows = conn.execute("SELECT test, round_no, tracking_json, cells_json FROM rounds"
                                " WHERE status = 'ok'").fetchall()
    except sqlite3.OperationalError:  # created, but its schema not yet
        return {}
    return {(t, n): (tracking, cells) for t, n, tracking, cells in rows}


def _wait_for_rounds(store: Path, at_least: int, proc: subprocess.Popen[str],
                     limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        if len(committed(store)) >= at_least:
            return
        time.sleep(0.02)


def test_twenty_sigkills_lose_no_round_and_the_run_completes(
    shm_dir: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    target = shm_dir / "crash.img"
    fio_before = fio_processes(orphaned=True)
    rng = random.Random(2026)
    seen: Rounds = {}
    run_id = ""
    kills = 0
    phases = []
    while kills < KILLS:
        argv = ["resume", run_id] if run_id else ["run", "pts", "--target", str(target), *RUN]
        proc = subprocess.Popen([sys.executable, "-m", "ssdlab", *argv, "--store", str(store)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # a random moment: right away (start-up, purge, preconditioning) or after one more
        # round was committed, plus up to 0.4 s (mid-fio, mid-commit). The run needs at
        # least 20 rounds (four tests, a 5-round window each): kills that let it gain
        # more than one round on average would finish it before the 20th kill
        _wait_for_rounds(store, len(seen) + rng.choice([0, 0, 0, 1, 1]), proc, 20)
        time.sleep(rng.uniform(0.0, 0.4))
        if proc.poll() is not None:  # finished before the kill: not a kill
            _, err = proc.communicate()
            assert proc.returncode == 0, (argv, err)
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        kills += 1
        now = committed(store)
        lost = {k for k in seen if k not in now or now[k] != seen[k]}
        assert not lost, f"kill {kills} lost or changed rounds {sorted(lost)}"
        phases.append(len(now) - len(seen))
        seen = now
        if not run_id and store.exists():
            try:
                with sqlite3.connect(store) as conn:
                    row = conn.execute("SELECT id FROM runs").fetchone()
            except sqlite3.OperationalError:  # killed before the schema was made
                row = None
            run_id = row[0] if row else ""
    assert kills == KILLS, f"the run completed after only {kills} kills"
    print(f"rounds gained per kill cycle: {phases}")
    assert 0 in phases and any(p > 0 for p in phases)  # killed before and after progress

    # a target whose size changed since is not the run's target: refused, nothing run
    size = target.stat().st_size
    os.truncate(target, size + (1 << 20))
    changed = ssdlab("resume", run_id, "--store", str(store))
    assert changed.returncode == 3, changed.stderr
    assert "is not the same target (capacity_bytes was" in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1
    assert committed(store) == seen
    os.truncate(target, size)  # back as it was (the added tail held nothing)

    final = ssdlab("resume", run_id, "--store", str(store))
    assert final.returncode == 0, final.stderr + final.stdout[-2000:]
    done = committed(store)
    assert all(done[k] == v for k, v in seen.items())
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        status = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        tests = dict(conn.execute("SELECT name, status FROM tests WHERE run_id = ?",
                                  (run_id,)).fetchall())
        resumes = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'resumed'"
                               ).fetchone()[0]
    assert status == "complete" and resumes >= KILLS // 2  # a kill may land before reopen
    assert set(tests) == {"iops", "throughput-1024k", "throughput-128k", "latency"}
    assert all(s in ("steady", "not_steady") for s in tests.values()), tests
    for name in tests:
        numbers = sorted(n for t, n in done if t == name)
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
    assert processes_using(target) == []  # no fio left running on the target
    # nor anywhere: no fio job outlives a fio the kernel killed with ssdlab (forked job
    # processes did: each kill left two, orphaned, waiting forever). Jobs are threads,
    # or, through the fio gate, processes in a PID namespace that dies with its fio.
    # Orphans only: another ssdlab run on the machine has fio processes of its own
    time.sleep(0.5)
    assert fio_processes(orphaned=True) - fio_before == set()
