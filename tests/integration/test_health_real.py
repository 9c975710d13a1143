"""The drive's own count of bytes written, with real fio on the emulated SSD (issue 15,
item 7): read from its health log (units of 512,000 bytes, as NVMe reports them) before
and after the writes, it is within 1 % of the emulator's exact ground truth and of what
fio wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ssdlab.analysis.endurance import written_between
from ssdlab.targets import emulator
from ssdlab.targets.health import read_health
from ssdlab.targets.identity import identify_block

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20


def _fio(device: str, *args: str) -> int:
    """fio's direct writes to ``device``; the bytes it wrote."""
    out = subprocess.run(["fio", "--name=w", f"--filename={device}", "--direct=1",
                          "--ioengine=libaio", "--output-format=json", *args],
                         check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["jobs"][0]["write"]["io_bytes"])


def _exact(emu: emulator.Emulator) -> tuple[int, int]:
    wear = emulator.stats(emu)["wear"]
    assert isinstance(wear, dict)
    return int(wear["lifetime_host_write_bytes"]), int(wear["lifetime_nand_write_bytes"])


def test_bytes_written_by_the_health_log_match_the_ground_truth(emu_run_dir: Path) -> None:
    emu = emulator.start("health", "enterprise-tlc", 128 * MIB, loop=True)
    assert emu.loop_device is not None
    details = identify_block(emu.loop_device).details
    before, (host0, nand0) = read_health(emu.loop_device, details), _exact(emu)
    wrote = _fio(emu.loop_device, "--rw=write", "--bs=128k", "--iodepth=8", "--size=64m")
    wrote += _fio(emu.loop_device, "--rw=randwrite", "--bs=4k", "--iodepth=16",
                  "--size=128m", "--io_size=16m")
    after, (host1, nand1) = read_health(emu.loop_device, details), _exact(emu)
    assert before is not None and after is not None
    assert before.source == "emulator health log"
    written = written_between(before.host_bytes_written, after.host_bytes_written,
                              after.resolution_bytes, before.media_bytes_written,
                              after.media_bytes_written)
    exact = host1 - host0
    print(f"health log {written.host_bytes:,} B, ground truth {exact:,} B, fio {wrote:,} B, "
          f"write amplification {written.write_amplification}")
    assert exact == wrote == 80 * MIB
    assert abs(written.host_bytes - exact) <= 0.01 * exact
    assert abs(written.host_bytes - exact) < written.resolution_bytes
    assert written.media_bytes == nand1 - nand0 >= exact
