"""SATA and SCSI disks (``/dev/sd*``): which command set a disk speaks, and its identity,
write cache and erase capabilities read through that path (issue 32, item 6).

A disk the kernel's SCSI layer shows as ``sdX`` speaks one of two command sets:

* **ata**: a SATA disk behind libata (or a SAT bridge): the kernel exposes the ATA
  Information VPD page (``device/vpd_pg89``). Its identity and features come from the
  ATA IDENTIFY DEVICE data through ``hdparm -I`` (the Security feature set, the write
  cache, SANITIZE) and ``smartctl -j -i`` (TRIM and its determinism: hdparm prints them
  for ATA-8 and later drives only); ``smartctl -j -i`` alone where hdparm is missing.
* **scsi**: everything else (SAS, virtio-scsi, iSCSI, USB mass storage): ``sg_inq``
  (the standard INQUIRY and the unit serial number) and ``sg_vpd -p lbpv`` (the Logical
  Block Provisioning page: UNMAP supported, reads of unmapped blocks return zeros);
  ``smartctl -j -i`` where sg3-utils is missing.

The readings only read; what one cannot tell is None, never an exception. The erases
(:func:`ata_secure_erase`, :func:`scsi_sanitize`) erase the whole drive: only purge.py
calls them, after the safety checks (targets/safety.py). This module imports nothing of
ssdlab (identity.py imports it), hence its own small sysfs helpers.
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


#: how a disk is attached, in words (sd_bus)
BUS_WORDS = {"ata": "a libata (plain ATA) port", "usb": "a USB or UAS bridge",
             "sas": "a SAS HBA (SATA passed through)", "other": "an unknown adapter"}


def sd_bus(disk: str, *, sysfs: Path = SYSFS) -> str:
    """How a whole ``sd*`` disk is attached, from its resolved sysfs device path: ``ata``
    (a libata port, ``.../ata3/host2/...``: ATA commands reach the drive as sent),
    ``usb`` (a USB or UAS bridge), ``sas`` (a SAS HBA's end device) or ``other``."""
    where = str(block_dir(disk, sysfs=sysfs).resolve())
    if "/usb" in where:
        return "usb"
    if "/end_device-" in where or "/port-" in where:
        return "sas"
    return "ata" if re.search(r"/ata\d+/", where) else "other"


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
    set: ``path`` (``ata``/``scsi``), ``bus`` (:func:`sd_bus`), ``commands`` (what was
    run), the drive's strings and its erase-related features (``ata``: security, trim,
    write cache, sanitize; ``scsi``: ``provisioning``). ``error`` where nothing could be
    read; {} for non-sd devices. ``which``: where given, tools it does not find are not
    run."""
    path = command_set(disk, sysfs=sysfs)
    if path is None:
        return {}
    found: dict[str, object] = {"path": path, "bus": sd_bus(disk, sysfs=sysfs)}
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


#: what the kernel sends for a discard on a SCSI disk, by its provisioning_mode
DISCARD_COMMANDS = {
    "unmap": "SCSI UNMAP",
    "writesame_16": "SCSI WRITE SAME(16) with UNMAP",
    "writesame_10": "SCSI WRITE SAME(10) with UNMAP",
    "writesame_zero": "SCSI WRITE SAME with zeros",
}


def discard_command_name(disk: str, path: str | None, *, sysfs: Path = SYSFS) -> str | None:
    """The command a ``blkdiscard`` becomes on the drive: ATA's DATA SET MANAGEMENT TRIM
    (libata translates the kernel's WRITE SAME(16)), a SCSI UNMAP or WRITE SAME, NVMe's
    Dataset Management (deallocate); None for other devices."""
    if disk.startswith("nvme"):
        return "NVMe Dataset Management (deallocate)"
    if path == "ata":
        return "ATA DATA SET MANAGEMENT TRIM"
    if path == "scsi":
        mode = provisioning_mode(disk, sysfs=sysfs)
        return DISCARD_COMMANDS.get(mode or "", f"SCSI (provisioning mode {mode})")
    return None


# --------------------------------------------------------------------------- erase

#: the temporary user password of an ATA secure erase (the erase clears it)
ERASE_PASSWORD = "ssdlab"
#: the wait for commands that only ask or set (not the erase itself)
ASK_TIMEOUT_S = 60.0
#: the erase's wait: the drive's own estimate, times this, at least ERASE_MIN_TIMEOUT_S
ERASE_TIMEOUT_FACTOR = 3
ERASE_MIN_TIMEOUT_S = 600.0
#: the longest a SCSI SANITIZE may take (sg_sanitize polls its progress meanwhile)
SANITIZE_TIMEOUT_S = 24 * 3600.0
#: sg3_utils exit statuses (sg_lib.h): illegal request, invalid opcode
SG_ILLEGAL_REQUEST = 5
SG_INVALID_OPCODE = 9

#: subprocess.run-compatible
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _call(runner: Runner, command: list[str], timeout: float) -> tuple[int | None, str]:
    """(exit status or None where it did not run, what it printed: stderr then stdout).
    Undecodable bytes are replaced: sg_sanitize prints the LU name's binary NAA bytes."""
    try:
        done = runner(command, capture_output=True, text=True, errors="replace", check=False,
                      timeout=timeout)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return None, f"could not run {command[0]}: {err}"
    said = "\n".join(part.strip() for part in (done.stderr or "", done.stdout or "")
                     if part.strip())
    return done.returncode, said


def _sense_note(said: str) -> str:
    """hdparm's "SG_IO: bad/missing sense data, sb[]: 70 00 0b ..." (sense key 0x0b:
    ABORTED COMMAND; hdparm prints it and still exits 0) in a few words."""
    match = re.search(r"sb\[\]:\s*70 00 ([0-9a-f]{2})", said)
    if match is None:
        return ""
    key = int(match.group(1), 16) & 0x0F
    return " (the drive aborted it: sense key 0x0b)" if key == 0x0B else (
        f" (sense key {key:#04x})")


def ata_secure_erase(device: str, runner: Runner,
                     erase_minutes: int | None = None) -> tuple[bool, list[str], str]:
    """ATA SECURITY ERASE UNIT of the whole drive: set a temporary user password, erase
    (which clears it). hdparm exits 0 when the drive aborts either command (QEMU's does:
    it has no Security feature set), so each step is judged by the drive's Security state
    read back with ``hdparm -I``, not by hdparm's status: the password must be set after
    the first and gone after the erase. A password the erase did not clear is removed
    (SECURITY DISABLE PASSWORD). (ok, the commands run, what happened)."""
    set_pass = ["hdparm", "--user-master", "u", "--security-set-pass", ERASE_PASSWORD, device]
    erase = ["hdparm", "--user-master", "u", "--security-erase", ERASE_PASSWORD, device]
    code, said = _call(runner, set_pass, ASK_TIMEOUT_S)
    state = _security_now(device, runner)
    if code is None or state.get("enabled") is not True:
        how = said if code is None else f"hdparm exited {code}{_sense_note(said)}"
        return False, [shlex.join(set_pass)], (
            f"the drive did not take a password (SECURITY SET PASSWORD: {how}; hdparm -I "
            f"then shows {_security_words(state)}); nothing was erased")
    timeout = max(ERASE_MIN_TIMEOUT_S, 60.0 * ERASE_TIMEOUT_FACTOR * (erase_minutes or 0))
    code, said = _call(runner, erase, timeout)
    state = _security_now(device, runner)
    commands = [shlex.join(set_pass), shlex.join(erase)]
    if state.get("enabled") is False:
        return True, commands, "SECURITY ERASE UNIT completed: the drive cleared the password"
    how = said if code is None else f"hdparm exited {code}{_sense_note(said)}"
    disable = ["hdparm", "--user-master", "u", "--security-disable", ERASE_PASSWORD, device]
    _call(runner, disable, ASK_TIMEOUT_S)
    commands.append(shlex.join(disable))
    left = _security_now(device, runner)
    password = ("the temporary password was removed" if left.get("enabled") is False else
                f"the temporary user password {ERASE_PASSWORD!r} may still be set: remove "
                f"it with {shlex.join(disable)}")
    return False, commands, (f"SECURITY ERASE UNIT did not complete ({how}; hdparm -I "
                             f"shows {_security_words(state)}); {password}")


def _security_now(device: str, runner: Runner) -> dict[str, object]:
    """The drive's ATA Security state now (``hdparm -I``); {} where it cannot be read."""
    try:
        done = runner(["hdparm", "-I", device], capture_output=True, text=True,
                      errors="replace", check=False, timeout=ASK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return parse_security(done.stdout or "") if done.returncode == 0 else {}


def _security_words(state: dict[str, object]) -> str:
    if not state:
        return "nothing (hdparm -I failed)"
    if not state.get("supported"):
        return "no Security feature set"
    return ", ".join(("" if state.get(word) else "not ") + word
                     for word in ("enabled", "locked", "frozen"))


def scsi_sanitize(device: str, runner: Runner) -> tuple[bool, list[str], str]:
    """SCSI SANITIZE, block erase, of the whole drive (``sg_sanitize --block``; it polls
    the drive's progress until the sanitize completes). (ok, the commands run, what
    happened): a drive without SANITIZE answers "invalid opcode" (QEMU's scsi-hd does)."""
    command = ["sg_sanitize", "--block", "--quick", device]
    code, said = _call(runner, command, SANITIZE_TIMEOUT_S)
    last = " ".join(said.split())[:200]
    if code == 0:
        return True, [shlex.join(command)], "SANITIZE (block erase) completed"
    if code == SG_INVALID_OPCODE:
        why = "the drive does not support SANITIZE (invalid opcode)"
    elif code == SG_ILLEGAL_REQUEST:
        why = f"the drive refused SANITIZE block erase (illegal request: {last})"
    elif code is None:
        why = said
    else:
        why = f"sg_sanitize exited {code}: {last}"
    return False, [shlex.join(command)], why
