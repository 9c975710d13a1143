"""The RAID matrix for real (issue 15): four emulated SSDs, btrfs RAID 0, 1, 10 and 5 one
after another with a quick PTS IOPS test on each; the matrix is killed (SIGKILL) in the
middle of RAID 1 and resumed: it completes, the level measured before the kill is not run
again, the stopped level's own run goes on after its last round, and no array, mount or
signature is left. The report compares the four levels side by side in Chromium and shows
the members per round; each level's bytes written match the emulators' own count.

A second matrix runs the PTS latency test (nine cells, as issue 30 found it) on btrfs RAID
0 and 1 of two emulated SSDs: the levels are compared by mean and p99 latency, the lowest
marked best, each measurement named by its cell label; the member check says its verdict
once and its time as durations are written; no label of the report's charts overlaps
another in Chromium."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ssdlab.plan.matrix import BY_LATENCY, LevelResult
from ssdlab.report.matrix_pages import comparison_rows, levels_of
from ssdlab.store.db import Store
from ssdlab.targets import emulator
from tests.integration.test_report_chart_labels import OVERLAPS_JS
from tests.support.browser import Browser, require_chromium, require_tool
from tests.support.cli import wait_for

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024
LEVELS = ("raid0", "raid1", "raid10", "raid5")
CHILD = ("--profile quick --tests iops --block-sizes 4 --mixes 0/100,100/0 "
         "--round-seconds 0.2 --max-rounds 5 --no-precondition")


def _ssdlab(*args: str, env: dict[str, str], timeout: float = 600
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssdlab", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=timeout, check=False)


def _rounds(store: Path) -> list[tuple[str, str, int, float]]:
    """(run, suite, round, when it started) of every stored round, in the order run."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT r.id, r.suite, d.round_no, d.started_at FROM rounds d JOIN "
                          "runs r ON r.id = d.run_id ORDER BY d.started_at").fetchall()
    return [(str(a), str(b), int(c), float(d)) for a, b, c, d in rows]


def _matrix_and_levels(store: Path) -> tuple[str, dict[str, str]]:
    with sqlite3.connect(store) as db:
        runs = db.execute("SELECT id, suite, target_path FROM runs ORDER BY created_at"
                          ).fetchall()
    matrix = next(str(r[0]) for r in runs if r[1] == "matrix")
    levels = {lv: str(r[0]) for r in runs if r[1] == "pts" for lv in LEVELS
              if f"-{lv}/" in str(r[2])}
    return matrix, levels


def test_matrix_killed_and_resumed_compares_levels(emu_run_dir: Path, shm_dir: Path) -> None:
    require_tool("mkfs.btrfs", "btrfs-progs")
    chromium = require_chromium()
    assert chromium
    emus = [emulator.start(f"x{i}", "enterprise-tlc", 128 * MIB, loop=True) for i in range(4)]
    members = [str(e.loop_device) for e in emus]
    store = shm_dir / "r.sqlite"
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir), "SSDLAB_STATE_DIR": str(shm_dir / "state"),
           "SSDLAB_STORE": str(store)}
    argv = [sys.executable, "-m", "ssdlab", "run", "matrix", "--members", ",".join(members),
            "--backend", "btrfs", "--levels", "0,1,10,5", "--suite", "pts", "--suite-options",
            CHILD, "--member-check-seconds", "0.5", "--destroy-data"]
    log = (shm_dir / "first.log").open("w")
    first = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, **env})
    try:
        # killed once RAID 1's own run has stored two rounds
        wait_for("RAID 1's second round", lambda: store.exists() and sum(
            1 for run, suite, _, _ in _rounds(store) if suite == "pts"
            and run == _matrix_and_levels(store)[1].get("raid1")) >= 2)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
        log.close()
    _, before = _matrix_and_levels(store)
    rounds_before = _rounds(store)
    assert set(before) == {"raid0", "raid1"}
    assert list((shm_dir / "state").glob("*.json")), "the killed run left its array's state"

    matrix, _ = _matrix_and_levels(store)
    resumed = _ssdlab("resume", matrix, "--destroy-data", env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert "tearing it down" in resumed.stdout  # the killed run's RAID 1 array

    _, after = _matrix_and_levels(store)
    assert set(after) == set(LEVELS)
    assert after["raid0"] == before["raid0"] and after["raid1"] == before["raid1"]
    rounds_after = _rounds(store)
    assert rounds_after[:len(rounds_before)] == rounds_before  # nothing measured is lost
    raid0 = [r for r in rounds_after if r[0] == before["raid0"]]
    assert raid0 == [r for r in rounds_before if r[0] == before["raid0"]]  # not run again
    raid1 = [n for run, _, n, _ in rounds_after if run == before["raid1"]]
    assert raid1 == sorted(set(raid1)), "a round of RAID 1 was measured twice"

    with Store.open(store) as s:
        run = s.load(matrix)
    assert run.status == "complete" and run.message == ""
    for level in LEVELS:
        result = run.test(level).result
        assert run.test(level).status == "complete"
        assert result["child_status"] == "complete"
        assert len(result["rows"]) == 2 and all(r["iops"] > 0 for r in result["rows"])
        assert {m["member"] for m in result["members"]} == {Path(m).name for m in members}
        written = {w["member"]: w for w in result["written"]}
        assert set(written) == set(members)
    assert abs(run.test("raid0").result["write_penalty"] - 1.0) <= 0.15
    assert abs(run.test("raid10").result["write_penalty"] - 2.0) <= 0.30

    # nothing left: no state file, no mount, no signature on any member
    assert not list((shm_dir / "state").glob("*.json"))
    mounts = Path("/proc/mounts").read_text(encoding="ascii")
    assert str(shm_dir / "state") not in mounts
    for member in members:
        probe = subprocess.run(["wipefs", "--no-act", member], capture_output=True,
                               text=True, check=True)
        assert probe.stdout.strip() == "", f"{member} still carries {probe.stdout}"

    out = shm_dir / "report"
    made = _ssdlab("report", matrix, "-o", str(out), "--no-pdf", env=env)
    assert made.returncode == 0, made.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "RAID levels compared" in html and "Members per round" in html
    # the drives' own loop devices go with them: nothing of the matrix is left attached
    for e in emus:
        assert emulator.stop(e.name)
    for member in members:
        backing = Path(f"/sys/block/{Path(member).name}/loop/backing_file")
        assert not backing.exists() or str(emu_run_dir) not in backing.read_text()
    with Browser() as browser, browser.open_page(out / "report.html") as page:
        assert page.console_errors() == []
        headers = page.evaluate(
            "Array.from(document.querySelectorAll('th')).map(t => t.textContent)")
        assert all(level in headers for level in LEVELS)
        charts = page.evaluate("document.querySelectorAll('svg').length")
        assert charts >= 4 * 3  # three member charts per level, and the bars


LATENCY = ("--profile quick --tests latency --block-sizes 8,4,0.5 --mixes 100/0,65/35,0/100 "
           "--round-seconds 0.2 --max-rounds 5 --no-precondition")


def test_a_latency_matrix_compares_latency_by_cell_labels(emu_run_dir: Path,
                                                         shm_dir: Path) -> None:
    require_tool("mkfs.btrfs", "btrfs-progs")
    require_chromium()
    emus = [emulator.start(f"lat{i}", "enterprise-tlc", 128 * MIB, loop=True) for i in range(2)]
    try:
        store = shm_dir / "r.sqlite"
        env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir),
               "SSDLAB_STATE_DIR": str(shm_dir / "state"), "SSDLAB_STORE": str(store)}
        ran = _ssdlab("run", "matrix", "--members", ",".join(str(e.loop_device) for e in emus),
                      "--backend", "btrfs", "--levels", "0,1", "--suite", "pts",
                      "--suite-options", LATENCY, "--member-check-seconds", "1",
                      "--destroy-data", env=env)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
        # the member check: its verdict once, its time as durations are written (3.996 s)
        assert "member check: member check:" not in ran.stdout
        verdicts = re.findall(r"member check: (?:no outlier|\d+ of \d+ members below)",
                              ran.stdout)
        assert len(verdicts) == 1, ran.stdout
        assert "(about 0:04)" in ran.stdout and not re.search(r"about \d+\.\d+ s", ran.stdout)

        with Store.open(store) as s:
            matrix = next(r.run_id for r in s.list_runs() if r.suite == "matrix")
            run = s.load(matrix)
        for level in ("raid0", "raid1"):
            rows = LevelResult.from_json(run.test(level).result).rows
            assert len(rows) == 9 and {r.by for r in rows} == {BY_LATENCY}
            assert all(r.lat_mean_us and r.lat_p99_us and r.lat_p99_us >= r.lat_mean_us
                       for r in rows), rows
        levels = levels_of(run)
        for metric in ("lat_mean_us", "lat_p99_us"):  # the lowest latency marked the best
            _, table, classes = comparison_rows(levels, metric)
            assert len(table) == 9
            for n, (row, cls) in enumerate(zip(table, classes, strict=True)):
                values = [getattr(r.rows[n], metric) for _, r in levels]  # as stored
                assert cls[1 + values.index(min(values))] == "sig-up", (row, values)
        assert comparison_rows(levels, "iops")[1] == []

        shown = _ssdlab("show", matrix, env=env)
        assert shown.returncode == 0
        assert "latency: 8 KiB 100/0" in shown.stdout and "latency_bs" not in shown.stdout
        assert re.search(r"measurement +mean us +p99 us +IOPS", shown.stdout)
        out = shm_dir / "report"
        made = _ssdlab("report", matrix, "-o", str(out), env=env)
        assert made.returncode == 0, made.stderr
        html = (out / "report.html").read_text(encoding="utf-8")
        assert "mean latency (us) per level (lower is better)" in html
        assert "latency_bs" not in html and "IOPS per level" not in html
        with Browser() as browser, browser.open_page(out / "report.html",
                                                     viewport=(718, 1000)) as page:
            page.emulate_print()
            measured = page.evaluate(OVERLAPS_JS)
            assert measured["found"] == [] and page.console_errors() == []
            names = page.evaluate(  # each name under an axis, its lines joined
                "[...document.querySelectorAll('svg.chart text.xcat')].map(t => [...t.children]"
                ".map(s => s.textContent).join(' ') || t.textContent)")
            assert "latency: 8 KiB 100/0" in names, names
    finally:
        for e in emus:
            emulator.stop(e.name)
