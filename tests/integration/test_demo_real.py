"""``ssdlab demo`` (what ``make demo`` runs) with real fio: on the emulated SSD, and on a
test file in RAM where the emulator cannot run; it cleans up after itself either way.

The demo's quick PTS suite takes minutes; here it runs shortened (one cell per test,
0.2 s cells), which changes what is measured, not how the demo runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from ssdlab.cli import demo_cmd
from ssdlab.cli.main import main
from ssdlab.errors import EnvironmentProblem
from ssdlab.plan.pts import PtsArgs
from ssdlab.targets import emulator

pytestmark = [pytest.mark.root, pytest.mark.fio]

SHORT = PtsArgs(profile="quick", block_sizes="4", mixes="0/100", latency_block_sizes="4",
                latency_mixes="0/100", round_seconds=0.2, max_rounds=5)


def _demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, dict[str, object]]:
    out = tmp_path / "demo-results"
    typed = ["demo", "--size", "64MiB", "--output-dir", str(out),
             "--store", str(tmp_path / "s.sqlite")]
    code = main(typed)
    printed = capsys.readouterr().out
    assert code == 0, printed
    (export,) = out.glob("*.json")
    doc: dict[str, object] = json.loads(export.read_text())
    run = doc["run"]
    assert isinstance(run, dict)
    assert run["argv"] == typed  # what was typed, once: not ["demo", "demo", ...]
    run_id = run["id"]
    assert printed.splitlines()[-3:] == [  # one command a line, nothing a shell would pipe
        "next:", f"  ssdlab show {run_id}", f"  ssdlab export {run_id} --format csv"]
    return printed, doc


def test_the_demo_runs_on_the_emulated_ssd_and_stops_it(
    emu_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(demo_cmd, "DEMO_ARGS", SHORT)
    printed, doc = _demo(tmp_path, capsys)
    assert "demo target: emulated SSD demo (enterprise-tlc)" in printed
    assert "== IOPS" in printed and "== Latency" in printed  # the result tables
    run = doc["run"]
    assert isinstance(run, dict) and run["status"] == "complete" and run["quick"] is True
    tests = doc["tests"]
    assert isinstance(tests, list)
    assert {t["name"] for t in tests} == {"iops", "throughput-1024k", "throughput-128k",
                                         "latency"}
    assert all(t["rounds"] for t in tests)
    events = doc["events"]
    assert isinstance(events, list)
    assert any(e["kind"] == "emulator-stats" for e in events)  # its ground truth recorded
    assert emulator.status() == []  # stopped: no mount, no loop device left


def test_without_the_emulator_the_demo_uses_a_file_in_ram_and_removes_it(
    shm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def unavailable(*_: object, **__: object) -> emulator.Emulator:
        raise EnvironmentProblem("the emulator is not built (test)")

    monkeypatch.setattr(demo_cmd, "DEMO_ARGS", dataclasses.replace(SHORT, tests="iops"))
    monkeypatch.setattr(demo_cmd, "DEFAULT_DIR", str(shm_dir))
    monkeypatch.setattr(emulator, "start", unavailable)
    printed, doc = _demo(tmp_path, capsys)
    assert "note: the emulated SSD is not available (the emulator is not built (test))" \
        in printed
    run = doc["run"]
    assert isinstance(run, dict) and run["status"] == "complete"
    assert doc["target"]["path"] == str(shm_dir / demo_cmd.DEFAULT_NAME)  # type: ignore[index]
    assert os.listdir(shm_dir) == []  # the test file is gone
