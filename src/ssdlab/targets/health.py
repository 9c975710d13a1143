"""A drive's own count of the bytes written to it, from its health log (issue 15, item 7):
NVMe's SMART / Health log through ``nvme smart-log -o json`` (Data Units Written, units
of 1000 x 512 bytes, rounded up by the drive), and the emulated SSD's stats, which keep
the same count in the same units (``wear.data_units_written``) beside its exact ground
truth and its NAND writes. SATA and SAS (``smartctl``) are not read yet.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from ssdlab.errors import TargetError
from ssdlab.targets.emulator import emulator_of, stats

#: bytes in one NVMe data unit
DATA_UNIT_BYTES = 512_000


@dataclass(frozen=True)
class HealthReading:
    """Bytes the host has written to the drive over its life, as the drive counts them;
    ``resolution_bytes`` is the unit of the count, ``media_bytes_written`` the NAND
    writes where the drive reports them."""

    source: str
    host_bytes_written: int
    resolution_bytes: int
    media_bytes_written: int | None = None


def parse_nvme_smart_log(text: str) -> HealthReading:
    """``nvme smart-log -o json`` output (ValueError when it holds no data units)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"nvme smart-log printed no JSON: {err.msg}") from None
    units = doc.get("data_units_written") if isinstance(doc, dict) else None
    if not isinstance(units, int) or isinstance(units, bool) or units < 0:
        raise ValueError("nvme smart-log JSON has no data_units_written count")
    return HealthReading("nvme smart-log", units * DATA_UNIT_BYTES, DATA_UNIT_BYTES)


def emulator_health(truth: dict[str, object]) -> HealthReading:
    """The emulated SSD's health count from its stats (ValueError without one)."""
    wear = truth.get("wear")
    units = wear.get("data_units_written") if isinstance(wear, dict) else None
    media = wear.get("lifetime_nand_write_bytes") if isinstance(wear, dict) else None
    if not isinstance(units, int):
        raise ValueError("the emulator's stats have no wear.data_units_written "
                         "(an emulator older than this ssdlab)")
    return HealthReading("emulator health log", units * DATA_UNIT_BYTES, DATA_UNIT_BYTES,
                         media if isinstance(media, int) else None)


Run = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)


def read_health(path: str, details: dict[str, object], *,
                run: Run = _run) -> HealthReading | None:
    """The health count of the drive at ``path`` (``details``: its identity's), or None
    where ssdlab cannot read one (files, loop devices, SATA/SAS for now)."""
    emu = emulator_of(path, details)
    if emu is not None:
        return emulator_health(stats(emu))
    if not path.startswith("/dev/nvme"):
        return None
    done = run(["nvme", "smart-log", "-o", "json", path])
    if done.returncode != 0:
        raise TargetError(f"{path}: nvme smart-log failed: "
                          f"{(done.stderr or done.stdout).strip()[:200]}")
    try:
        return parse_nvme_smart_log(done.stdout)
    except ValueError as err:
        raise TargetError(f"{path}: {err}") from None
