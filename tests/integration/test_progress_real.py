"""Progress inside a round with real fio: the live line on a terminal (a pseudo-terminal),
fio's own rates in it, and a closed standard output (``| head -3``) that fails nothing.

The live line is judged by counts: how many times it changed against how many seconds fio
ran (the stored rounds' own times), never by when a single change came.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from ssdlab.engine.runner import FioExecutor
from ssdlab.engine.status import position_of, status_of
from ssdlab.store.db import Store
from tests.conftest import LoopFactory
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
CELL = re.compile(r" · cell (\d+)/(\d+) (\d+(?:\.\d+)? KiB \d+/\d+) · ")
RATES = re.compile(r" · ([\d,]+) IOPS ([\d,.]+) MB/s · ")
ROUND = re.compile(r"latency round (\d+)/\d+ .* · round (\d+):(\d\d), (\d+):(\d\d) left · ")
RUN = re.compile(r" · run (\d+):(\d\d), ETA (\d+):(\d\d)(?:-(\d+):(\d\d))?")


def _under_pty(argv: list[str], env: dict[str, str], timeout_s: float
               ) -> tuple[int, list[tuple[float, bytes]]]:
    """Run ``argv`` with a pseudo-terminal (200 columns) as its standard output and error:
    its exit status and what it wrote, each read with the time it was read."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=env, close_fds=True)
    os.close(slave)
    chunks: list[tuple[float, bytes]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append((time.monotonic(), data))
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
        return proc.wait(timeout=60), chunks
    finally:
        os.close(master)


def _draws(chunks: list[tuple[float, bytes]]) -> list[str]:
    """Every redraw of the live line (the text after ``\\r\\x1b[K`` that is not a log line)."""
    text = b"".join(data for _, data in chunks).decode()
    pieces = text.split("\r\x1b[K")
    return [p for p in pieces if p and not p.endswith("\n") and "\n" not in p]


def test_a_quick_pts_run_shows_a_live_line_that_changes_every_second(
        loop_device: LoopFactory, tmp_path: Path) -> None:
    device = loop_device(64 * MIB)
    store = tmp_path / "results.sqlite"
    env = {**os.environ, "SSDLAB_STORE": str(store), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "ssdlab", "run", "pts", "--target", device,
            "--destroy-data", "--profile", "quick", "--tests", "latency"]
    code, chunks = _under_pty(argv, env, timeout_s=600)
    output = b"".join(d for _, d in chunks).decode(errors="replace")
    assert code == 0, output[-3000:]
    assert "Traceback" not in output and "Error" not in output

    with Store.open(store) as st:
        run = st.load(st.list_runs()[0].run_id)
    rounds = run.test("latency").rounds
    assert run.status == "complete" and len(rounds) >= 5
    fio_seconds = sum(r.ended_at - r.started_at for r in rounds)

    draws = _draws(chunks)
    in_rounds = [d for d in draws if ROUND.search(d)]
    changes = sum(1 for a, b in itertools.pairwise(in_rounds) if a != b)
    # at least one change per second of fio's rounds (drawn about twice a second)
    assert changes >= fio_seconds, (changes, fio_seconds, in_rounds[-5:])

    # what the line says while fio runs: the cell, fio's rates, the round's elapsed and
    # remaining time, the run's elapsed time and ETA
    cells = {m.group(3) for d in in_rounds if (m := CELL.search(d))}
    assert len(cells) >= 5, cells  # the line follows the cells (9 a round)
    with_rates = [d for d in in_rounds if RATES.search(d)]
    assert with_rates, in_rounds[-5:]
    rated_rounds = {int(m.group(1)) for d in with_rates if (m := ROUND.search(d))}
    assert len(rated_rounds) * 2 >= len(rounds), (rated_rounds, len(rounds))
    for draw in with_rates:
        rates = RATES.search(draw)
        assert rates is not None and float(rates.group(1).replace(",", "")) > 0
        assert float(rates.group(2).replace(",", "")) > 0
        assert CELL.search(draw) and RUN.search(draw), draw
    for draw in in_rounds:
        found = ROUND.search(draw)
        assert found is not None
        elapsed = int(found.group(2)) * 60 + int(found.group(3))
        left = int(found.group(4)) * 60 + int(found.group(5))
        assert elapsed + left <= 60  # a quick latency round: 9 cells of 0.5 s
    # the run's elapsed time never goes back, and its ETA ends at zero or near it
    runs = [(int(m.group(1)) * 60 + int(m.group(2))) for d in draws if (m := RUN.search(d))]
    assert runs == sorted(runs) and runs[-1] >= fio_seconds * 0.5


def test_a_dry_run_prints_the_total_planned_time(loop_device: LoopFactory,
                                                 tmp_path: Path) -> None:
    device = loop_device(64 * MIB)
    result = ssdlab("run", "pts", "--target", device, "--destroy-data", "--profile",
                    "quick", "--dry-run", env={"SSDLAB_STORE": str(tmp_path / "s.sqlite")})
    assert result.returncode == 0 and result.stderr == ""
    last = result.stdout.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"planned time: \d+:\d\d-\d+:\d\d \(steady state decides\), plus "
                        r".+ \(preconditioning\), plus a purge before each test", last), last
    assert not (tmp_path / "s.sqlite").exists()


def _piped_into_head(argv: list[str], env: dict[str, str], lines: int = 3
                     ) -> tuple[int, str, str]:
    """``argv | head -N``: ssdlab's exit status, what head printed, ssdlab's stderr."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as proc:
        assert proc.stdout is not None
        head = subprocess.run(["head", f"-{lines}"], stdin=proc.stdout, capture_output=True,
                              text=True, timeout=600, check=False)
        proc.stdout.close()  # head has gone: it held the pipe's only other reading end
        _, err = proc.communicate(timeout=600)
    return proc.returncode, head.stdout, err.decode()


def test_a_run_into_a_closed_pipe_finishes_and_is_stored(loop_device: LoopFactory,
                                                          tmp_path: Path) -> None:
    """``ssdlab run atto ... | head -3``: head leaves after three lines; the run goes on to
    its end, is stored complete and exits 0, quietly; show, runs and export into ``head``
    exit quietly too."""
    device = loop_device(64 * MIB)
    store = tmp_path / "results.sqlite"
    env = {**os.environ, "SSDLAB_STORE": str(store)}
    argv = [sys.executable, "-m", "ssdlab", "run", "atto", "--target", device,
            "--destroy-data", "--profile", "quick"]
    code, shown, err = _piped_into_head(argv, env)
    assert code == 0, err
    assert err == "" and "Broken pipe" not in err
    assert len(shown.splitlines()) == 3 and "\r" not in shown
    with Store.open(store) as st:
        run = st.load(st.list_runs()[0].run_id)
    assert run.status == "complete"
    test = run.test("atto")
    assert test.status == "complete" and test.result.get("rows")
    assert len(test.rounds) >= 10  # every measurement ran after the reader left

    for command in (["show", run.run_id], ["runs"], ["export", run.run_id, "--format", "json"],
                    ["export", run.run_id, "--format", "csv"]):
        code, shown, err = _piped_into_head([sys.executable, "-m", "ssdlab", *command], env,
                                            lines=1)
        assert (code, err) == (0, ""), (command, err)
        assert len(shown.splitlines()) == 1


def test_fio_results_and_status_lines_come_apart(tmp_path: Path) -> None:
    """The real runner: fio's results come through their own pipe and parse; its status
    line comes with the ticks (rates, jobs ended) and the gate's position advances."""
    target = tmp_path / "f"
    with open(target, "wb") as fh:
        fh.truncate(32 * MIB)
    cells = "\n".join(
        f"[c{i}]\n{'stonewall' if i else ''}\nfilename={target}\nsize=32m\nrw=randread\n"
        f"bs=4k\nioengine=psync\ntime_based=1\nruntime=2\n" for i in range(3))
    ticks: list[float] = []
    run = FioExecutor().run(cells, timeout_s=120, json_plus=True, on_tick=ticks.append)
    assert run.ok, run.error
    assert run.output is not None and [j.name for j in run.output.jobs] == ["c0", "c1", "c2"]
    assert "Jobs:" not in run.stdout and "--eta=always" in run.command
    statuses = [s for t in ticks if (s := status_of(t)) is not None]
    assert statuses and all(s.jobs == 3 for s in statuses)
    assert max(s.iops for s in statuses) > 0
    ended = [s.jobs_ended for s in statuses]
    assert ended == sorted(ended)
    positions = [p for t in ticks if (p := position_of(t)) is not None]
    if positions:  # through the fio gate (root, unshare): its positions in order
        assert positions == sorted(positions) and positions[-1] == 2
