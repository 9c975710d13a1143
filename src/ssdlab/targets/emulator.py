"""Start, stop and inspect the emulated SSD (``emulator/``, the ``ssdlab-emu`` daemon).

Each emulator is a FUSE mount at ``/run/ssdlab/emulators/NAME`` holding ``disk`` (the
device file), ``stats`` (ground truth as JSON) and ``control`` (commands). A state file
``NAME.json`` beside it remembers the daemon's pid and any loop device over ``disk``.
Emulators left behind by a crash (daemon gone, mount or loop device still there) are
reported as stale by :func:`status` and cleaned up by :func:`stop`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ssdlab.errors import EnvironmentProblem, UserError, command
from ssdlab.targets.identity import read_mountinfo

RUN_DIR = Path(os.environ.get("SSDLAB_EMU_RUN_DIR", "/run/ssdlab/emulators"))
PROFILES = ("enterprise-tlc", "client-slc", "max-op")
FSTYPE = "fuse.ssdlab-emu"
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class Emulator:
    name: str
    mountpoint: str
    pid: int
    profile: str
    size_bytes: int
    loop_device: str | None
    options: list[str] = field(default_factory=list)  # extra ssdlab-emu options

    @property
    def disk(self) -> str:
        return os.path.join(self.mountpoint, "disk")

    @property
    def target(self) -> str:
        """What to test: the loop device if there is one, else the disk file."""
        return self.loop_device or self.disk


def binary() -> str:
    """The daemon: $SSDLAB_EMU, else the build in the source tree, else ssdlab-emu on PATH."""
    env = os.environ.get("SSDLAB_EMU")
    built = Path(__file__).resolve().parents[3] / "emulator" / "build" / "ssdlab-emu"
    for candidate in (env, str(built), shutil.which("ssdlab-emu")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise EnvironmentProblem(
        "the emulator is not built: run `make -C emulator` (needs fuse3, "
        "libfuse3-dev) or set SSDLAB_EMU to the ssdlab-emu binary"
    )


def _state_file(name: str) -> Path:
    return RUN_DIR / f"{name}.json"


def _mounted(mountpoint: str) -> bool:
    return any(entry.mount_point == mountpoint for entry in read_mountinfo())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _check_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise UserError(f"emulator name {name!r} may only hold letters, digits, - and _")


def load(name: str) -> Emulator | None:
    path = _state_file(name)
    if not path.exists():
        return None
    return Emulator(**json.loads(path.read_text()))


def start(
    name: str,
    profile: str,
    size_bytes: int,
    *,
    loop: bool = False,
    options: Sequence[str] = (),
) -> Emulator:
    """Mount a fresh emulator; with ``loop`` also a loop device (direct I/O) over its disk.

    ``options`` are passed to ssdlab-emu after the profile and override it (``--op 0.28``,
    ``--idle-gc off``, ``--pages-per-block 16``...; see ``ssdlab-emu --help``).
    """
    _check_name(name)
    if profile not in PROFILES:
        raise UserError(f"--profile {profile!r} is not one of: {', '.join(PROFILES)}")
    existing = load(name)
    if existing is not None and _alive(existing.pid):
        raise UserError(
            f"emulator {name} is already running at {existing.mountpoint}; "
            f"`{command()} emulator stop --name {name}` first"
        )
    if existing is not None:
        stop(name)  # stale leftovers of a crash
    mountpoint = RUN_DIR / name
    mountpoint.mkdir(parents=True, exist_ok=True)
    pid_file = RUN_DIR / f"{name}.pid"
    cmd = [
        binary(),
        "--profile",
        profile,
        "--size",
        str(size_bytes),
        *options,
        "--pid-file",
        str(pid_file),
        str(mountpoint),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EnvironmentProblem(f"ssdlab-emu did not start: {done.stderr.strip()[:300]}")
    pid = int(pid_file.read_text().strip())
    emu = Emulator(name, str(mountpoint), pid, profile, size_bytes, None, list(options))
    if loop:
        emu = Emulator(**{**asdict(emu), "loop_device": _attach_loop(emu)})
    _state_file(name).write_text(json.dumps(asdict(emu)))
    return emu


def _attach_loop(emu: Emulator) -> str:
    done = subprocess.run(
        ["losetup", "--find", "--show", "--direct-io=on", emu.disk],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        _stop_daemon(emu)
        raise EnvironmentProblem(f"losetup over {emu.disk} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _detach_loop(device: str, disk: str) -> None:
    name = os.path.basename(device)
    backing = Path(f"/sys/block/{name}/loop/backing_file")
    with contextlib.suppress(OSError):
        if backing.read_text().strip() == disk:
            subprocess.run(["losetup", "-d", device], capture_output=True, check=False)


def _stop_daemon(emu: Emulator) -> None:
    if _alive(emu.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(emu.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while _mounted(emu.mountpoint) and time.monotonic() < deadline:
        time.sleep(0.05)
    for fallback in (["fusermount3", "-u", emu.mountpoint], ["umount", "-l", emu.mountpoint]):
        if not _mounted(emu.mountpoint):
            break
        subprocess.run(fallback, capture_output=True, check=False)


def stop(name: str) -> bool:
    """Stop an emulator (or clean up a stale one). False if there was nothing to stop."""
    _check_name(name)
    emu = load(name)
    if emu is None:
        mountpoint = str(RUN_DIR / name)
        if not _mounted(mountpoint):
            return False
        emu = Emulator(name, mountpoint, -1, "", 0, None)
    if emu.loop_device:
        _detach_loop(emu.loop_device, emu.disk)
    _stop_daemon(emu)
    for leftover in (_state_file(name), RUN_DIR / f"{name}.pid"):
        leftover.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        os.rmdir(emu.mountpoint)
    return True


def stats(emu: Emulator) -> dict[str, object]:
    """The daemon's ground truth (see emulator/README.md for the fields)."""
    data = json.loads(Path(emu.mountpoint, "stats").read_text())
    if not isinstance(data, dict):
        raise EnvironmentProblem(f"emulator {emu.name} returned stats that are not an object")
    return data


def control(emu: Emulator, command: str) -> None:
    """Send one control command (format, reset-stats, idle-gc on|off, fault ...)."""
    try:
        Path(emu.mountpoint, "control").write_text(command + "\n")
    except OSError as exc:
        raise UserError(f"emulator {emu.name} refused {command!r}: {exc.strerror}") from None


@dataclass(frozen=True)
class EmulatorStatus:
    name: str
    mountpoint: str
    running: bool
    stale: bool
    emulator: Emulator | None


def status() -> list[EmulatorStatus]:
    """Every emulator ssdlab knows of, running or left behind."""
    names = {p.stem for p in RUN_DIR.glob("*.json")} if RUN_DIR.is_dir() else set()
    for entry in read_mountinfo():
        if entry.fs_type == FSTYPE and entry.mount_point.startswith(f"{RUN_DIR}/"):
            names.add(os.path.basename(entry.mount_point))
    result = []
    for name in sorted(names):
        emu = load(name)
        mountpoint = emu.mountpoint if emu else str(RUN_DIR / name)
        running = emu is not None and _alive(emu.pid) and _mounted(mountpoint)
        result.append(EmulatorStatus(name, mountpoint, running, not running, emu))
    return result


def emulator_of(path: str, details: dict[str, object]) -> Emulator | None:
    """The running emulator behind a target: its loop device or its disk file."""
    backing = str(details.get("backing_file") or path)
    if os.path.basename(backing) != "disk":
        return None
    for item in status():
        emu = item.emulator
        if item.running and emu is not None and emu.disk == backing:
            return emu
    return None
