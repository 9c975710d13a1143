"""SATA and SCSI disks (``/dev/sd*``): which command set a disk speaks, and its identity,
write cache and erase capabilities read through that path (issue 32, item 6).

A disk the kernel's SCSI layer shows as ``sdX`` speaks one of two command sets:

* **ata**: a SATA disk behind libata (or a SAT bridge): the kernel exposes the ATA
  Information VPD page (``device/vpd_pg89``). Its identity and features come from the
  ATA IDENTIFY DEVICE data through ``hdparm -I`` (the Security feature set, TRIM and its
  determinism, the write cache); ``smartctl -j -i`` where hdparm is missing.
* **scsi**: everything else (SAS, virtio-scsi, iSCSI, USB mass storage): ``sg_inq``
  (the standard INQUIRY and the unit serial number) and ``sg_vpd -p lbpv`` (the Logical
  Block Provisioning page: UNMAP supported, reads of unmapped blocks return zeros);
  ``smartctl -j -i`` where sg3-utils is missing.

Everything here only reads. What a reading cannot tell is None, never an exception.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

Run = Callable[[list[str]], "subprocess.CompletedProcess[str]"]

#: the Debian packages of the tools, for the messages
PACKAGES = {"hdparm": "hdparm", "sg_inq": "sg3-utils", "sg_vpd": "sg3-utils",
            "sg_sanitize": "sg3-utils", "sdparm": "sdparm", "smartctl": "smartmontools"}

_HDPARM_FIELD = re.compile(r"^\s*(Model Number|Serial Number|Firmware Revision):\s*(.*?)\s*$",
                           re.MULTILINE)
_SG_INQ_FIELD = re.compile(r"^\s*(Vendor identification|Product identification|"
                           r"Product revision level|Unit serial number):\s*(.*?)\s*$",
                           re.MULTILINE)
_LBPV_FIELD = re.compile(r"\((LBPU|LBPRZ|LBPWS|LBPWS10)\):\s*(\d+)")
_ERASE_TIME = re.compile(r"(\d+)min for SECURITY ERASE UNIT")
_SDPARM_WCE = re.compile(r"^\s*WCE\s+(\d)\b", re.MULTILINE)


SYSFS = Path("/sys")


def block_dir(name: str, *, sysfs: Path = SYSFS) -> Path:
    """(identity.py's, which imports this module)"""
    return sysfs / "class" / "block" / name


def read_attr(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def run_tool(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, errors="replace",
                          check=False, timeout=60)


def command_set(disk: str, *, sysfs: Path = SYSFS) -> str | None:
    """``ata`` or ``scsi`` for a whole ``sd*`` disk, None for any other device. ATA: the
    kernel shows its ATA Information VPD page, or the disk hangs off a libata port
    (``.../ata3/host2/...``)."""
    if not disk.startswith("sd"):
        return None
    directory = block_dir(disk, sysfs=sysfs)
    if (directory / "device" / "vpd_pg89").exists() or "/ata" in str(directory.resolve()):
        return "ata"
    return "scsi"


def output_of(run: Run, command: list[str]) -> tuple[str | None, str]:
    """(standard output, or None where the tool is missing or failed; why it failed)."""
    try:
        done = run(command)
    except FileNotFoundError:
        tool = command[0]
        return None, f"{tool} is not installed (package {PACKAGES.get(tool, tool)})"
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return None, f"{command[0]} failed: {err}"
    if done.returncode != 0:
        said = " ".join(((done.stderr or "") + (done.stdout or "")).split())[:200]
        return None, f"{shlex.join(command)} exited with {done.returncode}: {said}"
    return done.stdout or "", ""


# --------------------------------------------------------------------------- ATA


def _features(text: str) -> dict[str, bool]:
    """``hdparm -I``'s Commands/features table: feature -> enabled (``*``)."""
    section = text.split("Commands/features:", 1)[1] if "Commands/features:" in text else ""
    section = re.split(r"^\S", section, maxsplit=1, flags=re.MULTILINE)[0]
    found = {}
    for line in section.splitlines():
        match = re.match(r"^\t\s*(\*?)\s*(\S.*?)\s*$", line)
        if match and match.group(2) != "Enabled\tSupported:" and "Supported:" not in line:
            found[match.group(2)] = match.group(1) == "*"
    return found


def _has(features: dict[str, bool], start: str) -> bool:
    return any(name.startswith(start) for name in features)


def parse_security(text: str) -> dict[str, object]:
    """The ATA Security feature set from ``hdparm -I``: ``supported`` (False where the
    drive reports no Security section, as QEMU's does), ``enabled`` (a user password is
    set), ``locked``, ``frozen`` (the BIOS froze it: no erase until a power cycle or a
    suspend and resume), ``enhanced_erase`` and ``erase_minutes`` (the drive's
    estimate)."""
    parts = re.split(r"^Security:", text, maxsplit=1, flags=re.MULTILINE)
    if len(parts) < 2:
        return {"supported": False}
    section = parts[1]
    section = re.split(r"^\S", section, maxsplit=1, flags=re.MULTILINE)[0]
    words: dict[str, bool] = {}
    for line in section.splitlines():  # "\t\tsupported", "\tnot\tfrozen"
        match = re.match(r"^\t(not)?\s+(\w+)\s*$", line)
        if match:
            words[match.group(2)] = match.group(1) is None
    minutes = _ERASE_TIME.search(section)
    return {
        "supported": words.get("supported", False),
        "enabled": words.get("enabled"),
        "locked": words.get("locked"),
        "frozen": words.get("frozen"),
        "enhanced_erase": re.search(r"^\t\s+supported: enhanced erase", section,
                                    re.MULTILINE) is not None,
        "erase_minutes": int(minutes.group(1)) if minutes else None,
    }


def parse_hdparm_identify(text: str) -> dict[str, object]:
    """``hdparm -I DEVICE``: the drive's strings (``model``, ``serial``, ``firmware``),
    ``security`` (:func:`parse_security`), ``trim`` (supported, ``deterministic`` reads
    after TRIM, ``zeroes``: they read as zeros), ``write_cache`` (supported, enabled),
    ``sanitize`` (the SANITIZE feature set)."""
    fields = {name: value for name, value in _HDPARM_FIELD.findall(text)}
    features = _features(text)
    cache = next((on for name, on in features.items() if name == "Write cache"), None)
    return {
        "model": fields.get("Model Number") or None,
        "serial": fields.get("Serial Number") or None,
        "firmware": fields.get("Firmware Revision") or None,
        "security": parse_security(text),
        "trim": {"supported": _has(features, "Data Set Management TRIM supported"),
                 "deterministic": _has(features, "Deterministic read"),
                 "zeroes": _has(features, "Deterministic read ZEROs after TRIM")},
        "write_cache": {"supported": cache is not None, "enabled": cache},
        "sanitize": _has(features, "SANITIZE feature set"),
    }


# --------------------------------------------------------------------------- SCSI


def parse_sg_inq(text: str) -> dict[str, object]:
    """``sg_inq DEVICE``: ``vendor``, ``product``, ``revision``, ``serial`` (VPD 0x80)."""
    fields = {name: value for name, value in _SG_INQ_FIELD.findall(text)}
    return {"vendor": fields.get("Vendor identification") or None,
            "product": fields.get("Product identification") or None,
            "revision": fields.get("Product revision level") or None,
            "serial": fields.get("Unit serial number") or None}


def parse_lbp_vpd(text: str) -> dict[str, object]:
    """``sg_vpd -p lbpv DEVICE``: ``unmap`` (LBPU: the UNMAP command), ``write_same_unmap``
    (LBPWS), ``zeroes`` (LBPRZ: unmapped blocks read as zeros); None where not printed."""
    bits = {name: value == "1" for name, value in _LBPV_FIELD.findall(text)}
    return {"unmap": bits.get("LBPU"), "write_same_unmap": bits.get("LBPWS"),
            "zeroes": bits.get("LBPRZ")}


def parse_sdparm_wce(text: str) -> bool | None:
    """``sdparm --get=WCE DEVICE``: the current WCE bit of the caching mode page.

    sdparm exits 5 on QEMU's disks (and on others that keep no saved values) after it
    printed the current value, so the value is read from its output, not its status."""
    match = _SDPARM_WCE.search(text)
    return match.group(1) == "1" if match else None


def sdparm_wce(device: str, run: Run) -> bool | None:
    """The SCSI caching mode page's WCE bit of ``device``, or None."""
    try:
        done = run(["sdparm", "--get=WCE", device])
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return parse_sdparm_wce(done.stdout or "")


# --------------------------------------------------------------------------- identity


def _smartctl_identity(device: str, run: Run) -> tuple[dict[str, object], str]:
    text, why = output_of(run, ["smartctl", "-j", "-i", device])
    if text is None:
        return {}, why
    try:
        doc = json.loads(text)
    except ValueError:
        return {}, "smartctl printed no JSON"
    if not isinstance(doc, dict):
        return {}, "smartctl printed no JSON object"
    model = doc.get("model_name") or doc.get("scsi_product")
    return {"model": model, "serial": doc.get("serial_number"),
            "firmware": doc.get("firmware_version") or doc.get("scsi_revision"),
            "vendor": doc.get("scsi_vendor")}, ""


def _smartctl_trim(device: str, run: Run, found: dict[str, object]) -> None:
    """TRIM as ``smartctl -j -i`` reports it, over hdparm's: hdparm -I prints the DATA SET
    MANAGEMENT word only for drives of ATA major version 8 and later, and QEMU's disk says
    ATA/ATAPI-7 although it supports TRIM (smartctl: "Available, deterministic")."""
    text, _why = output_of(run, ["smartctl", "-j", "-i", device])
    try:
        doc = json.loads(text) if text is not None else None
    except ValueError:
        return
    trim = doc.get("trim") if isinstance(doc, dict) else None
    if isinstance(trim, dict) and isinstance(trim.get("supported"), bool):
        found["trim"] = {"supported": trim["supported"],
                         "deterministic": trim.get("deterministic") is True,
                         "zeroes": trim.get("zeroed") is True}
        commands = found["commands"]
        assert isinstance(commands, list)
        commands.append("smartctl -i")


def identify_sd(disk: str, device: str, *, run: Run = run_tool, sysfs: Path = SYSFS,
                which: Callable[[str], str | None] | None = None) -> dict[str, object]:
    """What the drive ``disk`` (its node ``device``) says of itself through its command
    set: ``path`` (``ata``/``scsi``), ``commands`` (what was run), the drive's strings and
    its erase-related features (``ata``: security, trim, write cache, sanitize; ``scsi``:
    ``provisioning``). ``error`` where nothing could be read; {} for non-sd devices.
    ``which``: where given, tools it does not find are not run."""
    path = command_set(disk, sysfs=sysfs)
    if path is None:
        return {}
    found: dict[str, object] = {"path": path}
    if which is not None:
        run = _missing_tools(run, which)
    if path == "ata":
        text, why = output_of(run, ["hdparm", "-I", device])
        if text is not None:
            found.update(parse_hdparm_identify(text), commands=["hdparm -I"])
            _smartctl_trim(device, run, found)
            return found
    else:
        text, why = output_of(run, ["sg_inq", device])
        if text is not None:
            inquiry = parse_sg_inq(text)
            found.update(inquiry, model=inquiry["product"], firmware=inquiry["revision"],
                         commands=["sg_inq", "sg_vpd -p lbpv"])
            lbp, _why = output_of(run, ["sg_vpd", "-p", "lbpv", device])
            found["provisioning"] = parse_lbp_vpd(lbp) if lbp is not None else None
            found["provisioning_mode"] = provisioning_mode(disk, sysfs=sysfs)
            return found
    strings, why_smart = _smartctl_identity(device, run)
    if strings:
        found.update(strings, commands=["smartctl -i"], note=why)
    else:
        found["error"] = f"{why}; {why_smart}"
    return found


def _missing_tools(run: Run, which: Callable[[str], str | None]) -> Run:
    """``run``, as if the tools ``which`` does not find were not installed."""
    def guarded(command: list[str]) -> subprocess.CompletedProcess[str]:
        if not which(command[0]):
            raise FileNotFoundError(command[0])
        return run(command)
    return guarded


def provisioning_mode(disk: str, *, sysfs: Path = SYSFS) -> str | None:
    """How the kernel discards on a SCSI disk (``scsi_disk/*/provisioning_mode``): unmap,
    writesame_16, writesame_10, writesame_zero, full or disabled."""
    for entry in sorted((block_dir(disk, sysfs=sysfs) / "device" / "scsi_disk").glob("*")):
        return read_attr(entry / "provisioning_mode")
    return None

