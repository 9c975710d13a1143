"""The fio gate with real fio (engine/gate.py): stonewalled cells run through the gate
one position after another, never overlapping, each for its whole planned runtime, with
the same jobs and reporting groups as fio's own stonewalls; and ssdlab leaves nothing.

Judged by fio's own per-I/O logs (unix-epoch timestamps) and its JSON, never by how long
the run took (bench/fio_dead_time.py measures that)."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pytest

from ssdlab.engine.fiolog import read_log
from ssdlab.engine.gate import GATE_ENV
from ssdlab.engine.runner import FioExecutor

pytestmark = [pytest.mark.fio]
RUNTIME_MS = 300
#: (rw, numjobs) of each cell
CELLS = (("randread", 1), ("randwrite", 2), ("randrw", 1), ("read", 2), ("write", 1))


def _round(target: Path, logs: Path) -> str:
    cells = []
    for i, (rw, jobs) in enumerate(CELLS):
        cells.append(f"[c{i}]\nstonewall\nrw={rw}\nnumjobs={jobs}\n"
                     f"write_lat_log={logs}/c{i}\n")
    return (f"[global]\nfilename={target}\nsize=64M\nioengine=psync\nbs=4k\n"
            f"time_based=1\nruntime={RUNTIME_MS}ms\nlog_unix_epoch=1\nthread=1\n"
            "group_reporting=1\n\n" + "\n".join(cells))


def _spans(logs: Path, cell: int) -> tuple[int, int]:
    """First and last I/O completion (unix ms) of a cell, over all its clones' logs."""
    times = [e.time_ms for f in sorted(logs.glob(f"c{cell}_clat.*.log"))
             for e in read_log(f)]
    assert times, f"cell {cell} logged nothing"
    return min(times), max(times)


def test_gated_cells_run_one_after_another_as_stonewalls_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = tmp_path / "tmp"  # where the gate makes its directories, to see them gone
    gates.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(gates))
    target = tmp_path / "t.img"
    target.write_bytes(b"\0" * (64 << 20))
    results = {}
    for mode in ("1", "0"):
        monkeypatch.setenv(GATE_ENV, mode)
        logs = tmp_path / f"logs{mode}"
        logs.mkdir()
        run = FioExecutor().run(_round(target, logs), 60)
        assert run.ok, run.error
        assert run.output is not None
        results[mode] = run
        spans = [_spans(logs, i) for i in range(5)]
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start  # no I/O of a cell completes before the last of the one before
        document = json.loads(run.stdout[run.stdout.index("{"):])
        for job, (_, clones) in zip(document["jobs"], CELLS, strict=True):
            # each clone ran its whole planned time, as a stonewall does (group_reporting:
            # the clones' runtimes added up); how much longer is the machine's business
            assert job["job_runtime"] >= clones * RUNTIME_MS
        # the job file stored is the one planned; the gate's commands never show in it
        assert "exec_prerun" not in run.job_text and "stonewall" in run.job_text
    gated, plain = results["1"], results["0"]
    # the gated jobs ran the gate's commands (fio's JSON lists each job's options; the
    # "Saving output of prerun" notes of job processes are lost with fio's --output)
    assert '"exec_prerun"' in gated.stdout and "prerun" not in plain.stdout
    assert gated.output is not None and plain.output is not None
    assert [j.name for j in gated.output.jobs] == [j.name for j in plain.output.jobs]
    groups = [[j["groupid"] for j in json.loads(r.stdout[r.stdout.index("{"):])["jobs"]]
              for r in (gated, plain)]
    assert groups[0] == groups[1] and len(set(groups[0])) == 5  # one reporting group a cell
    assert not list(gates.iterdir())
