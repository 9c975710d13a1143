"""The write-cache state of a device, for a run's provenance (issue 15, item 2).

Three views, each None where it cannot be read (never an exception):

* ``sysfs``: ``/sys/class/block/<disk>/queue/write_cache``, "write back" or "write
  through". It is the kernel's view: whether it sends flushes (and FUA) to the device.
  For NVMe the kernel sets it from the *presence* of a volatile write cache (Identify
  Controller VWC bit 0) and does not follow the Volatile Write Cache feature; for SCSI
  and SATA disks from the caching mode page (WCE) when it reads it; and anyone may write
  "write through" to it without changing the device.
* ``nvme_vwc`` (NVMe): ``nvme id-ctrl`` says whether a volatile write cache is present
  (``vwc`` bit 0, also kept as ``nvme_vwc_present``); where it is,
  ``nvme get-feature -f 6 -H`` gives the Volatile Write Cache Enable bit (nvme-cli 2.x
  text: "get-feature:0x06 (Volatile Write Cache), Current value:0x00000001" and, with
  -H, "Volatile Write Cache Enable (WCE): Enabled"). No cache present: False.
* ``ata_write_cache`` (a SATA ``/dev/sd*``, one with the ATA Information VPD page):
  ``hdparm -W`` (" write-caching =  1 (on)"); "not supported": None.
* ``scsi_wce`` (any other ``/dev/sd*``: SAS, virtio-scsi, iSCSI): the WCE bit of the
  SCSI caching mode page, ``sdparm --get=WCE`` ("WCE  1  [cha: y, def:  1]"; sdparm
  exits 5 where the drive keeps no saved values, QEMU's among them, after printing the
  current one: the value is read from the output).

``enabled`` is the device's own answer where one was read (NVMe, ATA, SCSI), else the
kernel's (sysfs); ``path`` says which: ``nvme``, ``ata``, ``scsi`` or ``sysfs`` (None
where nothing was read). Loop, zram, md, dm and other virtual devices are read from
sysfs only.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from ssdlab.targets.ata_scsi import command_set, sdparm_wce
from ssdlab.targets.identity import SYSFS, block_dir, read_attr, whole_disk_of

Run = Callable[[list[str]], "subprocess.CompletedProcess[str]"]

_VWC_LINE = re.compile(r"^vwc\s*:\s*(\S+)", re.MULTILINE)
_WCE_LINE = re.compile(r"Volatile Write Cache Enable \(WCE\)\s*:\s*(Enabled|Disabled)")
_VWC_VALUE = re.compile(r"\(Volatile Write Cache\),\s*(?:Current\s+)?value\s*:\s*"
                        r"(?:0x)?([0-9a-fA-F]+)", re.IGNORECASE)
_HDPARM_LINE = re.compile(r"^\s*write-caching\s*=\s*(\d+|not supported)", re.MULTILINE)


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)


def parse_sysfs_write_cache(text: str | None) -> bool | None:
    """``queue/write_cache``: "write back" True, "write through" False."""
    value = (text or "").strip()
    return {"write back": True, "write through": False}.get(value)


def parse_nvme_vwc_present(text: str) -> bool | None:
    """``nvme id-ctrl`` text (plain or -H): is a volatile write cache present (bit 0 of
    ``vwc``)?"""
    match = _VWC_LINE.search(text)
    if match is None:
        return None
    try:
        return bool(int(match.group(1), 0) & 1)
    except ValueError:
        return None


def parse_nvme_vwc_feature(text: str) -> bool | None:
    """``nvme get-feature -f 6 [-H]`` text: is the volatile write cache enabled? The -H
    line where printed, else bit 0 of the current value (hexadecimal; nvme-cli prints
    zero without its 0x)."""
    match = _WCE_LINE.search(text)
    if match is not None:
        return match.group(1) == "Enabled"
    value = _VWC_VALUE.search(text)
    if value is None:
        return None
    return bool(int(value.group(1), 16) & 1)


def parse_hdparm_write_cache(text: str) -> bool | None:
    """``hdparm -W DEVICE``: " write-caching =  1 (on)" True, 0 False, "not supported"
    (or no such line) None. A line "setting drive write-caching to ..." (``-W0``/``-W1``)
    is not the state; the "write-caching =" line after it, read back, is."""
    found = set(_HDPARM_LINE.findall(text))
    if len(found) != 1:
        return None  # no answer, or several devices that disagree
    value = found.pop()
    return value != "0" if value.isdigit() else None


def _output(run: Run, command: list[str]) -> str | None:
    """The command's standard output, or None where it is missing or fails."""
    try:
        done = run(command)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout or ""


def _nvme(device: str, run: Run) -> tuple[bool | None, bool | None]:
    """(present, enabled) of an NVMe drive's volatile write cache."""
    text = _output(run, ["nvme", "id-ctrl", device])
    present = parse_nvme_vwc_present(text) if text is not None else None
    if present is False:
        return False, False
    text = _output(run, ["nvme", "get-feature", "-f", "6", "-H", device])
    return present, parse_nvme_vwc_feature(text) if text is not None else None


def write_cache_state(path: str, name: str, *, run: Run = _run,
                      sysfs: Path = SYSFS) -> dict[str, object]:
    """The write-cache state of the block device ``path`` (kernel name ``name``; a
    partition is read on its disk): keys ``sysfs`` ("write back"/"write through"/None),
    ``nvme_vwc_present``, ``nvme_vwc``, ``ata_write_cache``, ``scsi_wce`` (True/False/
    None), the verdict ``enabled`` (True/False/None) and the ``path`` it was read
    through. Never raises."""
    state: dict[str, object] = {"sysfs": None, "nvme_vwc_present": None, "nvme_vwc": None,
                                "ata_write_cache": None, "scsi_wce": None, "enabled": None,
                                "path": None}
    try:
        disk = whole_disk_of(name, sysfs=sysfs)
    except (OSError, RuntimeError, ValueError):
        disk = name
    device = path if disk == name else f"/dev/{disk}"
    raw = read_attr(block_dir(disk, sysfs=sysfs) / "queue" / "write_cache")
    state["sysfs"] = raw if raw else None
    if disk.startswith("nvme"):
        state["nvme_vwc_present"], state["nvme_vwc"] = _nvme(device, run)
    elif command_set(disk, sysfs=sysfs) == "ata":
        text = _output(run, ["hdparm", "-W", device])
        state["ata_write_cache"] = parse_hdparm_write_cache(text) if text is not None else None
    elif disk.startswith("sd"):
        state["scsi_wce"] = sdparm_wce(device, run)
    for key, path in (("nvme_vwc", "nvme"), ("ata_write_cache", "ata"), ("scsi_wce", "scsi")):
        if state[key] is not None:
            state["enabled"], state["path"] = state[key], path
            break
    else:
        state["enabled"] = parse_sysfs_write_cache(raw)
        state["path"] = "sysfs" if state["enabled"] is not None else None
    return state
