"""A drive's own count of the bytes written to it, from its health log (issue 15, item 7).

* NVMe: the SMART / Health log through ``nvme smart-log -o json`` (Data Units Written,
  units of 1000 x 512 bytes, rounded up by the drive); through ``smartctl`` where nvme-cli
  is missing (``nvme_smart_health_information_log.data_units_written``, the same count).
* SATA (``/dev/sd*``, ``smartctl -j -a -l devstat``, smartmontools 7 or newer):
  the General Statistics page of the ATA Device Statistics log, "Logical Sectors Written",
  where the drive keeps one (ACS-3: a standard count in logical sectors); else the SMART
  attribute whose name says what it counts and in what unit: ``Host_Writes_32MiB``,
  ``Host_Writes_GiB``, ``Lifetime_Writes_GiB``, ``Total_Writes_GiB``, then
  ``Total_LBAs_Written`` (logical sectors of the JSON's ``logical_block_size``). The
  names with a unit come first because ``Total_LBAs_Written`` is also smartctl's default
  name of attribute 241 for drives its database does not describe, whatever their unit
  (a Dell-branded Intel S3520 shows 241 "Total_LBAs_Written" equal to its 225
  "Host_Writes_32MiB"). NAND writes where an attribute names its unit
  (``NAND_Writes_32MiB``, ``NAND_Writes_1GiB``, ``Flash_Writes_GiB``); Samsung's
  ``NAND_Writes`` and Micron's page counts (247/248) do not say theirs and are not read.
* SAS / SCSI: the Write Error Counter log's "Gigabytes processed"
  (``scsi_error_counter_log.write.gigabytes_processed``, 10^9 bytes printed with three
  decimals: a resolution of 10^6 bytes).
* The emulated SSD: its stats keep the NVMe count in the same units
  (``wear.data_units_written``) beside its exact ground truth and its NAND writes.

Each reading's ``resolution_bytes`` is the unit of the count it came from.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ssdlab.errors import TargetError
from ssdlab.targets.emulator import emulator_of, stats

#: bytes in one NVMe data unit
DATA_UNIT_BYTES = 512_000
MIB = 1 << 20
GIB = 1 << 30
#: the Debian package of smartctl
SMARTCTL_PACKAGE = "smartmontools"
#: SCSI "Gigabytes processed": 10^9 bytes, printed by smartctl with three decimals
SCSI_GB = 10**9
SCSI_RESOLUTION_BYTES = 10**6

#: ATA attributes that count host writes, by the name smartctl gives them, best first:
#: (name, unit in bytes; None for logical sectors of the drive's logical block size)
ATA_HOST_WRITES: tuple[tuple[str, int | None], ...] = (
    ("Host_Writes_32MiB", 32 * MIB),
    ("Host_Writes_GiB", GIB),
    ("Lifetime_Writes_GiB", GIB),
    ("Total_Writes_GiB", GIB),
    ("Total_LBAs_Written", None),
)
#: ATA attributes that count NAND (media) writes and name their unit
ATA_MEDIA_WRITES: tuple[tuple[str, int], ...] = (
    ("NAND_Writes_32MiB", 32 * MIB),
    ("NAND_Writes_1GiB", GIB),
    ("Flash_Writes_GiB", GIB),
)
#: the ATA Device Statistics entry that counts host writes (General Statistics, 018h)
DEVSTAT_LOGICAL_SECTORS_WRITTEN = "Logical Sectors Written"


@dataclass(frozen=True)
class HealthReading:
    """Bytes the host has written to the drive over its life, as the drive counts them;
    ``resolution_bytes`` is the unit of the count, ``media_bytes_written`` the NAND
    writes where the drive reports them, ``media_resolution_bytes`` their unit."""

    source: str
    host_bytes_written: int
    resolution_bytes: int
    media_bytes_written: int | None = None
    media_resolution_bytes: int | None = None


def parse_nvme_smart_log(text: str) -> HealthReading:
    """``nvme smart-log -o json`` output (ValueError when it holds no data units)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"nvme smart-log printed no JSON: {err.msg}") from None
    units = _wide_count(doc.get("data_units_written") if isinstance(doc, dict) else None)
    if units is None:
        raise ValueError("nvme smart-log JSON has no data_units_written count")
    return HealthReading("nvme smart-log", units * DATA_UNIT_BYTES, DATA_UNIT_BYTES)


def _wide_count(value: object) -> int | None:
    """A 128-bit counter as nvme-cli prints it: a JSON number, or a string of decimal
    digits (nvme-cli 2.x, Debian 12's 2.3 among them: ``"data_units_written":"166"``)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and _count(value) else None


def emulator_health(truth: dict[str, object]) -> HealthReading:
    """The emulated SSD's health count from its stats (ValueError without one)."""
    wear = truth.get("wear")
    units = wear.get("data_units_written") if isinstance(wear, dict) else None
    media = wear.get("lifetime_nand_write_bytes") if isinstance(wear, dict) else None
    if not isinstance(units, int):
        raise ValueError("the emulator's stats have no wear.data_units_written "
                         "(an emulator older than this ssdlab)")
    exact = isinstance(media, int)
    return HealthReading("emulator health log", units * DATA_UNIT_BYTES, DATA_UNIT_BYTES,
                         media if exact else None, 1 if exact else None)


# --------------------------------------------------------------------------- smartctl


def parse_smartctl(text: str) -> HealthReading | None:
    """``smartctl -j`` output (smartmontools 7.x): the drive's count of host writes, or
    None where it reports none (a hard disk without attribute 241, a SCSI device without
    the error counter log). ValueError when the text is not smartctl's JSON."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"smartctl printed no JSON: {err.msg}") from None
    if not isinstance(doc, dict):
        raise ValueError("smartctl's JSON is not an object")
    return _nvme_reading(doc) or _ata_reading(doc) or _scsi_reading(doc)


def smartctl_failure(text: str, returncode: int) -> str | None:
    """Why smartctl could not read the device, or None where it did. Its exit status is
    a bit mask: bit 0 (the command line, or a device type it cannot detect) and bit 1
    (the device did not open) mean nothing was read; the higher bits report the drive's
    health or a failed optional command, and the output still holds what was read."""
    if returncode & 0b11 == 0:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    messages = []
    if isinstance(doc, dict) and isinstance(doc.get("smartctl"), dict):
        for message in doc["smartctl"].get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("string"), str):
                messages.append(message["string"].strip())
    if messages:
        return "; ".join(messages)
    if "UNRECOGNIZED OPTION" in text:
        return "this smartctl has no JSON output (smartmontools 7.0 or newer is needed)"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first or f"exit status {returncode}"


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _nvme_reading(doc: dict[str, object]) -> HealthReading | None:
    log = doc.get("nvme_smart_health_information_log")
    units = log.get("data_units_written") if isinstance(log, dict) else None
    if not _count(units):
        return None
    assert isinstance(units, int)
    return HealthReading("smartctl: NVMe data units written", units * DATA_UNIT_BYTES,
                         DATA_UNIT_BYTES)


def _ata_reading(doc: dict[str, object]) -> HealthReading | None:
    sector = doc.get("logical_block_size")
    sector = sector if _count(sector) and sector else 512
    assert isinstance(sector, int)
    attributes = _ata_attributes(doc)
    media = _first_attribute(attributes, ATA_MEDIA_WRITES)
    media_bytes = media[2] * media[3] if media else None
    media_unit = media[3] if media else None
    devstat = _devstat_sectors_written(doc)
    if devstat is not None:
        return HealthReading(f"smartctl: ATA device statistics, "
                             f"{DEVSTAT_LOGICAL_SECTORS_WRITTEN}", devstat * sector, sector,
                             media_bytes, media_unit)
    found = _first_attribute(attributes, tuple((name, unit or sector)
                                               for name, unit in ATA_HOST_WRITES))
    if found is None:
        return None
    number, name, raw, unit = found
    note = "" if doc.get("in_smartctl_database") is not False else (
        " (drive not in smartctl's database: the unit is its default)")
    return HealthReading(f"smartctl: ATA attribute {number} {name}{note}", raw * unit, unit,
                         media_bytes, media_unit)


def _ata_attributes(doc: dict[str, object]) -> list[tuple[int, str, int]]:
    """(id, name, raw value) of each attribute in ``ata_smart_attributes``."""
    block = doc.get("ata_smart_attributes")
    table = block.get("table") if isinstance(block, dict) else None
    out = []
    for row in table if isinstance(table, list) else []:
        if not isinstance(row, dict):
            continue
        raw = row.get("raw")
        value = raw.get("value") if isinstance(raw, dict) else None
        number, name = row.get("id"), row.get("name")
        if isinstance(number, int) and isinstance(name, str) and _count(value):
            assert isinstance(value, int)
            out.append((number, name, value))
    return out


def _first_attribute(attributes: list[tuple[int, str, int]],
                     wanted: tuple[tuple[str, int], ...]) -> tuple[int, str, int, int] | None:
    """The first attribute by the order of ``wanted`` (then of the table): (id, name, raw
    value, unit)."""
    for name, unit in wanted:
        for number, have, raw in attributes:
            if have == name:
                return number, name, raw, unit
    return None


def _devstat_sectors_written(doc: dict[str, object]) -> int | None:
    log = doc.get("ata_device_statistics")
    pages = log.get("pages") if isinstance(log, dict) else None
    for page in pages if isinstance(pages, list) else []:
        table = page.get("table") if isinstance(page, dict) else None
        for entry in table if isinstance(table, list) else []:
            if not isinstance(entry, dict):
                continue
            if entry.get("name") != DEVSTAT_LOGICAL_SECTORS_WRITTEN:
                continue
            flags = entry.get("flags")
            valid = flags.get("valid") if isinstance(flags, dict) else None
            value = entry.get("value")
            if valid is not False and _count(value):
                assert isinstance(value, int)
                return value
    return None


def _scsi_reading(doc: dict[str, object]) -> HealthReading | None:
    log = doc.get("scsi_error_counter_log")
    write = log.get("write") if isinstance(log, dict) else None
    processed = write.get("gigabytes_processed") if isinstance(write, dict) else None
    if not isinstance(processed, (str, int, float)) or isinstance(processed, bool):
        return None
    try:
        gigabytes = Decimal(str(processed))
    except InvalidOperation:
        return None
    if not gigabytes.is_finite() or gigabytes < 0:
        return None
    return HealthReading("smartctl: SCSI write error counter log, gigabytes processed",
                         int(gigabytes * SCSI_GB), SCSI_RESOLUTION_BYTES)


# --------------------------------------------------------------------------- reading


Run = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)


def smartctl_command(path: str) -> list[str]:
    """The smartctl command ssdlab reads a drive's counts with (read-only: identify, the
    SMART data and logs, and the ATA Device Statistics log, which other devices ignore)."""
    return ["smartctl", "-j", "-a", "-l", "devstat", path]


def read_health(path: str, details: dict[str, object], *,
                run: Run = _run) -> HealthReading | None:
    """The health count of the drive at ``path`` (``details``: its identity's), or None
    where ssdlab cannot read one (files, loop and virtual devices, drives that keep no
    such count). NVMe through nvme-cli, or smartctl where nvme-cli is missing; SATA and
    SAS (``/dev/sd*``) through smartctl. TargetError (one line) when the tool is missing
    or cannot read the device."""
    if "://" in path:  # an NBD export: the drive is the server's
        return None
    emu = emulator_of(path, details)
    if emu is not None:
        return emulator_health(stats(emu))
    name = os.path.basename(os.path.realpath(path))
    if name.startswith("nvme"):
        return _nvme_health(path, run, details)
    if name.startswith("sd"):
        return _smartctl_health(path, run)
    return None


def nvme_smart_log_scope(details: dict[str, object]) -> int | None:
    """The namespace whose own SMART log to read, or None for the controller's.

    Without a namespace id nvme-cli reads the controller's log (NSID FFFFFFFFh): the
    writes of all its namespaces, so on a controller with several (QEMU's, a drive split
    into namespaces) another namespace's writes were counted as the target's. Where the
    controller keeps a log per namespace (Identify Controller LPA bit 0, as QEMU's does),
    the namespace's own is read."""
    ctrl, namespace = details.get("nvme_id_ctrl"), details.get("nvme_namespace")
    lpa = ctrl.get("lpa") if isinstance(ctrl, dict) else None
    nsid = namespace.get("nsid") if isinstance(namespace, dict) else None
    if isinstance(lpa, int) and lpa & 1 and isinstance(nsid, int) and nsid > 0:
        return nsid
    return None


def _nvme_health(path: str, run: Run, details: dict[str, object]) -> HealthReading | None:
    nsid = nvme_smart_log_scope(details)
    scope = ["--namespace-id", str(nsid)] if nsid is not None else []
    try:
        done = run(["nvme", "smart-log", *scope, "-o", "json", path])
    except FileNotFoundError:
        return _smartctl_health(path, run, instead_of="nvme-cli")
    if done.returncode != 0:
        raise TargetError(f"{path}: nvme smart-log failed: "
                          f"{_one_line(done.stderr or done.stdout)}")
    try:
        reading = parse_nvme_smart_log(done.stdout)
    except ValueError as err:
        raise TargetError(f"{path}: {err}") from None
    if nsid is not None:
        return dataclasses.replace(reading, source=f"{reading.source}, namespace {nsid}")
    if isinstance(details.get("nvme_id_ctrl"), dict):  # it says it keeps no log per namespace
        return dataclasses.replace(reading, source=f"{reading.source}, the controller's "
                                   "(all its namespaces)")
    return reading


def _smartctl_health(path: str, run: Run, *, instead_of: str | None = None) -> HealthReading | None:
    command = smartctl_command(path)
    try:
        done = run(command)
    except FileNotFoundError:
        missing = (f"neither {instead_of} nor smartctl (package {SMARTCTL_PACKAGE}) is "
                   "installed" if instead_of else
                   f"smartctl is not installed (package {SMARTCTL_PACKAGE})")
        raise TargetError(f"{path}: {missing}: its health log (bytes written) cannot be "
                          "read") from None
    except (OSError, subprocess.SubprocessError) as err:
        raise TargetError(f"{path}: smartctl failed: {_one_line(str(err))}") from None
    out = done.stdout or ""
    failure = smartctl_failure(out, done.returncode)
    if failure is not None:
        detail = failure if out.strip() else _one_line(done.stderr or "") or failure
        raise TargetError(f"{path}: smartctl could not read the device: "
                          f"{_one_line(detail)}")
    try:
        return parse_smartctl(out)
    except ValueError as err:
        raise TargetError(f"{path}: {err}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
