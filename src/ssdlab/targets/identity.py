"""Identification of targets (block devices and files), of the host, and of fio.

Everything here only reads: sysfs, procfs, ``stat`` and, for NVMe drives, ``nvme id-ctrl``
(an admin *identify* command). Nothing opens a device for writing.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ssdlab.cpuidle import idle_facts
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.errors import EnvironmentProblem, TargetError
from ssdlab.targets.ata_scsi import identify_sd
from ssdlab.targets.nvme import nvme_namespace

#: ``subprocess.run``-compatible callable (tests pass fakes).
Runner = Callable[..., "subprocess.CompletedProcess[str]"]
#: ``shutil.which``-compatible callable.
Which = Callable[[str], "str | None"]

SYSFS = Path("/sys")
PROC = Path("/proc")
ETC = Path("/etc")

#: Kernel name prefixes of devices that are not real drives.
VIRTUAL_PREFIXES = ("loop", "zram", "ram", "nbd", "dm-", "md", "ublkb")
#: Transports of disks provided by a hypervisor or by software.
VIRTUAL_TRANSPORTS = frozenset({"virtio", "xen", "virtual"})
#: Fields of ``nvme id-ctrl -o json`` kept in ``details["nvme_id_ctrl"]``.
NVME_ID_CTRL_FIELDS = (
    "vid", "ssvid", "sn", "mn", "fr", "ieee", "cntlid", "mdts", "ver", "oacs", "lpa", "fna",
    "vwc", "sanicap", "nn", "tnvmcap", "unvmcap", "subnqn",
)  # fmt: skip


@dataclass(frozen=True)
class TargetInfo:
    """What a target is. ``details`` holds everything that is not common to all targets."""

    path: str
    kind: str
    name: str
    device_class: str
    model: str | None
    serial: str | None
    firmware: str | None
    capacity_bytes: int
    logical_sector_bytes: int
    physical_sector_bytes: int
    rotational: bool | None
    numa_node: int | None
    scheduler: str | None
    discard_max_bytes: int | None
    details: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``."""

    major: int
    minor: int
    mount_point: str
    fs_type: str
    source: str
    #: the per-mount options (rw,nosuid,relatime ...) and the file system's own (NFS:
    #: vers=4.2,rsize=...,addr=...); not part of a mount's identity
    options: str = field(default="", compare=False)
    super_options: str = field(default="", compare=False)


# --------------------------------------------------------------------------- sysfs reading


def read_attr(path: Path) -> str | None:
    """The stripped text of a sysfs/procfs attribute, or None when it cannot be read."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_attr(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _clean(text: str | None) -> str | None:
    """Strip padding (SCSI/NVMe strings are space padded); empty -> None."""
    if text is None:
        return None
    cleaned = text.strip().strip("\x00").strip()
    return cleaned or None


def block_dir(name: str, *, sysfs: Path = SYSFS) -> Path:
    return sysfs / "class" / "block" / name


def is_partition(name: str, *, sysfs: Path = SYSFS) -> bool:
    return (block_dir(name, sysfs=sysfs) / "partition").exists()


def whole_disk_of(name: str, *, sysfs: Path = SYSFS) -> str:
    """The disk a partition belongs to (its sysfs parent); a whole disk is its own."""
    if is_partition(name, sysfs=sysfs):
        return block_dir(name, sysfs=sysfs).resolve().parent.name
    return name


def partitions_of(name: str, *, sysfs: Path = SYSFS) -> list[str]:
    """Kernel names of the partitions of a whole disk (sysfs children with a 'partition')."""
    disk_dir = block_dir(name, sysfs=sysfs).resolve()
    try:
        children = sorted(disk_dir.iterdir())
    except OSError:
        return []
    return [child.name for child in children if (child / "partition").exists()]


def list_links(directory: Path) -> list[str]:
    """Entry names of a sysfs directory such as ``holders`` or ``slaves`` ([] if absent)."""
    try:
        return sorted(entry.name for entry in directory.iterdir())
    except OSError:
        return []


def name_for_devnum(major: int, minor: int, *, sysfs: Path = SYSFS) -> str | None:
    """Kernel name of the block device ``major:minor`` (None if there is none)."""
    link = sysfs / "dev" / "block" / f"{major}:{minor}"
    if not link.exists():
        return None
    return link.resolve().name


def kernel_name_of(path: str, *, sysfs: Path = SYSFS) -> str:
    """Kernel name of the block device node ``path`` (symlinks like /dev/disk/by-id followed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TargetError(f"target {path} does not exist") from None
    except OSError as err:
        raise TargetError(f"cannot stat target {path}: {err.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise TargetError(f"target {path} is not a block device")
    name = name_for_devnum(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs=sysfs)
    if name is None:
        raise TargetError(f"target {path} is a block device the kernel does not list in sysfs")
    return name


# --------------------------------------------------------------------------- pure parsing


def parse_selected(text: str) -> str | None:
    """The selected choice of a sysfs list.

    '[mq-deadline] none' -> 'mq-deadline'; 'none' -> 'none'; '' -> None.
    """
    match = re.search(r"\[([^\]]+)\]", text)
    if match:
        return match.group(1)
    words = text.split()
    return words[0] if len(words) == 1 else None


def parse_vpd_serial(page: bytes) -> str | None:
    """The unit serial number of a SCSI VPD page 0x80 (4-byte header, then ASCII)."""
    if len(page) < 4 or page[1] != 0x80:
        return None
    length = int.from_bytes(page[2:4], "big")
    return _clean(page[4 : 4 + length].decode("ascii", errors="replace"))


def transport_from_devpath(devpath: str) -> str | None:
    """The transport a resolved sysfs device path reveals ('/ata' -> 'sata', ...), or None."""
    markers = (
        ("/devices/virtual/", "virtual"),
        ("/virtio", "virtio"),
        ("/vbd-", "xen"),
        ("/nvme", "nvme"),
        ("/usb", "usb"),
        ("/end_device-", "sas"),
        ("/ata", "sata"),
    )
    for marker, transport in markers:
        if marker in devpath:
            return transport
    return None


def classify_device(name: str, *, rotational: bool | None, transport: str | None) -> str:
    """nvme | virtual | hdd | sas_ssd | sata_ssd for the block device ``name``."""
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith(VIRTUAL_PREFIXES) or transport in VIRTUAL_TRANSPORTS:
        return "virtual"
    if rotational:
        return "hdd"
    return "sas_ssd" if transport == "sas" else "sata_ssd"


def read_mountinfo(*, proc: Path = PROC) -> list[MountEntry]:
    """The mounts of this process's mount namespace, in mount order."""
    text = read_attr(proc / "self" / "mountinfo") or ""
    return [entry for line in text.splitlines() if (entry := _parse_mountinfo_line(line))]


def dead_fuse_mounts(mounts: list[MountEntry] | None = None) -> list[str]:
    """The FUSE mount points whose daemon has gone (``stat`` answers "Transport endpoint is
    not connected"): such a mount makes mkfs.btrfs and others refuse every device, since
    they cannot check it. Only FUSE mounts are asked, so a hung NFS server cannot hang this."""
    dead = []
    for entry in read_mountinfo() if mounts is None else mounts:
        if not entry.fs_type.startswith("fuse"):
            continue
        try:
            os.stat(entry.mount_point)
        except OSError as err:
            if err.errno == errno.ENOTCONN:
                dead.append(entry.mount_point)
    return dead


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _parse_mountinfo_line(line: str) -> MountEntry | None:
    left, sep, right = line.partition(" - ")
    fields, tail = left.split(), right.split()
    if not sep or len(fields) < 5 or len(tail) < 2 or ":" not in fields[2]:
        return None
    major, minor = fields[2].split(":", 1)
    return MountEntry(int(major), int(minor), _unescape(fields[4]), tail[0], _unescape(tail[1]),
                      fields[5] if len(fields) > 5 else "", tail[2] if len(tail) > 2 else "")


def mount_containing(path: str, mounts: list[MountEntry]) -> MountEntry | None:
    """The mount holding ``path``: longest mount point prefix, the later mount on a tie."""
    best: MountEntry | None = None
    for entry in mounts:
        point = entry.mount_point
        inside = point == "/" or path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = entry
    return best


# --------------------------------------------------------------------------- block devices


def identify_block(
    path: str, *, sysfs: Path = SYSFS, runner: Runner = subprocess.run, which: Which = shutil.which
) -> TargetInfo:
    """Identify the block device (or partition) at ``path``."""
    absolute = os.path.abspath(path)
    name = kernel_name_of(absolute, sysfs=sysfs)
    return describe_block(name, path=absolute, sysfs=sysfs, runner=runner, which=which)


def describe_block(
    name: str,
    *,
    path: str | None = None,
    sysfs: Path = SYSFS,
    runner: Runner = subprocess.run,
    which: Which = shutil.which,
) -> TargetInfo:
    """Identify the block device with kernel name ``name`` from sysfs alone (plus nvme-cli)."""
    disk = whole_disk_of(name, sysfs=sysfs)
    own, queue = block_dir(name, sysfs=sysfs), block_dir(disk, sysfs=sysfs) / "queue"
    rotational_flag = read_int(queue / "rotational")
    rotational = None if rotational_flag is None else rotational_flag == 1
    transport = _transport(disk, sysfs=sysfs)
    model, serial, firmware, details = _hardware_identity(disk, sysfs=sysfs)
    if disk.startswith("nvme") and which("nvme"):
        model, serial, firmware = _nvme_identify(
            f"/dev/{disk}", runner, details, model, serial, firmware
        )
        details["identity_path"] = "nvme"
        if re.fullmatch(r"nvme\d+n\d+", disk):
            details["nvme_namespace"] = nvme_namespace(disk, runner, sysfs=sysfs)
    elif disk.startswith("sd"):
        model, serial, firmware = _sd_identify(disk, runner, which, details,
                                               (model, serial, firmware), sysfs=sysfs)
    details.update(_kind_details(name, disk, sysfs=sysfs))
    details["transport"] = transport
    logical = read_int(queue / "logical_block_size") or 512
    return TargetInfo(
        path=path or f"/dev/{name}",
        kind="block",
        name=name,
        device_class=classify_device(disk, rotational=rotational, transport=transport),
        model=model,
        serial=serial,
        firmware=firmware,
        capacity_bytes=(read_int(own / "size") or 0) * 512,
        logical_sector_bytes=logical,
        physical_sector_bytes=read_int(queue / "physical_block_size") or logical,
        rotational=rotational,
        numa_node=_numa_node(disk, sysfs=sysfs),
        scheduler=parse_selected(read_attr(queue / "scheduler") or ""),
        discard_max_bytes=read_int(queue / "discard_max_bytes"),
        details=details,
    )


def _transport(disk: str, *, sysfs: Path) -> str | None:
    directory = block_dir(disk, sysfs=sysfs)
    if (directory / "device" / "vpd_pg89").exists():  # ATA information page: a SATA drive
        return "sata"
    return transport_from_devpath(str(directory.resolve()))


def _numa_node(disk: str, *, sysfs: Path) -> int | None:
    device = block_dir(disk, sysfs=sysfs) / "device"
    for candidate in (device / "numa_node", device / "device" / "numa_node"):
        node = read_int(candidate)
        if node is not None:
            return node if node >= 0 else None
    return None


def _hardware_identity(
    disk: str, *, sysfs: Path
) -> tuple[str | None, str | None, str | None, dict[str, object]]:
    """Model, serial, firmware and extra fields (vendor, wwid) from sysfs."""
    own = block_dir(disk, sysfs=sysfs)
    device = own / "device"
    serial = _clean(read_attr(device / "serial")) or _clean(read_attr(own / "serial"))
    if serial is None:
        serial = _vpd_serial(device / "vpd_pg80")
    firmware = _clean(read_attr(device / "firmware_rev")) or _clean(read_attr(device / "rev"))
    details: dict[str, object] = {}
    for key, attr in (("vendor", device / "vendor"), ("wwid", own / "wwid")):
        value = _clean(read_attr(attr))
        if value is None and key == "wwid":
            value = _clean(read_attr(device / "wwid"))
        if value is not None:
            details[key] = value
    return _clean(read_attr(device / "model")), serial, firmware, details


def _vpd_serial(path: Path) -> str | None:
    try:
        return parse_vpd_serial(path.read_bytes())
    except OSError:
        return None


def _nvme_identify(
    device: str,
    runner: Runner,
    details: dict[str, object],
    model: str | None,
    serial: str | None,
    firmware: str | None,
) -> tuple[str | None, str | None, str | None]:
    """Overlay ``nvme id-ctrl`` strings on the sysfs ones; keep a few fields in details."""
    command = ["nvme", "id-ctrl", device, "-o", "json"]
    try:
        result = runner(command, capture_output=True, text=True, check=False, timeout=30)
        data = json.loads(result.stdout) if result.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        details["nvme_id_ctrl_error"] = str(err)
        return model, serial, firmware
    if not isinstance(data, dict):
        details["nvme_id_ctrl_error"] = (result.stderr or "").strip() or "no output"
        return model, serial, firmware
    kept = {key: _clean(v) if isinstance(v, str) else v for key, v in data.items()}
    details["nvme_id_ctrl"] = {key: kept[key] for key in NVME_ID_CTRL_FIELDS if key in kept}
    return (
        _str_or(kept.get("mn"), model),
        _str_or(kept.get("sn"), serial),
        _str_or(kept.get("fr"), firmware),
    )


def _sd_identify(
    disk: str, runner: Runner, which: Which, details: dict[str, object],
    strings: tuple[str | None, str | None, str | None], *, sysfs: Path,
) -> tuple[str | None, str | None, str | None]:
    """Overlay what a SATA or SCSI disk says of itself (``hdparm -I`` or ``sg_inq``,
    targets/ata_scsi.py) on the sysfs strings; the reading in ``details["identify"]``,
    its command set (ata, scsi) in ``details["identity_path"]``."""
    found = identify_sd(disk, f"/dev/{disk}", sysfs=sysfs, which=which,
                        run=lambda command: runner(command, capture_output=True, text=True,
                                                   errors="replace", check=False, timeout=60))
    model, serial, firmware = strings
    if not found:
        return strings
    details["identify"] = found
    details["identity_path"] = found["path"] if "error" not in found else "sysfs"
    return (_str_or(found.get("model"), model), _str_or(found.get("serial"), serial),
            _str_or(found.get("firmware"), firmware))


def _str_or(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) and value else default


def _kind_details(name: str, disk: str, *, sysfs: Path) -> dict[str, object]:
    """Partition, loop, zram, dm and md specific fields."""
    details: dict[str, object] = {}
    own, whole = block_dir(name, sysfs=sysfs), block_dir(disk, sysfs=sysfs)
    if name != disk:
        details["partition_of"] = disk
        details["partition_number"] = read_int(own / "partition")
        details["partition_start_bytes"] = (read_int(own / "start") or 0) * 512
    if (whole / "loop").is_dir():
        details["backing_file"] = read_attr(whole / "loop" / "backing_file")
        details["dio"] = read_attr(whole / "loop" / "dio") == "1"
        details["loop_offset_bytes"] = read_int(whole / "loop" / "offset")
    if disk.startswith("zram"):
        details["comp_algorithm"] = parse_selected(read_attr(whole / "comp_algorithm") or "")
        details["disksize"] = read_int(whole / "disksize")
    if (whole / "dm").is_dir():
        details["dm_name"] = read_attr(whole / "dm" / "name")
        details["dm_uuid"] = read_attr(whole / "dm" / "uuid")
    if (whole / "md").is_dir():
        details["md_level"] = read_attr(whole / "md" / "level")
    if (removable := read_int(whole / "removable")) is not None:
        details["removable"] = removable == 1
    if (read_only := read_int(own / "ro")) is not None:
        details["read_only"] = read_only == 1
    return details


# --------------------------------------------------------------------------- files


def identify_file(path: str, *, sysfs: Path = SYSFS, proc: Path = PROC) -> TargetInfo:
    """Identify an existing regular file used as a target."""
    absolute = os.path.abspath(path)
    try:
        st = os.stat(absolute)
    except FileNotFoundError:
        raise TargetError(f"target {absolute} does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise TargetError(f"target {absolute} is not a regular file")
    mount = mount_containing(os.path.realpath(absolute), read_mountinfo(proc=proc))
    device = _file_device(st.st_dev, mount, sysfs=sysfs)
    queue = block_dir(whole_disk_of(device, sysfs=sysfs), sysfs=sysfs) / "queue" if device else None
    logical = (read_int(queue / "logical_block_size") if queue else None) or 512
    rotational_flag = read_int(queue / "rotational") if queue else None
    details: dict[str, object] = {
        "fs_type": mount.fs_type if mount else None,
        "mount_point": mount.mount_point if mount else None,
        "fs_source": mount.source if mount else None,
        "fs_device": device,
        "st_dev": f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}",
    }
    return TargetInfo(
        path=absolute,
        kind="file",
        name=os.path.basename(absolute),
        device_class="file",
        model=None,
        serial=None,
        firmware=None,
        capacity_bytes=st.st_size,
        logical_sector_bytes=logical,
        physical_sector_bytes=(read_int(queue / "physical_block_size") if queue else None)
        or logical,
        rotational=None if rotational_flag is None else rotational_flag == 1,
        numa_node=None,
        scheduler=None,
        discard_max_bytes=None,
        details=details,
    )


def _file_device(st_dev: int, mount: MountEntry | None, *, sysfs: Path) -> str | None:
    """Kernel name of the block device a file lives on (None for tmpfs, NFS...)."""
    name = name_for_devnum(os.major(st_dev), os.minor(st_dev), sysfs=sysfs)
    if name is None and mount is not None and mount.source.startswith("/dev/"):
        try:  # btrfs and friends report an anonymous st_dev; the mount source is the device
            name = kernel_name_of(mount.source, sysfs=sysfs)
        except TargetError:
            return None
    return name


# --------------------------------------------------------------------------- host


def host_info(*, sysfs: Path = SYSFS, proc: Path = PROC, etc: Path = ETC) -> dict[str, object]:
    """The machine a run happens on, with how its idle CPUs behave while fio runs
    (``$SSDLAB_CPU_IDLE``, cpuidle.py)."""
    cpuinfo = read_attr(proc / "cpuinfo") or ""
    meminfo = read_attr(proc / "meminfo") or ""
    memory = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo, re.MULTILINE)
    return {
        "cpu_model": _cpu_model(cpuinfo),
        "cpu_count": os.cpu_count(),
        "cpu_sockets": _cpu_sockets(cpuinfo, sysfs=sysfs),
        "numa_nodes": _numa_nodes(sysfs=sysfs),
        "memory_bytes": int(memory.group(1)) * 1024 if memory else None,
        "kernel": os.uname().release,
        "os": _os_pretty_name(etc),
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "cpu_idle": idle_facts(idle_policy_env(), sysfs_cpu=sysfs / "devices" / "system" / "cpu"),
    }


def _cpu_model(cpuinfo: str) -> str | None:
    for key in ("model name", "Hardware", "cpu model", "Processor"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or None


def _cpu_sockets(cpuinfo: str, *, sysfs: Path) -> int | None:
    cpus = sysfs / "devices" / "system" / "cpu"
    packages = {read_attr(p) for p in cpus.glob("cpu[0-9]*/topology/physical_package_id")}
    packages.discard(None)
    if not packages:
        packages = set(re.findall(r"^physical id\s*:\s*(\d+)", cpuinfo, re.MULTILINE))
    return len(packages) or None


def _numa_nodes(*, sysfs: Path) -> list[dict[str, object]]:
    node_dirs = (sysfs / "devices" / "system" / "node").glob("node[0-9]*")
    numbered = sorted((int(node_dir.name[4:]), node_dir) for node_dir in node_dirs)
    return [{"node": num, "cpulist": read_attr(node_dir / "cpulist")} for num, node_dir in numbered]


def _os_pretty_name(etc: Path) -> str | None:
    for candidate in (etc / "os-release", Path("/usr/lib/os-release")):
        text = read_attr(candidate)
        if text is None:
            continue
        match = re.search(r"^PRETTY_NAME=(.*)$", text, re.MULTILINE)
        return match.group(1).strip().strip("\"'") if match else None
    return None


# --------------------------------------------------------------------------- fio


def fio_version(
    fio: str = "fio", *, runner: Runner = subprocess.run, which: Which = shutil.which
) -> str:
    """The version of fio, e.g. '3.33' (from ``fio --version`` printing 'fio-3.33')."""
    executable = which(fio)
    if executable is None:
        if fio == "fio":
            raise EnvironmentProblem(
                "fio is not installed; install it (apt-get install fio) or pass --fio PATH"
            )
        raise EnvironmentProblem(
            f"fio not found at {fio}; install fio or pass a working --fio PATH"
        )
    try:
        result = runner(
            [executable, "--version"], capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise EnvironmentProblem(f"cannot run {executable} --version: {err}") from None
    match = re.search(r"fio-(\d+\.\d+(?:\.\d+)?)", result.stdout or "")
    if result.returncode != 0 or match is None:
        shown = ((result.stdout or "") + (result.stderr or "")).strip()[:80]
        raise EnvironmentProblem(
            f"cannot tell the fio version: {executable} --version printed {shown!r}"
        )
    return match.group(1)


def check_fio_version(version: str, minimum: tuple[int, int] = (3, 1)) -> None:
    """Refuse a fio older than ``minimum`` (fio 3.1 introduced clat_ns in the JSON output)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise EnvironmentProblem(f"cannot parse the fio version {version!r}")
    if (int(match.group(1)), int(match.group(2))) < minimum:
        needed = f"{minimum[0]}.{minimum[1]}"
        raise EnvironmentProblem(
            f"fio {version} is too old; ssdlab needs fio >= {needed} (clat_ns output)"
        )
