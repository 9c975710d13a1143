"""A lab's shared PostgreSQL store, for real: two ``ssdlab run pts`` processes on two
emulated SSDs write into one PostgreSQL database at once; both complete and every round
each run made is stored. Then the database is merged into an SQLite file and back, and
every run exports the same from all three.

Judged by the stored records and the runs' own output, never by how long anything took.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.targets import emulator
from tests.support.exports import exports
from tests.support.postgres import PgServer

pytestmark = [pytest.mark.root, pytest.mark.fio]
MIB = 1 << 20
#: a short PTS IOPS test: two cells of 0.1 s a round, up to 8 rounds
PTS = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
       "0/100,100/0", "--round-seconds", "0.1", "--max-rounds", "8", "--qd", "8")


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
        assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 5
        # every round the run made is stored, each with its fio output: up to the end of
        # the steady window it found, else all eight
        assert all(r.status == "ok" and r.stdout for r in iops.rounds)
        verdict = iops.verdicts["primary"]
        last = verdict["window_rounds"][1] if verdict["attained"] else 8
        assert len(numbers) == last
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
