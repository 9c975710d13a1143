"""The peak finder's latency ceiling at the confirmation (issue 30), with real fio on an
emulated SSD: ``run peak --max-latency`` never names a peak whose second probe broke the
ceiling. The ceiling sits between the probe and the re-test: right before a point is
measured again, the emulated SSD is told to add 100 ms to every I/O (its ``fault
latency-spike``), so the re-test's p99 is over the 50 ms ceiling that the first probe kept
to. Every other probe's I/Os each take 1 ms more: the drive, not the CPU, limits the
search (on a loaded host a CPU-bound 1 x QD 1 can be the best point, and nothing is
lighter to step down to), so more outstanding I/Os are faster and the peak is never the
lightest point, while 16 outstanding I/Os stay far under the ceiling. fio is real; only
the drive changes between the two probes, as a drive that starts collecting garbage does.

* Only the first re-test slowed: the point it re-measured is not the peak; the peak named
  is another point, whose own second probe kept to the ceiling; the result says why.
* Every re-test slowed: no peak, the reason in the run's output, ``show``, the report and
  the export, and exit status 0 (before: 1, "a test failed (fio or device error)").
* A ceiling that even 1 x QD 1 breaks: no peak, exit 0, the verdict.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from ssdlab.engine import runner
from ssdlab.engine.runner import FioExecutor, FioRun, TickFn
from ssdlab.targets import emulator
from tests.support.cli import ssdlab_in_process

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024
CEILING_US = 50_000.0
SEARCH = ("--workloads", "rnd4k_read", "--profile", "quick", "--probe-seconds", "0.3",
          "--ramp-seconds", "0", "--engines", "io_uring", "--max-threads", "2", "--max-qd",
          "8", "--pin", "none", "--max-probes", "12")


def _slowing(emu: emulator.Emulator, retests_slowed: int | None) -> type[FioExecutor]:
    """A real fio executor; before each probe it sets the emulated SSD's latency spike: 100
    ms on every I/O for the first ``retests_slowed`` re-tests (None: every one), 1 ms
    otherwise."""
    seen = {"retests": 0}

    class Slowing(FioExecutor):
        def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
                on_tick: TickFn | None = None) -> FioRun:
            again = ", again" in job_text
            seen["retests"] += again
            slow = again and (retests_slowed is None or seen["retests"] <= retests_slowed)
            emulator.control(emu, f"fault latency-spike 1 {100 if slow else 1}")
            return super().run(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)
    return Slowing


def _peak(device: str, store: Path, ceiling: str, monkeypatch: pytest.MonkeyPatch,
          executor: type[FioExecutor] | None) -> tuple[int, str, dict[str, Any]]:
    """Run the search (through the command, in this process); its exit status, output and
    exported test."""
    with monkeypatch.context() as m:
        if executor is not None:
            m.setattr(runner, "FioExecutor", executor)
        done = ssdlab_in_process("run", "peak", "--target", device, *SEARCH,
                                 "--max-latency", ceiling, "--store", str(store))
    print(done.stdout[-3000:], done.stderr)
    exported = ssdlab_in_process("export", "last", "--format", "json", "--store", str(store))
    assert exported.returncode == 0, exported.stderr
    (test,) = json.loads(exported.stdout)["tests"]
    return done.returncode, done.stdout + done.stderr, test


def _shown(store: Path, tmp_path: Path) -> tuple[str, str]:
    shown = ssdlab_in_process("show", "last", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    out = tmp_path / "report"
    report = ssdlab_in_process("report", "last", "-o", str(out), "--no-pdf", "--store",
                               str(store))
    assert report.returncode == 0, report.stderr
    return shown.stdout, html.unescape("".join(p.read_text() for p in out.rglob("*.html")))


def _key(s: dict[str, Any]) -> tuple[Any, ...]:
    return s["engine"], s["threads"], s["iodepth"], s["split"]


def test_a_peak_whose_retest_broke_the_ceiling_is_never_named(
        emu_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    emu = emulator.start("peak-ceiling", "enterprise-tlc", 64 * MIB, loop=True)
    assert emu.loop_device is not None
    device = emu.loop_device
    store = tmp_path / "results.sqlite"

    # the first re-test slowed: the point it measured again is out, another is the peak
    code, out, test = _peak(device, store, "p99=50ms", monkeypatch, _slowing(emu, 1))
    assert code == 0, out
    result = test["result"]
    steps = result["steps"]
    again = [s for s in steps if s["phase"] == "confirm"]
    broke = again[0]
    assert broke["lat_p99_us"] > CEILING_US  # 100 ms on every I/O
    assert broke["outcome"].startswith("over the latency ceiling (p99 ")
    assert broke["outcome"].endswith(": not the peak")
    assert test["status"] == "complete" and result["found"], result["message"]
    peak = result["peak"]
    assert _key(peak) != _key(broke)
    assert peak["lat_p99_us"] is not None and peak["lat_p99_us"] <= CEILING_US
    named = [s for s in again if s["outcome"].endswith(": the peak")]
    assert [(_key(s), s["iops"]) for s in named] == [(_key(peak), peak["iops"])]
    # the point that broke is named as "not the peak" where its first probe beat the peak
    # named (else it would not have been the peak anyway): a rival measured again can
    # measure more than the broken point's first probe did
    first = next(s for s in steps if s["phase"] != "confirm" and _key(s) == _key(broke))
    shown, page = _shown(store, tmp_path)
    if first["iops"] > peak["iops"]:
        assert f"{broke['engine']} {broke['threads']} x QD {broke['iodepth']} is not the " \
               "peak" in result["unconfirmed"]
        for text in (out, shown, page):
            assert "is not the peak" in text
    else:
        assert "unconfirmed" not in result and "is not the peak" not in out
    assert "over the latency ceiling (p99 " in page  # its step says so either way

    # every re-test slowed: no load is confirmed within the ceiling, so no peak, exit 0
    code, out, test = _peak(device, store, "p99=50ms", monkeypatch, _slowing(emu, None))
    result = test["result"]
    assert code == 0, out
    assert test["status"] == "complete" and not result["found"] and result["peak"] is None
    again = [s for s in result["steps"] if s["phase"] == "confirm"]
    assert again and all(s["lat_p99_us"] > CEILING_US for s in again)
    assert not [s for s in result["steps"] if s["outcome"].endswith(": the peak")]
    verdict = "NO PEAK: no load kept to the latency ceiling (p99 <= 50 ms) when measured again"
    shown, page = _shown(store, tmp_path)
    for text in (out, shown, page):
        assert verdict in text
    assert result["message"].startswith("no peak: no load kept to the latency ceiling")
    assert "fio or device error" not in out and "test(s) failed" not in out

    # even 1 x QD 1 over the ceiling: no peak, a verdict, exit 0
    code, out, test = _peak(device, store, "p99=1ns", monkeypatch, None)
    assert code == 0, out
    assert test["status"] == "complete" and not test["result"]["found"]
    assert "NO PEAK: no load kept to the latency ceiling (p99 <= 0.001 us): even io_uring " \
           "1 x QD 1 was over it" in out
