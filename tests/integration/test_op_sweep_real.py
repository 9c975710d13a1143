"""``ssdlab run op-sweep`` with real fio on the emulated SSD: the settings rank by steady
IOPS in the order of the emulator's ground truth (lower write amplification, higher IOPS),
and the recommendation is the one the documented rule gives for the stored numbers.

The emulator is small so the sweep takes about half a minute: enterprise-tlc, 128 MiB,
16-page (64 KiB) blocks so each of its 16 dies has enough blocks for GC to choose from;
the quick profile (1 s rounds, OP 0, 20 and 40 %).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ssdlab.analysis.op_sweep import SettingOutcome, recommend
from ssdlab.targets import emulator
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20


def test_op_sweep_ranks_settings_as_the_emulators_write_amplification(
    shm_dir: Path, emu_run_dir: Path
) -> None:
    run_dir = emu_run_dir
    store = shm_dir / "results.sqlite"
    emu = emulator.start("opsweep", "enterprise-tlc", 128 * MIB, loop=True,
                         options=("--pages-per-block", "16"))
    try:
        assert emu.loop_device
        started = time.monotonic()
        result = ssdlab("run", "op-sweep", "--target", emu.loop_device, "--destroy-data",
                        "--profile", "quick", "--store", str(store),
                        env={"SSDLAB_EMU_RUN_DIR": str(run_dir)}, timeout=300)
        seconds = time.monotonic() - started
    finally:
        emulator.stop("opsweep")
    print(result.stdout[-2500:])
    assert result.returncode == 0, result.stderr + result.stdout[-3000:]
    assert result.stderr == ""
    assert "[QUICK]" in result.stdout

    doc = json.loads(ssdlab("export", "last", "--format", "json", "--store",
                            str(store)).stdout)
    r = next(t for t in doc["tests"] if t["name"] == "op-sweep")["result"]
    settings = r["settings"]
    for s in settings:
        print(f"OP {s['op_pct']:g} %: {s['iops']:,.0f} IOPS ({s['status']}, rounds "
              f"{s['window_rounds']}), WA {s['emulator_wa']:.2f}")
    print(f"sweep took {seconds:.1f} s; {r['recommendation']['message']}")
    assert [s["op_pct"] for s in settings] == [0, 20, 40]
    assert all(s["status"] in ("steady", "not_steady") for s in settings)
    by_iops = sorted(settings, key=lambda s: -s["iops"])
    by_wa = sorted(settings, key=lambda s: s["emulator_wa"])
    assert [s["op_pct"] for s in by_iops] == [s["op_pct"] for s in by_wa]
    assert r["ground_truth_order_agrees"] is True
    assert settings[0]["emulator_wa"] > 1.5 * settings[-1]["emulator_wa"]
    # the stored recommendation is the rule applied to the stored numbers
    again = recommend([SettingOutcome(s["op_pct"], s["usable_fraction"], s["iops"],
                                      s["steady"]) for s in settings],
                      r["recommendation"]["min_gain_pct"])
    assert r["recommendation"]["op_pct"] == again.op_pct
    # purge of the whole device before each setting, preconditioning of its range only
    steps = next(t for t in doc["tests"] if t["name"] == "op-sweep")["steps"]
    purges = [s["detail"] for s in steps if s["kind"] == "purge"]
    assert len(purges) == 3 and all(p["ok"] and p["method"] == "blkdiscard" for p in purges)
    assert all(p["detail"].endswith(f"{128 * MIB} bytes from offset 0") for p in purges)
    pre = [s["detail"]["io_bytes"] for s in steps if s["kind"] == "precondition"]
    assert pre == [2 * s["usable_bytes"] for s in settings]
