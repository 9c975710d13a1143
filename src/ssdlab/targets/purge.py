"""Purge: return a block device to a fresh-out-of-box-like state before a test.

A purge that fails is not an exception: :func:`purge_block` returns a :class:`PurgeOutcome`
with ``ok=False`` and the reason, and the caller records it and decides. Exceptions are
reserved for problems found before anything runs (missing tool, method not applicable).

The safety checks (:mod:`ssdlab.targets.safety`) are the caller's job and must have passed.

Each outcome names its ``path``, the command family that reached the drive (``ata``,
``scsi``, ``nvme``; None for other devices). ``auto`` erases a whole SATA or SCSI disk,
where the active range is the whole disk, with the strongest erase the drive supports
(SCSI SANITIZE; ATA SECURITY ERASE UNIT only on a libata port) and falls back to
``blkdiscard`` where the drive lacks it or refuses it, naming the fallback
(``fallback_from``) and why; a named method never falls back: it fails and says which
fallback there is.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ssdlab.errors import EnvironmentProblem, TargetError, UserError
from ssdlab.targets.ata_scsi import (
    BUS_WORDS,
    ERASE_PASSWORD,
    ata_secure_erase,
    discard_command_name,
    scsi_sanitize,
)
from ssdlab.targets.identity import SYSFS, Runner, TargetInfo, Which
from ssdlab.targets.nvme import nvme_controller_of, nvme_namespaces_of

#: the methods; the same tuple as plan/specs.PURGE_METHODS (the CLI's choices), which
#: targets/ may not import: tests/unit/test_purge_checks.py holds them equal
PURGE_METHODS = ("auto", "blkdiscard", "nvme-format", "nvme-sanitize", "ata-secure-erase",
                 "scsi-sanitize", "none")
#: the active range's alignment (plan/specs.RANGE_ALIGN): a range within this of the
#: capacity, from 0, is the whole disk
WHOLE_SLACK = 1024 * 1024
#: whole-drive erases of SATA and SCSI disks: method -> (command set, tool, package)
SD_ERASES = {"ata-secure-erase": ("ata", "hdparm", "hdparm"),
             "scsi-sanitize": ("scsi", "sg_sanitize", "sg3-utils")}

#: How often and for how long the sanitize log is polled after ``nvme sanitize``.
SANITIZE_POLL_SECONDS = 5.0
SANITIZE_TIMEOUT_SECONDS = 24 * 3600.0
#: Sanitize status codes (SSTAT bits 2:0) of the NVMe sanitize status log page.
SANITIZE_DONE = frozenset({1, 4})  # completed (4: completed without deallocation)
SANITIZE_IN_PROGRESS = 2
SANITIZE_FAILED = 3


@dataclass(frozen=True)
class PurgeOutcome:
    """What a purge did."""

    method: str
    ok: bool
    seconds: float
    command: tuple[str, ...] | None
    detail: str
    #: the command family that reached the drive: ata, scsi, nvme (None: another device)
    path: str | None = None
    #: the method ``auto`` tried first, where it fell back from it to this one
    fallback_from: str | None = None


def purge_block(
    info: TargetInfo,
    method: str,
    offset_bytes: int,
    length_bytes: int,
    *,
    runner: Runner = subprocess.run,
    which: Which = shutil.which,
    sysfs: Path = SYSFS,
    sleep: Callable[[float], None] = time.sleep,
) -> PurgeOutcome:
    """Purge ``length_bytes`` from ``offset_bytes`` of a block target with ``method``.

    ``auto`` is the strongest erase a whole SATA or SCSI disk supports where the range is
    the whole disk (:func:`strongest_erase`), with blkdiscard as its fallback, and
    blkdiscard elsewhere; nvme-format and nvme-sanitize always erase
    the whole namespace (format) or every namespace of the controller (sanitize),
    ata-secure-erase and scsi-sanitize the whole disk.
    """
    if method not in PURGE_METHODS:
        raise UserError(
            f"unknown purge method {method!r}; choose one of {', '.join(PURGE_METHODS)}"
        )
    if info.kind != "block":
        raise ValueError(f"purge_block needs a block target, got a {info.kind}")
    if offset_bytes < 0 or length_bytes < 0:
        raise ValueError("purge offset and length must not be negative")
    if method == "none":
        return PurgeOutcome("none", True, 0.0, None, "no purge requested")
    if method == "auto":
        _require_tool(which, "blkdiscard", "util-linux")
        whole = offset_bytes == 0 and length_bytes > info.capacity_bytes - WHOLE_SLACK
        return _auto(info, offset_bytes, length_bytes, runner, which, sysfs, whole)
    if method == "blkdiscard":
        _require_tool(which, "blkdiscard", "util-linux")
        return _blkdiscard(info, offset_bytes, length_bytes, runner, sysfs)
    if method in SD_ERASES:
        return _sd_erase(info, method, runner, which)
    _require_tool(which, "nvme", "nvme-cli")
    check_nvme_purge(info, method, sysfs=sysfs)
    if method == "nvme-format":
        return _nvme_format(info, runner)
    return _nvme_sanitize(info, runner, sysfs=sysfs, sleep=sleep)


def _require_tool(which: Which, tool: str, package: str) -> None:
    if which(tool) is None:
        raise EnvironmentProblem(f"{tool} is not installed; install it (apt-get install {package})")


#: what to purge with instead of a sanitize the controller does not do
SANITIZE_FALLBACK = "purge with --purge nvme-format (Format NVM) or --purge blkdiscard"
#: Identify Controller FNA bits 0 and 1: a format, or its secure erase, applies to all
#: namespaces of the controller
FNA_ALL_NAMESPACES = 0x3


def check_nvme_purge(info: TargetInfo, method: str, *, sysfs: Path = SYSFS) -> None:
    """Refuse (TargetError, one line, before any command) an NVMe purge that cannot work
    or would reach beyond the target: not an NVMe namespace, a partition, a sanitize the
    controller does not support (Identify Controller SANICAP 0, as QEMU's), and a sanitize
    or a Format NVM that erases other namespaces of the controller too (sanitize always;
    a format where FNA bit 0 or 1 says so). Other methods pass."""
    if not method.startswith("nvme"):
        return
    if info.device_class != "nvme":
        raise TargetError(
            f"--purge {method} needs an NVMe drive; {info.path} is {info.device_class}"
        )
    if "partition_of" in info.details:
        raise TargetError(
            f"refusing --purge {method} on {info.path}: it is a partition and {method} erases "
            f"all of /dev/{info.details['partition_of']}; use blkdiscard or the whole namespace"
        )
    ctrl = info.details.get("nvme_id_ctrl")
    ctrl = ctrl if isinstance(ctrl, dict) else {}
    if method == "nvme-sanitize" and ctrl.get("sanicap") == 0:
        raise TargetError(
            f"refusing --purge nvme-sanitize on {info.path}: its controller does not support "
            "sanitize (Identify Controller SANICAP is 0); nothing was sent. "
            f"{SANITIZE_FALLBACK[0].upper()}{SANITIZE_FALLBACK[1:]}")
    fna = ctrl.get("fna")
    whole = method == "nvme-sanitize" or (isinstance(fna, int) and fna & FNA_ALL_NAMESPACES)
    if not whole:
        return
    controller = nvme_controller_of(info.name, sysfs=sysfs)
    if controller is None:
        raise TargetError(f"cannot find the NVMe controller of {info.path} in sysfs")
    namespaces = nvme_namespaces_of(controller, sysfs=sysfs)
    if len(namespaces) > 1:
        how = "a sanitize" if method == "nvme-sanitize" else \
            f"a Format NVM on this controller (FNA {fna:#x})"
        raise TargetError(
            f"refusing --purge {method} on {info.path}: {how} erases every namespace of "
            f"{controller} ({', '.join(namespaces)}); use "
            f"{'blkdiscard' if method == 'nvme-format' else 'nvme-format or blkdiscard'}")


def _run(command: tuple[str, ...], runner: Runner) -> tuple[bool, str]:
    """Run a command; (succeeded, stderr or the reason it could not run)."""
    try:
        result = runner(list(command), capture_output=True, text=True, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"could not run {command[0]}: {err}"
    message = (result.stderr or "").strip() or (result.stdout or "").strip()
    if result.returncode != 0:
        return False, message or f"{command[0]} exited with status {result.returncode}"
    return True, message


# --------------------------------------------------------------------------- blkdiscard


def blkdiscard_command(device: str, offset_bytes: int, length_bytes: int) -> tuple[str, ...]:
    """``--force``: blkdiscard would otherwise open with O_EXCL, which ssdlab's own
    :class:`~ssdlab.targets.safety.ExclusiveHold` already holds; ssdlab did the checks."""
    return (
        "blkdiscard", "--force",
        "--offset", str(offset_bytes), "--length", str(length_bytes),
        device,
    )  # fmt: skip


def _blkdiscard(info: TargetInfo, offset: int, length: int, runner: Runner,
                sysfs: Path = SYSFS) -> PurgeOutcome:
    path = _path_of(info)
    if info.discard_max_bytes == 0:
        return PurgeOutcome(
            "blkdiscard", False, 0.0, None,
            f"{info.path} does not support discard (queue/discard_max_bytes is 0); nothing was run",
            path,
        )  # fmt: skip
    command = blkdiscard_command(info.path, offset, length)
    started = time.monotonic()
    ok, message = _run(command, runner)
    if ok:
        message = f"discarded {length} bytes from offset {offset}"
        sent = discard_command_name(_disk_of(info), path, sysfs=sysfs)
        message += f" ({sent})" if sent else ""
    return PurgeOutcome("blkdiscard", ok, time.monotonic() - started, command, message, path)


# --------------------------------------------------------------------------- SATA and SCSI


def _disk_of(info: TargetInfo) -> str:
    partition_of = info.details.get("partition_of")
    return partition_of if isinstance(partition_of, str) else info.name


def _path_of(info: TargetInfo) -> str | None:
    """The command family of the target's drive, as its identity found it."""
    path = info.details.get("identity_path")
    if isinstance(path, str) and path in ("ata", "scsi", "nvme"):
        return path
    if info.name.startswith("nvme"):
        return "nvme"
    return None


def _bus_of(info: TargetInfo) -> str:
    """How the disk is attached (targets/ata_scsi.sd_bus), ``other`` where not known."""
    identify = info.details.get("identify")
    bus = identify.get("bus") if isinstance(identify, dict) else None
    return bus if isinstance(bus, str) and bus in BUS_WORDS else "other"


def _security_of(info: TargetInfo) -> dict[str, object] | None:
    identify = info.details.get("identify")
    security = identify.get("security") if isinstance(identify, dict) else None
    return security if isinstance(security, dict) else None


def strongest_erase(info: TargetInfo, whole: bool = True) -> tuple[str | None, str]:
    """The whole-drive erase ``auto`` takes on this target (None: blkdiscard), and why.
    ``whole``: the active range is the whole disk; auto erases a whole disk only then, and
    sends ATA security commands only to a disk on a libata port (a USB or UAS bridge or a
    SAS HBA may mishandle them and leave the drive locked)."""
    path = _path_of(info)
    if path not in ("ata", "scsi"):
        return None, ""
    if "partition_of" in info.details:
        return None, (f"{info.path} is a partition: a whole-drive erase would erase all of "
                      f"/dev/{info.details['partition_of']}")
    if not whole:
        return None, ("the active range is not the whole disk: auto erases the whole disk "
                      "only when the whole disk is tested, and trims the range otherwise")
    if path == "scsi":
        return "scsi-sanitize", ""
    bus = _bus_of(info)
    if bus != "ata":
        return None, (f"the disk is attached through {BUS_WORDS[bus]}: auto sends ATA "
                      "security commands only to a disk on a libata port")
    security = _security_of(info)
    if security is None:
        return None, "ssdlab could not read the drive's ATA security state (hdparm -I)"
    if not security.get("supported"):
        return None, "the drive reports no ATA Security feature set (hdparm -I)"
    if security.get("frozen"):
        return None, ("the drive's ATA security is frozen (the firmware froze it at boot; a "
                      "suspend and resume of the machine usually unfreezes it)")
    if security.get("enabled") or security.get("locked"):
        return None, "the drive has a user password set: ssdlab does not know it"
    return "ata-secure-erase", ""


def _auto(info: TargetInfo, offset: int, length: int, runner: Runner, which: Which,
          sysfs: Path, whole: bool) -> PurgeOutcome:
    """The strongest erase the drive supports; blkdiscard where there is none, or where
    the drive refused it (the fallback named, with why)."""
    erase, why = strongest_erase(info, whole)
    if erase is not None and which(SD_ERASES[erase][1]) is None:
        _family, tool, package = SD_ERASES[erase]
        erase, why = None, f"{tool} is not installed (package {package})"
    if erase is None:
        done = _blkdiscard(info, offset, length, runner, sysfs)
        return replace(done, detail=f"{done.detail}; auto chose blkdiscard: {why}"
                       if why else done.detail)
    tried = _sd_erase(info, erase, runner, which)
    if tried.ok:
        return tried
    done = _blkdiscard(info, offset, length, runner, sysfs)
    return replace(done, seconds=tried.seconds + done.seconds, fallback_from=erase,
                   detail=f"{erase} failed: {tried.detail}; fell back to blkdiscard: "
                          f"{done.detail}")


PATH_WORDS = {"ata": "ATA", "scsi": "SCSI", "nvme": "NVMe"}
#: what to do where a secure erase was interrupted (the drive keeps the password)
SECURITY_DISABLE = "hdparm --user-master u --security-disable " + ERASE_PASSWORD + " {device}"


def check_sd_erase(info: TargetInfo, method: str, *, which: Which = shutil.which) -> None:
    """Refuse (one line, before any command) a named whole-disk erase of a SATA or SCSI
    disk that cannot work or is unsafe: a disk of the other command set, or no ``sd*``
    disk at all (NVMe, loop, md, dm: TargetError); a partition (the erase takes the
    whole disk); an ATA secure erase of a disk not on a libata port (a USB or UAS bridge
    or a SAS HBA may mishandle the security commands and leave the drive locked); the
    tool missing (EnvironmentProblem). Other methods pass."""
    if method not in SD_ERASES:
        return
    family, tool, package = SD_ERASES[method]
    path = _path_of(info)
    if path != family:
        what = "an ATA (SATA)" if family == "ata" else "a SCSI"
        raise TargetError(f"--purge {method} needs {what} disk; {info.path} speaks "
                          f"{PATH_WORDS.get(path or '', 'neither ATA nor SCSI')}")
    if "partition_of" in info.details:
        raise TargetError(
            f"refusing --purge {method} on {info.path}: it is a partition and {method} "
            f"erases all of /dev/{info.details['partition_of']}; use blkdiscard or the "
            "whole disk")
    bus = _bus_of(info)
    if family == "ata" and bus != "ata":
        raise TargetError(
            f"refusing --purge ata-secure-erase on {info.path}: it is attached through "
            f"{BUS_WORDS[bus]}, which may mishandle ATA security commands and leave the "
            "drive locked; use --purge blkdiscard")
    _require_tool(which, tool, package)


def security_warning(info: TargetInfo) -> str | None:
    """A one-line warning for a SATA disk whose ATA security says a password is set
    (enabled or locked): perhaps one an interrupted secure erase left; how to remove it."""
    if _path_of(info) != "ata" or "partition_of" in info.details:
        return None
    security = _security_of(info) or {}
    if not (security.get("enabled") or security.get("locked")):
        return None
    state = "locked" if security.get("locked") else "enabled"
    return (f"{info.path}: ATA security is {state} (a user password is set; an "
            f"interrupted secure erase leaves ssdlab's {ERASE_PASSWORD!r}): remove it with "
            f"{SECURITY_DISABLE.format(device=info.path)}")


def _sd_erase(info: TargetInfo, method: str, runner: Runner, which: Which) -> PurgeOutcome:
    """ATA SECURITY ERASE UNIT or SCSI SANITIZE of the whole disk; a failure names the
    fallback (blkdiscard)."""
    family = SD_ERASES[method][0]
    check_sd_erase(info, method, which=which)
    started = time.monotonic()
    if method == "ata-secure-erase":
        security = _security_of(info)
        minutes = security.get("erase_minutes") if security is not None else None
        ok, commands, detail = ata_secure_erase(
            info.path, runner, minutes if isinstance(minutes, int) else None)
    else:
        ok, commands, detail = scsi_sanitize(info.path, runner)
    if not ok:
        detail += "; the fallback is --purge blkdiscard (auto falls back to it)"
    main = commands[min(1, len(commands) - 1)]  # the erase itself, where it ran
    return PurgeOutcome(method, ok, time.monotonic() - started, tuple(shlex.split(main)),
                        f"{detail} [ran: {'; '.join(commands)}]", family)


# --------------------------------------------------------------------------- nvme format


def nvme_format_command(namespace_device: str) -> tuple[str, ...]:
    """User-data erase (SES=1) of the namespace, keeping its current LBA format."""
    return ("nvme", "format", namespace_device, "--ses=1", "--force")


def _nvme_format(info: TargetInfo, runner: Runner) -> PurgeOutcome:
    command = nvme_format_command(info.path)
    started = time.monotonic()
    ok, message = _run(command, runner)
    if ok:
        message = f"formatted the whole namespace with a user data erase; {message}".rstrip("; ")
    return PurgeOutcome("nvme-format", ok, time.monotonic() - started, command, message,
                        "nvme")


# --------------------------------------------------------------------------- nvme sanitize


def nvme_sanitize_command(controller_device: str) -> tuple[str, ...]:
    """Start a block-erase sanitize (SANACT=2) on the controller."""
    return ("nvme", "sanitize", controller_device, "-a", "2")


def nvme_sanitize_log_command(controller_device: str) -> tuple[str, ...]:
    return ("nvme", "sanitize-log", controller_device, "-o", "json")


def parse_sanitize_status(text: str) -> int | None:
    """The sanitize status code (SSTAT bits 2:0) from ``nvme sanitize-log -o json``.

    nvme-cli 1.x prints ``"sstat": 257``; 2.x prints ``"sstat": {"status": "(1) ..."}``.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return None
    sstat = _find_key(data, "sstat")
    if isinstance(sstat, int):
        return sstat & 0x7
    if isinstance(sstat, dict):
        for value in sstat.values():
            match = re.match(r"\((\d+)\)", value) if isinstance(value, str) else None
            if match:
                return int(match.group(1))
    return None


def _find_key(data: object, key: str) -> object:
    if isinstance(data, dict):
        if key in data:
            return data[key]
        for value in data.values():
            found = _find_key(value, key)
            if found is not None:
                return found
    return None


def _nvme_sanitize(
    info: TargetInfo, runner: Runner, *, sysfs: Path, sleep: Callable[[float], None]
) -> PurgeOutcome:
    controller = nvme_controller_of(info.name, sysfs=sysfs)
    if controller is None:
        raise TargetError(f"cannot find the NVMe controller of {info.path} in sysfs")
    command = nvme_sanitize_command(f"/dev/{controller}")
    started = time.monotonic()
    ok, message = _run(command, runner)
    if ok:
        ok, message = _wait_for_sanitize(f"/dev/{controller}", runner, sleep)
    if not ok:  # e.g. "Invalid Command Opcode" from a controller without sanitize
        message = f"{message}; {SANITIZE_FALLBACK}"
    return PurgeOutcome("nvme-sanitize", ok, time.monotonic() - started, command, message,
                        "nvme")


def _wait_for_sanitize(
    controller_device: str, runner: Runner, sleep: Callable[[float], None]
) -> tuple[bool, str]:
    """Poll the sanitize log until the sanitize completes, fails or times out."""
    command = nvme_sanitize_log_command(controller_device)
    for _ in range(max(1, int(SANITIZE_TIMEOUT_SECONDS / SANITIZE_POLL_SECONDS))):
        try:
            result = runner(list(command), capture_output=True, text=True, check=False)
        except (OSError, subprocess.SubprocessError) as err:
            return False, f"could not read the sanitize log: {err}"
        status = parse_sanitize_status(result.stdout or "")
        if status in SANITIZE_DONE:
            return True, f"sanitize (block erase) completed, status {status}"
        if status == SANITIZE_FAILED:
            return False, "the drive reports that the sanitize failed (sanitize status 3)"
        sleep(SANITIZE_POLL_SECONDS)
    return False, f"sanitize still not complete after {SANITIZE_TIMEOUT_SECONDS:.0f} s"
