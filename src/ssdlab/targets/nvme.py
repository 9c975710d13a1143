"""NVMe namespaces and their controllers, through sysfs and nvme-cli (read only): which
controller a namespace belongs to, the namespaces of a controller, a namespace's id and
the LBA format in use. :mod:`ssdlab.targets.identity` keeps them with a target."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

SYSFS = Path("/sys")
#: ``subprocess.run``-compatible callable (tests pass fakes).
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _block(name: str, sysfs: Path) -> Path:
    return sysfs / "class" / "block" / name


def nvme_controller_of(name: str, *, sysfs: Path = SYSFS) -> str | None:
    """The controller (``nvme0``) of a namespace (``nvme0n1``), through sysfs."""
    device = (_block(name, sysfs) / "device").resolve()
    if re.fullmatch(r"nvme\d+", device.name):
        return device.name
    for child in sorted(device.glob("nvme*")):  # native multipath: device is nvme-subsysN
        if re.fullmatch(r"nvme\d+", child.name):
            return child.name
    match = re.match(r"(nvme\d+)n\d+", name)
    return match.group(1) if match else None


def nvme_namespaces_of(controller: str, *, sysfs: Path = SYSFS) -> list[str]:
    """The namespaces (``nvme0n1``, ``nvme0n2`` ...) of a controller, through sysfs."""
    names = [entry.name for entry in (sysfs / "class" / "block").glob("nvme*")]
    namespaces = [name for name in names if re.fullmatch(r"nvme\d+n\d+", name)]
    return sorted(
        name for name in namespaces if nvme_controller_of(name, sysfs=sysfs) == controller
    )


def parse_nvme_id_ns(data: object) -> dict[str, object] | None:
    """The LBA format in use from ``nvme id-ns -o json``: its index (FLBAS bits 3:0, and
    6:5 above 16 formats), the bytes of data and of metadata per block, how many formats
    the namespace offers; None when the JSON holds none."""
    if not isinstance(data, dict):
        return None
    flbas, formats = data.get("flbas"), data.get("lbafs")
    if not isinstance(flbas, int) or not isinstance(formats, list):
        return None
    index = (flbas & 0xF) | ((flbas >> 5) & 0x3) << 4
    chosen = formats[index] if index < len(formats) else None
    if not isinstance(chosen, dict) or not isinstance(chosen.get("ds"), int):
        return None
    return {"lba_format": index, "lba_data_bytes": 1 << chosen["ds"],
            "lba_metadata_bytes": chosen.get("ms"), "lba_formats": len(formats)}


def nvme_namespace(disk: str, runner: Runner, *, sysfs: Path = SYSFS) -> dict[str, object]:
    """The namespace's id (sysfs) and the LBA format in use (``nvme id-ns``)."""
    try:
        nsid: int | None = int((_block(disk, sysfs) / "nsid").read_text())
    except (OSError, ValueError):
        nsid = None
    namespace: dict[str, object] = {"nsid": nsid}
    command = ["nvme", "id-ns", f"/dev/{disk}", "-o", "json"]
    try:
        result = runner(command, capture_output=True, text=True, check=False, timeout=30)
        found = parse_nvme_id_ns(json.loads(result.stdout)) if result.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        found = None
    namespace.update(found or {"lba_format": None})
    return namespace
