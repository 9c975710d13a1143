"""A lab's shared PostgreSQL store, for real: two ``ssdlab run pts`` processes on two
emulated SSDs write into one PostgreSQL database at once; both complete and every round
each run made is stored. Then the database is merged into an SQLite file and back, and
every run exports the same from all three.

Judged by the stored records and the runs' own output, never by how long anything took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.targets import emulator
from tests.support.cli import wait_for
from tests.support.exports import exports
from tests.support.postgres import PgServer, pg_server

pytestmark = [pytest.mark.root, pytest.mark.fio]
MIB = 1 << 20
#: a short PTS IOPS test: two cells of 0.1 s a round, 5 rounds (the window: steady or not,
#: every run makes exactly 5)
PTS = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
       "0/100,100/0", "--round-seconds", "0.1", "--max-rounds", "5", "--qd", "8")


def test_two_runs_write_into_one_postgresql_at_once(
    pg: PgServer, emu_run_dir: Path, shm_dir: Path
) -> None:
    url = pg.new_database()
    emus = [emulator.start(f"pg{i}", "enterprise-tlc", 64 * MIB, loop=True) for i in (1, 2)]
    env = {**os.environ, "SSDLAB_EMU_RUN_DIR": str(emu_run_dir), "SSDLAB_STORE": url}
    procs = [subprocess.Popen([sys.executable, "-m", "ssdlab", "run", "pts", "--target",
                               str(e.loop_device), *PTS, "--destroy-data"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for e in emus]
    outs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err + out[-3000:]
    with Store.open(url) as store:
        runs = [store.load(s.run_id, with_raw=True) for s in store.list_runs()]
    assert sorted(r.target["path"] for r in runs) == sorted(str(e.loop_device) for e in emus)
    for run in runs:
        assert run.status == "complete"
        iops = run.test("iops")
        numbers = [r.round_no for r in iops.rounds]
        # every round the run made is stored, each with its fio output
        assert numbers == [1, 2, 3, 4, 5]
        assert all(r.status == "ok" and r.stdout for r in iops.rounds)
        (out,) = [o for o, _ in outs if run.run_id in o]
        assert f"run {run.run_id} complete" in out
    # a lab database into a file and back: the same runs, exported byte for byte alike
    before = exports(url)
    copy = shm_dir / "copy.sqlite"
    again = pg.new_database()
    for argv in (["store", "merge", url, "--store", str(copy)],
                 ["store", "merge", str(copy), "--store", again]):
        done = subprocess.run([sys.executable, "-m", "ssdlab", *argv], capture_output=True,
                              text=True, timeout=300, env=env, check=False)
        assert done.returncode == 0, done.stderr
        assert ": 2 run(s) copied, 0 already there" in done.stdout
    assert exports(copy) == before == exports(again)


def test_a_lost_server_stops_the_run_in_one_line_and_resume_goes_on(tmp_path: Path) -> None:
    """The database server dies mid-run: the run stops with one line naming the store,
    every round committed before is kept, and `ssdlab resume` goes on once it is back."""
    with pg_server(durable=True) as server:
        url = server.new_database()
        target = tmp_path / "t.img"
        argv = [sys.executable, "-m", "ssdlab", "run", "pts", "--target", str(target),
                "--size", "64MiB", "--profile", "quick", "--tests", "iops", "--block-sizes",
                "4", "--mixes", "0/100,100/0", "--round-seconds", "0.3", "--max-rounds", "5",
                "--store", url]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            # after round 2 is stored, rounds 3 to 5 are due (a 5-round run): the run is
            # stopped there, the server goes, the run goes on and must fail its next write
            wait_for("round 2 stored", lambda: _rounds(url) >= 2, timeout=120)
            proc.send_signal(signal.SIGSTOP)
            stored = _rounds(url)
            server.stop_server()
        finally:
            proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 4, err
        assert err.startswith(f"Error: cannot write the results store {url}: PostgreSQL: ")
        assert len(err.strip().splitlines()) == 1 and "ssdlab resume" in err
        server.start()
        assert _rounds(url) == stored  # every committed round kept
        done = subprocess.run([sys.executable, "-m", "ssdlab", "resume", "last", "--store",
                               url], capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        with Store.open(url) as store:
            (summary,) = store.list_runs()
            run = store.load(summary.run_id)
        numbers = [r.round_no for r in run.test("iops").rounds]
        assert run.status == "complete" and numbers == list(range(1, len(numbers) + 1))
        assert numbers == [1, 2, 3, 4, 5] and "resumed" in [e.kind for e in run.events]


def _rounds(url: str) -> int:
    with Store.open(url) as store:
        runs = store.list_runs()
        return len(store.load(runs[0].run_id).test("iops").rounds) if runs and \
            "iops" in runs[0].tests else 0
