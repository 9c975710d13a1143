"""The VM lab's driver: Debian 12 guests under QEMU with NVMe, SATA and SCSI drives.

A guest boots the cached image (tests/support/vmimage.py) under QEMU's software emulation
(``-accel tcg,thread=multi``: nested KVM hangs on these machines), with one emulated NVMe
controller per drive, each drive one namespace backed by a scratch file, a loop device or
an ssdlab emulated SSD's disk (``cache=none,aio=native,discard=unmap``: the guest's I/O,
trims included, reaches the backing store 1:1). A drive may sit on QEMU's AHCI controller
(an ATA disk) or on a virtio-scsi HBA instead (``Drive.scratch(size, "sata")``); the
guest finds those by serial (:meth:`Guest.device`). The checkout's ssdlab is copied into the
image's venv at start, so ``ssdlab`` in the guest is the code under test::

    with VmLab() as lab, lab.guest([Drive.scratch(GiB)] * 4) as guest:
        guest.run("nvme list")                  # a shell command in the guest, checked
        guest.ssh("mdadm --detail /dev/md0")    # the CompletedProcess, not checked
        guest.copy_in(local_path, "/tmp/x")

Everything lives in the lab's directory ``/dev/shm/ssdlab-vmlab-<pid>-<start>/``
(``$SSDLAB_VMLAB_SCRATCH`` instead of /dev/shm), named by the process that owns it: per
guest its qcow2 overlay over the read-only image, its drives' scratch files, a fresh SSH
key (given to the guest by ``-fw_cfg``, so the image holds no key), the serial console
(``console.log``), the QMP socket and the SSH control socket; emulators a test starts for
the lab run in its ``emus/``. QEMU runs as a child at nice 10 that the kernel kills when
its owner dies (PR_SET_PDEATHSIG), as does the SSH master connection; a guest is stopped
by QMP ``quit``. :func:`clear_dead_labs` (called when a test session starts) removes what
a killed owner left: any process still naming the lab's directory, the loop devices over
its files, its emulators, the directory.

At most :data:`MAX_GUESTS` guests run at once on the machine (a slot is a lock file, freed
when its holder dies): guests are CPU-heavy and the machine has 2 cores.

``python -m tests.support.vmlab shell [N | BUS,...]``: boots a guest with N scratch NVMe
drives (4), or one drive per bus named (``nvme,sata,scsi``), prints
how to reach it, and stops it at Enter or Ctrl-C (docs/vmlab.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ssdlab.children import die_with_parent
from tests.support.leftovers import loops_over
from tests.support.vmimage import Image, VmLabError, ensure_image, host_problem, remove_tree

GiB = 1 << 30
SCRATCH_ROOT = Path(os.environ.get("SSDLAB_VMLAB_SCRATCH", "/dev/shm"))
LAB_PREFIX = "ssdlab-vmlab-"
SLOT_LOCKS = Path("/run/lock")
MAX_GUESTS = 2
SLOT_TIMEOUT_S = 1800.0
#: from QEMU's start to the first SSH login: 12 s on an idle machine, 20-35 s on a busy
#: one; the margin is for a machine loaded by a parallel ``make test``
SSH_TIMEOUT_S = 300.0
COMMAND_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 20.0
CHECKOUT_PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ssdlab"
GUEST_VENV = "/opt/ssdlab"
CONSOLE_TAIL_LINES = 25
#: sha256 over the relative paths and contents of a package's files (not __pycache__);
#: run by python3 on the host and in the guest alike (argv[1]: the package directory)
TREE_DIGEST = """
import hashlib, os, sys
top = sys.argv[1]; digest = hashlib.sha256(); paths = []
for here, dirs, files in os.walk(top):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    paths += [os.path.relpath(os.path.join(here, name), top) for name in files]
for path in sorted(paths):
    digest.update(path.encode() + b"\\0")
    digest.update(open(os.path.join(top, path), "rb").read())
print(digest.hexdigest())
"""


#: the buses a guest drive can sit on: an NVMe controller of its own (one namespace), a
#: port of QEMU's AHCI controller (an ATA disk), or a target of a virtio-scsi HBA
BUSES = ("nvme", "sata", "scsi")
#: ports of QEMU's AHCI controller, targets given to SCSI disks
AHCI_PORTS = 6
SCSI_TARGETS = 255


@dataclass(frozen=True)
class Drive:
    """What backs one guest drive: ``path`` (a file, a loop device, an emulated SSD's
    disk), or a scratch file of ``size_bytes`` in the guest's directory; on ``bus``
    (:data:`BUSES`): ``nvme`` (the default), ``sata`` (``ide-hd`` on an AHCI port) or
    ``scsi`` (``scsi-hd`` on virtio-scsi). ``model``: the SATA disk's model string.
    An NVMe drive is a controller of its own: its namespace 1 is what backs the drive,
    namespaces 2 .. ``namespaces`` are scratch files of ``size_bytes`` each (the guest's
    ``/dev/nvme<i>n<nsid>``)."""

    path: str | None = None
    size_bytes: int = GiB
    bus: str = "nvme"
    model: str = "VMLAB-SATA"
    namespaces: int = 1

    def __post_init__(self) -> None:
        if self.bus not in BUSES:
            raise ValueError(f"Drive bus {self.bus!r}: one of {', '.join(BUSES)}")
        if self.namespaces < 1 or (self.namespaces > 1 and self.bus != "nvme"):
            raise ValueError(f"Drive namespaces {self.namespaces}: 1, or more on nvme")

    @classmethod
    def scratch(cls, size_bytes: int = GiB, bus: str = "nvme", *,
                namespaces: int = 1) -> Drive:
        return cls(None, size_bytes, bus, namespaces=namespaces)

    @classmethod
    def backed_by(cls, path: str | os.PathLike[str], bus: str = "nvme") -> Drive:
        return cls(os.fspath(path), 0, bus)


def drive_serials(drives: Sequence[Drive]) -> list[str]:
    """Each drive's serial: ``VMLAB<i>`` for the i-th NVMe drive (its controller is
    ``/dev/nvme<i>``, its namespace ``/dev/nvme<i>n1``), ``VMLABSATA<i>`` and
    ``VMLABSCSI<i>`` for the i-th drive of those buses (their ``/dev/sdX`` names follow
    the order the kernel probes the controllers in: find them by serial)."""
    counts = dict.fromkeys(BUSES, 0)
    serials = []
    for drive in drives:
        prefix = "VMLAB" if drive.bus == "nvme" else f"VMLAB{drive.bus.upper()}"
        serials.append(f"{prefix}{counts[drive.bus]}")
        counts[drive.bus] += 1
    if counts["sata"] > AHCI_PORTS or counts["scsi"] > SCSI_TARGETS:
        raise ValueError(f"at most {AHCI_PORTS} SATA and {SCSI_TARGETS} SCSI drives a guest")
    return serials


def drive_node(index: int, nsid: int = 1) -> str:
    """The ``-drive`` id of drive ``index``'s namespace ``nsid``: ids must not look like
    QEMU's own (sd0 is taken): nd0, nd1, ... (nd0n2 for a second namespace)."""
    return f"nd{index}" if nsid == 1 else f"nd{index}n{nsid}"


def drive_devices(index: int, drive: Drive, serial: str) -> list[str]:
    """QEMU's arguments for drive ``index`` (its ``-drive`` is ``nd<index>``): an NVMe
    controller and namespace, a disk on an AHCI port or one on the virtio-scsi HBA (the
    controllers themselves: :func:`controller_devices`)."""
    if drive.bus == "nvme":
        number = int(serial.removeprefix("VMLAB"))
        return ["-device", f"nvme,serial={serial},id=nvme{number}",
                *(arg for nsid in range(1, drive.namespaces + 1)
                  for arg in ("-device", f"nvme-ns,drive={drive_node(index, nsid)},"
                              f"bus=nvme{number},nsid={nsid}"))]
    number = int(serial.removeprefix(f"VMLAB{drive.bus.upper()}"))
    # rotation_rate=1: a non-rotating medium, an SSD (QEMU's default says nothing, and the
    # guest's kernel then takes the disk for a rotating one)
    if drive.bus == "sata":
        return ["-device", f"ide-hd,drive=nd{index},bus=ahci0.{number},model={drive.model},"
                f"serial={serial},rotation_rate=1"]
    return ["-device", f"scsi-hd,drive=nd{index},bus=scsi0.0,channel=0,scsi-id={number},"
            f"lun=0,serial={serial},rotation_rate=1"]


def controller_devices(drives: Sequence[Drive]) -> list[str]:
    """The AHCI controller and the virtio-scsi HBA, where a drive sits on them (after
    the NVMe controllers: the guest numbers those as before)."""
    buses = {drive.bus for drive in drives}
    argv = []
    if "sata" in buses:
        argv += ["-device", "ahci,id=ahci0"]
    if "scsi" in buses:
        argv += ["-device", "virtio-scsi-pci,id=scsi0"]
    return argv


# --- processes ------------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _child_setup() -> None:
    """In QEMU and the SSH master, before exec: nice 10, and killed with their owner."""
    os.nice(10)
    die_with_parent()


def processes_naming(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (this one excepted)."""
    found = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def _signal_and_wait(pids: Sequence[int], sig: int, timeout: float) -> list[int]:
    """Send ``sig`` to ``pids``; the ones still alive after ``timeout``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _start_time(pid) is not None
                 and _state(pid) != "Z"]
    return alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


# --- leftovers of killed owners ---------------------------------------------------------------


def _owner_alive(lab_dir: Path) -> bool:
    """Whether the process that made ``lab_dir`` (``ssdlab-vmlab-<pid>-<start>``) lives."""
    try:
        pid, start = lab_dir.name.removeprefix(LAB_PREFIX).split("-")
    except ValueError:
        return True  # not a name of ours: leave it
    return _start_time(int(pid)) == start


def dispose_lab_dir(lab_dir: Path) -> None:
    """End everything of a lab directory: QEMU and SSH processes naming it (SIGKILL: the
    guests' disks are all scratch), the loop devices over its files, the emulators mounted
    in it (SIGTERM: they unmount themselves; SIGKILL after 10 s), then the directory."""
    path = str(lab_dir)
    daemons: list[int] = []
    others: list[int] = []
    for pid in processes_naming(path + "/"):
        (daemons if _exe_name(pid) == "ssdlab-emu" else others).append(pid)
    _signal_and_wait(others, signal.SIGKILL, 10.0)
    for name in loops_over(path):
        subprocess.run(["losetup", "-d", f"/dev/{name}"], capture_output=True, check=False)
    if _signal_and_wait(daemons, signal.SIGTERM, 10.0):
        _signal_and_wait(daemons, signal.SIGKILL, 5.0)
    remove_tree(lab_dir)


def clear_dead_labs() -> list[Path]:
    """Remove the lab directories (and their guests, emulators, loop devices) of owners
    that died without cleaning up; the directories removed. Live labs are not touched."""
    cleared = []
    for lab_dir in sorted(SCRATCH_ROOT.glob(f"{LAB_PREFIX}*")):
        if lab_dir.is_dir() and not _owner_alive(lab_dir):
            dispose_lab_dir(lab_dir)
            cleared.append(lab_dir)
    return cleared


# --- QMP ------------------------------------------------------------------------------------


class Qmp:
    """A QMP connection (QEMU's JSON control socket)."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rw")
        self.file.readline()  # the greeting
        self.execute("qmp_capabilities")

    def execute(self, command: str, **arguments: Any) -> Any:
        """Run one command; its ``return`` (events in between are skipped)."""
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        self.file.write(json.dumps(request) + "\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            if not line:
                raise VmLabError(f"QEMU closed its QMP socket during {command}")
            reply = json.loads(line)
            if "error" in reply:
                raise VmLabError(f"QMP {command}: {reply['error'].get('desc', reply)}")
            if "return" in reply:
                return reply["return"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
            self.sock.close()


# --- guests ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = CONSOLE_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} is missing)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


@contextlib.contextmanager
def _guest_slot(say: Callable[[str], None]) -> Iterator[None]:
    """One of the machine's :data:`MAX_GUESTS` guest slots, held until the block ends."""
    deadline = time.monotonic() + SLOT_TIMEOUT_S
    said = False
    while True:
        for slot in range(MAX_GUESTS):
            fd = os.open(SLOT_LOCKS / f"ssdlab-vmlab-slot{slot}.lock", os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield
                return
            finally:
                os.close(fd)
        if time.monotonic() > deadline:
            raise VmLabError(f"no guest slot came free in {SLOT_TIMEOUT_S:g} s: "
                             f"{MAX_GUESTS} guests run on this machine already")
        if not said:
            say(f"vmlab: {MAX_GUESTS} guests run already; waiting for one to end")
            said = True
        time.sleep(1.0)


class Guest:
    """A running guest; use as a context manager, or call :meth:`stop`."""

    def __init__(self, lab: VmLab, name: str, drives: Sequence[Drive], memory: str,
                 cpus: int) -> None:
        self.lab = lab
        self.name = name
        self.dir = lab.dir / name
        self.drives = list(drives)
        self.serials = drive_serials(self.drives)
        self.memory = memory
        self.cpus = cpus
        self.port = 0
        self.qemu: subprocess.Popen[bytes] | None = None
        self.master: subprocess.Popen[bytes] | None = None
        self.boot_seconds = 0.0
        self._slot: contextlib.ExitStack | None = None

    # paths
    @property
    def console(self) -> Path:
        return self.dir / "console.log"

    @property
    def key(self) -> Path:
        return self.dir / "id_ed25519"

    def drive_path(self, index: int, nsid: int = 1) -> str:
        """What backs namespace ``nsid`` of drive ``index``."""
        drive = self.drives[index]
        if nsid > 1:
            return str(self.dir / f"{drive.bus}{index}n{nsid}.img")
        return drive.path or str(self.dir / f"{drive.bus}{index}.img")

    def device(self, index: int) -> str:
        """The guest's device of drive ``index``: ``/dev/nvme<i>n1`` for the i-th NVMe
        drive; a SATA or SCSI drive's ``/dev/sdX``, found by its serial (its name depends
        on the order the kernel probed the controllers in)."""
        drive, serial = self.drives[index], self.serials[index]
        if drive.bus == "nvme":
            return f"/dev/nvme{serial.removeprefix('VMLAB')}n1"
        listed = self.run("udevadm settle; lsblk -dn -o NAME,SERIAL")
        names = [line.split()[0] for line in listed.splitlines()
                 if line.split()[1:] == [serial]]
        if len(names) != 1:
            raise VmLabError(f"guest {self.name}: no one disk has serial {serial}: {listed}")
        return f"/dev/{names[0]}"

    def _scratch_files(self) -> Iterator[tuple[str, int]]:
        """(path, size) of each scratch file the drives need."""
        for index, drive in enumerate(self.drives):
            for nsid in range(1, drive.namespaces + 1):
                if nsid > 1 or drive.path is None:
                    yield self.drive_path(index, nsid), drive.size_bytes

    def _qemu_argv(self, image: Image) -> list[str]:
        # net.ifnames=0: the NIC keeps the kernel's name. Without it udev renamed eth0 while
        # the init was configuring it (slow under load: "Cannot find device eth0", sshd up
        # with no address, the guest never answered SSH)
        append = ("root=LABEL=vmroot rw console=ttyS0 quiet loglevel=4 panic=-1 "
                  "mitigations=off net.ifnames=0 init=/sbin/vmlab-init")
        argv = [
            "qemu-system-x86_64", "-name", self.name, "-machine", "q35",
            "-accel", "tcg,thread=multi,tb-size=256", "-cpu", "max",
            "-smp", str(self.cpus), "-m", self.memory,
            "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", append,
            "-drive", f"file={self.dir / 'root.qcow2'},if=virtio,format=qcow2,cache=unsafe",
            "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:22",
            "-device", "virtio-net-pci,netdev=n0",
            "-fw_cfg", f"name=opt/ssdlab/authorized_keys,file={self.key}.pub",
            "-display", "none", "-serial", f"file:{self.console}", "-monitor", "none",
            "-qmp", f"unix:{self.dir / 'qmp.sock'},server=on,wait=off",
            "-pidfile", str(self.dir / "qemu.pid"), "-no-reboot",
        ]
        for index, (drive, serial) in enumerate(zip(self.drives, self.serials, strict=True)):
            for nsid in range(1, drive.namespaces + 1):
                argv += ["-drive", f"file={self.drive_path(index, nsid)},if=none,"
                         f"id={drive_node(index, nsid)},"
                         "format=raw,cache=none,aio=native,discard=unmap"]
            if drive.bus == "nvme":
                argv += drive_devices(index, drive, serial)
        argv += controller_devices(self.drives)
        for index, (drive, serial) in enumerate(zip(self.drives, self.serials, strict=True)):
            if drive.bus != "nvme":
                argv += drive_devices(index, drive, serial)
        return argv

    def _ssh_argv(self, *extra: str) -> list[str]:
        return ["ssh", "-i", str(self.key), "-p", str(self.port),
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=15",
                "-o", "ServerAliveInterval=30", "-o", "ServerAliveCountMax=10",
                "-o", f"ControlPath={self.dir / 'ssh.ctl'}", *extra, "root@127.0.0.1"]

    # life cycle
    def start(self, *, wait: bool = True) -> Guest:
        """Start QEMU; with ``wait`` (the default), wait for SSH and copy the checkout's
        ssdlab in. Without it, return as soon as QEMU runs (a test of what a killed owner
        leaves needs a running QEMU, not a booted guest)."""
        problem = host_problem()
        if problem:
            raise VmLabError(problem)
        image = self.lab.image()
        self._slot = contextlib.ExitStack()
        self._slot.enter_context(_guest_slot(self.lab.say))
        try:
            self.dir.mkdir()
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name,
                            "-f", str(self.key)], check=True, capture_output=True)
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image.root),
                            "-F", "raw", str(self.dir / "root.qcow2")], check=True,
                           capture_output=True)
            for path, size in self._scratch_files():
                with open(path, "wb") as scratch:
                    scratch.truncate(size)
            started = time.monotonic()
            self._start_qemu(image)
            if not wait:
                return self
            self._await_ssh(started)
            self.boot_seconds = time.monotonic() - started
            self.lab.say(f"vmlab: guest {self.name} answered SSH {self.boot_seconds:.1f} s "
                         "after QEMU started")
            self._install_ssdlab()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_qemu(self, image: Image) -> None:
        for _attempt in range(5):
            self.port = _free_port()
            log = (self.dir / "qemu.log").open("wb")
            self.qemu = subprocess.Popen(self._qemu_argv(image), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=_child_setup)
            log.close()
            # QEMU fails at once on a bad command line or a taken port; else it runs on
            deadline = time.monotonic() + 3.0
            while self.qemu.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.qemu.poll() is None:
                return
            said = _tail(self.dir / "qemu.log", 5)
            if "host forwarding" not in said:
                raise VmLabError(f"QEMU did not start (exit {self.qemu.returncode}): {said}")
        raise VmLabError(f"QEMU found no free port to forward SSH to: {said}")

    def _await_ssh(self, started: float) -> None:
        deadline = started + SSH_TIMEOUT_S
        while True:
            assert self.qemu is not None
            if self.qemu.poll() is not None:
                raise VmLabError(
                    f"guest {self.name}: QEMU ended (exit {self.qemu.returncode}) before SSH "
                    f"answered: {_tail(self.dir / 'qemu.log', 5)}\nconsole "
                    f"({self.console}):\n{_tail(self.console)}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                probe = subprocess.run([*self._ssh_argv(), "true"], capture_output=True,
                                       timeout=30, check=False)
                if probe.returncode == 0:
                    break
            if time.monotonic() > deadline:
                raise VmLabError(
                    f"guest {self.name} did not answer SSH within {SSH_TIMEOUT_S:g} s; "
                    f"the end of its console ({self.console}):\n{_tail(self.console)}")
            time.sleep(1.0)
        self.master = subprocess.Popen(self._ssh_argv("-M", "-N"), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       preexec_fn=_child_setup)
        while subprocess.run(self._ssh_argv("-O", "check"), capture_output=True,
                             check=False).returncode != 0:
            if self.master.poll() is not None or time.monotonic() > deadline:
                raise VmLabError(f"guest {self.name}: the SSH master connection did not "
                                 "start")
            time.sleep(0.1)

    def _install_ssdlab(self) -> None:
        """The checkout's ssdlab into the image's venv: its package, its metadata (the
        version ``ssdlab --version`` says: this checkout's installation in the venv
        running the tests, whose package is ``src/ssdlab``) and its command."""
        buffer = io.BytesIO()
        dist = importlib.metadata.distribution("ssdlab")
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
            tar.add(CHECKOUT_PACKAGE, arcname="ssdlab",
                    filter=lambda info: None if "__pycache__" in info.name else info)
            for name in ("METADATA", "entry_points.txt"):
                data = (dist.read_text(name) or "").encode()
                info = tarfile.TarInfo(f"ssdlab-{dist.version}.dist-info/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        script = "\n".join([f"#!{GUEST_VENV}/bin/python3", "import sys",
                            "from ssdlab.cli.main import entry", "sys.exit(entry())", ""])
        install = (
            "set -e; "
            f"site=$({GUEST_VENV}/bin/python3 -c "
            "'import sysconfig; print(sysconfig.get_path(\"purelib\"))'); "
            'rm -rf "$site"/ssdlab "$site"/ssdlab-*.dist-info; tar -C "$site" -xzf -; '
            f"printf %s {shlex.quote(script)} > {GUEST_VENV}/bin/ssdlab; "
            f"chmod 755 {GUEST_VENV}/bin/ssdlab")
        self.run(install, stdin=buffer.getvalue())

    def stop(self) -> None:
        """QMP quit (the guest is not shut down: its disks are scratch), then remove its
        directory. Safe to call twice."""
        if self.qemu is not None and self.qemu.poll() is None:
            with contextlib.suppress(OSError, VmLabError, ValueError):
                qmp = Qmp(self.dir / "qmp.sock")
                with contextlib.suppress(OSError, VmLabError, ValueError):
                    qmp.execute("quit")
                qmp.close()
            try:
                self.qemu.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.qemu.kill()
                self.qemu.wait()
        for process in (self.master,):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        if self.dir.exists():
            dispose_lab_dir(self.dir)
        if self._slot is not None:
            self._slot.close()
            self._slot = None

    def __enter__(self) -> Guest:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def reboot(self) -> float:
        """Reboot the guest (a reset, no shutdown: ``sysrq b`` after a ``sync``) and wait
        for SSH again; the seconds until it answered. Its root overlay and its drives stay,
        so what the guest wrote to them is there after the reboot."""
        assert self.qemu is not None
        boot_id = self.run("cat /proc/sys/kernel/random/boot_id").strip()
        self.qmp("set-action", reboot="reset")  # QEMU runs with -no-reboot: reset instead
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.ssh("sync; echo 1 > /proc/sys/kernel/sysrq; "
                     "(sleep 1; echo b > /proc/sysrq-trigger) >/dev/null 2>&1 &", timeout=30)
        return self._back_after_reset(boot_id, "its reboot", settle=3.0)

    def power_cycle(self) -> float:
        """Cut the guest's power and give it back at once (QMP ``system_reset``: no sync,
        no shutdown, whatever runs in it dies as on a real power loss), then wait for SSH;
        the seconds until it answered. Its root overlay and drives stay."""
        assert self.qemu is not None
        boot_id = self.run("cat /proc/sys/kernel/random/boot_id").strip()
        self.qmp("set-action", reboot="reset")  # -no-reboot would make it a power-off
        self.qmp("system_reset")
        return self._back_after_reset(boot_id, "its power cycle", settle=1.0)

    def _back_after_reset(self, boot_id: str, what: str, *, settle: float) -> float:
        if self.master is not None:
            self.master.kill()
            self.master.wait()
            self.master = None
        with contextlib.suppress(FileNotFoundError):
            (self.dir / "ssh.ctl").unlink()
        started = time.monotonic()
        time.sleep(settle)  # the old sshd may still answer for a moment before the reset
        self._await_ssh(started)
        seconds = time.monotonic() - started
        if self.run("cat /proc/sys/kernel/random/boot_id").strip() == boot_id:
            raise VmLabError(f"guest {self.name} did not restart (the same boot id)")
        self.lab.say(f"vmlab: guest {self.name} answered SSH {seconds:.1f} s after {what}")
        return seconds

    # commands
    def ssh(self, command: str, *, stdin: bytes | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run a shell command in the guest; its result, whatever its exit status."""
        if self.master is None:
            raise VmLabError(f"guest {self.name} is not running")
        done = subprocess.run([*self._ssh_argv("-o", "ControlMaster=no"), command],
                              input=stdin, capture_output=True, timeout=timeout, check=False)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           done.stdout.decode(errors="replace"),
                                           done.stderr.decode(errors="replace"))

    def run(self, command: str, *, stdin: bytes | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> str:
        """Run a shell command in the guest, which must exit 0; its standard output."""
        done = self.ssh(command, stdin=stdin, timeout=timeout)
        if done.returncode != 0:
            raise VmLabError(f"guest {self.name}: `{command}` exited with {done.returncode}: "
                             f"{done.stderr.strip()[-2000:]}")
        return done.stdout

    def copy_in(self, local: str | os.PathLike[str], remote: str) -> None:
        """Copy a file into the guest."""
        self.run(f"cat > {shlex.quote(remote)}", stdin=Path(local).read_bytes())

    def qmp(self, command: str, **arguments: Any) -> Any:
        """One QMP command to this guest's QEMU."""
        qmp = Qmp(self.dir / "qmp.sock")
        try:
            return qmp.execute(command, **arguments)
        finally:
            qmp.close()


class VmLab:
    """A lab directory owned by this process, its guests and emulators: a context manager
    (or :meth:`close`) that leaves nothing behind."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        problem = host_problem()
        if problem:
            raise VmLabError(problem)
        start = _start_time(os.getpid())
        self.dir = SCRATCH_ROOT / f"{LAB_PREFIX}{os.getpid()}-{start}"
        self.dir.mkdir()
        self.say = say
        self.guests: list[Guest] = []
        self._image: Image | None = None
        self._names = 0

    @property
    def emulator_env(self) -> dict[str, str]:
        """The environment for ``ssdlab emulator ...`` to start emulators in the lab."""
        return {"SSDLAB_EMU_RUN_DIR": str(self.dir / "emus")}

    def image(self) -> Image:
        if self._image is None:
            self._image = ensure_image(self.say)
        return self._image

    def guest(self, drives: Sequence[Drive], *, memory: str = "1G", cpus: int = 2,
              wait: bool = True) -> Guest:
        """Boot a guest with these drives (the NVMe ones in order: /dev/nvme0n1,
        /dev/nvme1n1...; SATA and SCSI ones by :meth:`Guest.device`), SSH up and the
        checkout's ssdlab in it (``wait=False``: QEMU started, nothing waited for)."""
        self._names += 1
        guest = Guest(self, f"g{self._names}", drives, memory, cpus)
        self.guests.append(guest)
        return guest.start(wait=wait)

    def hosts_env(self, guests: Sequence[Guest]) -> dict[str, str]:
        """The environment for a multi-host ``ssdlab run`` on this machine whose hosts are
        ``guests`` (docs/hosts.md): an ssh config naming each guest as it is named here
        (``g1``, ``g2``, ...: its forwarded port, root, its key), and the guest's ssdlab as
        the agent's command."""
        config = self.dir / "hosts_ssh_config"
        config.write_text("".join(
            f"Host {g.name}\n  HostName 127.0.0.1\n  Port {g.port}\n  User root\n"
            f"  IdentityFile {g.key}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
            "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 30\n"
            for g in guests))
        return {"SSDLAB_SSH_CONFIG": str(config),
                "SSDLAB_AGENT_COMMAND": f"{GUEST_VENV}/bin/ssdlab"}

    def close(self) -> None:
        for guest in self.guests:
            guest.stop()
        if self.dir.exists():
            dispose_lab_dir(self.dir)

    def __enter__(self) -> VmLab:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def tree_digest_here(package: Path = CHECKOUT_PACKAGE) -> str:
    """:data:`TREE_DIGEST` of a package directory on the host."""
    done = subprocess.run([sys.executable, "-c", TREE_DIGEST, str(package)],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def package_digest_in(guest: Guest) -> str:
    """:data:`TREE_DIGEST` of the ssdlab package installed in the guest."""
    return guest.run(
        f"cd /tmp && {GUEST_VENV}/bin/python3 -c {shlex.quote(TREE_DIGEST)} "
        f"$({GUEST_VENV}/bin/python3 -c 'import os, ssdlab; "
        "print(os.path.dirname(ssdlab.__file__))')").strip()


def _shell(drives: str) -> int:
    """``drives``: a count of NVMe drives, or buses (``nvme,sata,scsi``)."""
    buses = ["nvme"] * int(drives) if drives.isdigit() else drives.split(",")
    with VmLab() as lab, lab.guest([Drive.scratch(bus=bus) for bus in buses]) as guest:
        ssh = shlex.join(guest._ssh_argv("-o", "ControlMaster=no"))
        named = ", ".join(f"{drive.bus} {serial}"
                          for drive, serial in zip(guest.drives, guest.serials, strict=True))
        print(f"guest {guest.name} up in {guest.boot_seconds:.1f} s with drives: {named}")
        print(f"  ssh:     {ssh}")
        print(f"  console: {guest.console}")
        print(f"  QMP:     {guest.dir / 'qmp.sock'}")
        print("Enter (or Ctrl-C) stops it and removes everything.")
        with contextlib.suppress(KeyboardInterrupt, EOFError):
            input()
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["shell"]:
            return _shell(argv[1] if len(argv) > 1 else "4")
        if argv[:1] == ["clear"]:
            for lab_dir in clear_dead_labs():
                print(f"removed {lab_dir}")
            return 0
        raise VmLabError("usage: python -m tests.support.vmlab shell [COUNT | BUS,BUS...] "
                         "| clear")
    except (VmLabError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
