"""Software arrays ssdlab builds from member drives and tears down again (issue 15).

Every member passes every guardrail a single target passes (:mod:`ssdlab.targets.safety`)
before any command runs: one refused member refuses the set. ``--destroy-data`` may name
several members (``--destroy-data=/dev/sdb,/dev/sdc`` or serials); a member that carries
data must be named, a blank one needs the bare flag or its name.

Every array ssdlab builds has a state file in :func:`state_dir` (``SSDLAB_STATE_DIR``,
else ``/var/lib/ssdlab/arrays``), written before the first command runs and removed only
when the array is gone and its members are wiped. An array whose owner process died
(Ctrl-C is handled, SIGKILL or a power cut are not) is a *leftover*: the next ``array
create`` or matrix run, or ``ssdlab array destroy``, tears it down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ssdlab.analysis.member_rounds import md_small_write
from ssdlab.errors import ExitCode, TargetError, UserError, command
from ssdlab.plan.array import ArrayPlan, create_commands, destroy_commands
from ssdlab.run.array_tools import backend_version as backend_version
from ssdlab.run.array_tools import check_backend as check_backend
from ssdlab.run.zfs import await_device, pool_available, zfs_attributes
from ssdlab.targets.array_status import health, parse_mdstat, parse_zpool_status
from ssdlab.targets.identity import (
    SYSFS,
    TargetInfo,
    block_dir,
    dead_fuse_mounts,
    identify_block,
    read_attr,
    read_int,
    read_mountinfo,
)
from ssdlab.targets.nbd import is_nbd_target
from ssdlab.targets.safety import DestroyData, RealDevices, check_block_target
from ssdlab.targets.write_cache import write_cache_state
from ssdlab.units import format_bytes

STATE_VERSION = 1
COMMAND_TIMEOUT_S = 600.0
#: how long a teardown waits for a member still busy after the unmount before it fails
BUSY_WAIT_S = 10.0



class ArrayCommandFailed(UserError):
    """A command that builds or tears down an array failed (exit status 4)."""

    exit_code = ExitCode.ENVIRONMENT


def state_dir() -> Path:
    """Where ssdlab keeps a state file per array it built."""
    return Path(os.environ.get("SSDLAB_STATE_DIR") or "/var/lib/ssdlab/arrays")


def default_mount_dir(name: str) -> str:
    """Where a btrfs array of ssdlab's is mounted."""
    return str(state_dir() / "mnt" / name)


# -- members and their guardrails ---------------------------------------------------------


def confirmations(destroy_data: DestroyData) -> list[str]:
    """The members ``--destroy-data=A,B`` names (none for the bare flag or no flag)."""
    if not isinstance(destroy_data, str):
        return []
    return [item.strip() for item in destroy_data.split(",") if item.strip()]


def _names(item: str, info: TargetInfo) -> bool:
    if item.startswith((".", "~")) or "/" in item:
        return RealDevices().same_device(info.path, os.path.expanduser(item)) is True
    return info.serial is not None and item == info.serial


def member_consent(infos: list[TargetInfo], destroy_data: DestroyData,
                   what: str = "members") -> list[DestroyData]:
    """Each member's own ``--destroy-data``: the item naming it, else the bare flag when
    any was given; an item naming no member is refused (one line; ``what`` they are)."""
    items = confirmations(destroy_data)
    consent: list[DestroyData] = []
    used: set[str] = set()
    for info in infos:
        named = [item for item in items if _names(item, info)]
        used.update(named)
        consent.append(named[0] if named else bool(destroy_data))
    stray = [item for item in items if item not in used]
    if stray:
        raise UserError(f"--destroy-data names {stray[0]}, which is not one of the {what} "
                        f"({', '.join(i.path for i in infos)})")
    return consent


def checked_members(paths: list[str], destroy_data: DestroyData) -> list[TargetInfo]:
    """Identify every member and pass each through every guardrail, before anything is
    written to any: the first refusal refuses the set, naming the member."""
    infos = identify_members(paths)
    guard_members(infos, destroy_data)
    return infos


def identify_members(paths: list[str]) -> list[TargetInfo]:
    """Each member's identity (a member that is missing, not a block device or named twice
    refuses the set, in one line)."""
    if not paths:
        raise UserError("an array needs member devices: give them as arguments")
    infos = []
    for path in paths:
        full = os.path.abspath(path)
        if is_nbd_target(path):
            raise TargetError(f"refusing the set: member {path} is an NBD export; arrays are "
                              "built of local block devices (docs/network.md)")
        if not os.path.exists(full):
            raise TargetError(f"refusing the set: member {path} does not exist")
        try:
            infos.append(identify_block(full))
        except TargetError as err:
            raise TargetError(f"refusing the set: member {path}: {err}") from None
    devices = [os.stat(i.path).st_rdev for i in infos]
    if len(set(devices)) != len(devices):
        raise UserError(f"a member is named twice: {' '.join(paths)}")
    return infos


def guard_members(infos: list[TargetInfo], destroy_data: DestroyData) -> None:
    """Every guardrail on every member, each with its own confirmation."""
    for info, consent in zip(infos, member_consent(infos, destroy_data), strict=True):
        try:
            check_block_target(info, destroy_data=consent, writes=True)
        except TargetError as err:
            raise TargetError(f"refusing the set: {err}") from None


def member_identity(info: TargetInfo, *, sysfs: Path = SYSFS) -> dict[str, Any]:
    """What a run records of each member: identity and write-cache state (sysfs, the NVMe
    volatile write cache feature, ATA's ``hdparm -W``: targets/write_cache.py)."""
    cache = write_cache_state(info.path, info.name, sysfs=sysfs)
    return {
        "path": info.path, "name": info.name, "model": info.model, "serial": info.serial,
        "firmware": info.firmware, "capacity_bytes": info.capacity_bytes,
        "device_class": info.device_class, "write_cache": cache.get("sysfs"),
        "write_cache_state": cache,
        # bytes the device's natural alignment is off from its start (0: aligned)
        "alignment_offset": read_int(block_dir(info.name, sysfs=sysfs) / "alignment_offset"),
        "physical_sector_bytes": info.physical_sector_bytes,
    }


# -- the state file ---------------------------------------------------------------------


@dataclass
class ArrayState:
    """One array ssdlab built, as its state file keeps it."""

    plan: ArrayPlan
    status: str  # building, ready, destroying
    pid: int
    boot_id: str
    created_at: float
    owner: str | None = None  # the run (a matrix) that built it
    backend_version: str | None = None
    members: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.plan.name}.json"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["version"] = STATE_VERSION
        d["target"] = self.plan.target
        return d

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArrayState:
        plan = d["plan"]
        return cls(ArrayPlan(plan["backend"], plan["level"], tuple(plan["members"]),
                             plan["name"], int(plan["chunk_bytes"]), int(plan["member_bytes"]),
                             plan["mount_dir"]),
                   str(d["status"]), int(d["pid"]), str(d["boot_id"]), float(d["created_at"]),
                   d.get("owner"), d.get("backend_version"), list(d.get("members") or []))

    def provenance(self) -> dict[str, Any]:
        """What a run on this array records as ``details["array"]``."""
        p = self.plan
        array_cache = None
        if p.backend != "btrfs" and os.path.exists(p.target):
            name = os.path.basename(os.path.realpath(p.target))
            array_cache = read_attr(block_dir(name) / "queue" / "write_cache")
        md = md_attributes(os.path.basename(os.path.realpath(p.target))) \
            if p.backend == "md" and os.path.exists(p.target) else None
        small = md_small_write(p.level, len(p.members),
                               md.get("rmw_level") if md else None) if md is not None else None
        extra: dict[str, Any] = {}
        if md is not None:
            extra["md"] = md
        if small is not None:
            extra["small_write"] = small.to_dict()
        if p.backend == "zfs":
            extra["zfs"] = zfs_attributes(p)
        return {"backend": p.backend, "backend_version": self.backend_version,
                "write_cache": array_cache, **extra,
                # btrfs and md put their data at whole MiB from each member's start, ZFS
                # at 4 MiB: chunk-aligned on members that are aligned themselves
                "alignment": {"chunk_bytes": p.chunk_bytes, "members_aligned": all(
                    not m.get("alignment_offset") for m in self.members)},
                "level": p.level, "level_name": p.level_name, "chunk_bytes": p.chunk_bytes,
                "name": p.name,
                "member_bytes": p.member_bytes, "usable_bytes": p.usable_bytes,
                "target": p.target, "members": self.members, "built_by": "ssdlab"}

    def leftover(self) -> bool:
        """Built for a run whose process died, or never finished building or tearing
        down (an array made by ``ssdlab array create`` stays until ``array destroy``)."""
        return not self.owner_alive() and (self.status != "ready" or self.owner is not None)

    def owner_alive(self) -> bool:
        """Whether the process that built it still runs (on this boot)."""
        if self.boot_id != _boot_id():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


#: what a run records of an md array's own state (``/sys/block/mdX/md/``): the write
#: method's rule and stripe cache of RAID 5/6, and that no resync runs
MD_ATTRIBUTES = ("rmw_level", "stripe_cache_size", "sync_action", "array_state",
                 "layout", "chunk_size")


def md_attributes(name: str, *, sysfs: Path = SYSFS) -> dict[str, Any]:
    """The md array ``name``'s (``md127``) own attributes (numbers as numbers; absent ones
    left out) and that name."""
    out: dict[str, Any] = {"device": name}
    for attr in MD_ATTRIBUTES:
        text = read_attr(block_dir(name, sysfs=sysfs) / "md" / attr)
        if text is not None:
            out[attr] = int(text) if text.isdigit() else text
    return out


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def load_states() -> list[ArrayState]:
    """Every array ssdlab has a state file of (unreadable files are named, not hidden)."""
    states = []
    for path in sorted(state_dir().glob("*.json")):
        try:
            states.append(ArrayState.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"array state file {path} cannot be read ({err}); remove it "
                            "after checking its array by hand", ExitCode.ENVIRONMENT) from None
    return states


def find_state(name: str) -> ArrayState:
    for state in load_states():
        if state.plan.name == name:
            return state
    # a name that names nothing: a bad argument (2), not "no such run" (docs/exit-codes.md)
    raise UserError(f"ssdlab has built no array named {name!r} (see `{command()} array "
                    "status`)")


def array_of_target(path: str) -> ArrayState | None:
    """The ready array of ssdlab's that ``path`` is (or is on), if any."""
    real = os.path.realpath(path)
    for state in load_states():
        p = state.plan
        mount = os.path.realpath(p.mount_dir)
        on_mount = p.backend != "md" and (real == mount or real.startswith(mount + "/"))
        if state.status == "ready" and (on_mount or os.path.realpath(p.target) == real):
            return state
    return None


# -- running the commands ----------------------------------------------------------------

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def run_command(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                          check=False)


def _first_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def _check(argv: list[str], done: subprocess.CompletedProcess[str]) -> None:
    if argv[:2] == ["mdadm", "--wait"] and done.returncode == 1:
        return  # mdadm --wait: 1 means there was nothing to wait for
    if done.returncode != 0:
        raise ArrayCommandFailed(f"`{' '.join(argv)}` failed: {_first_line(done)}"
                                 + _dead_mount_hint(done))


def _dead_mount_hint(done: subprocess.CompletedProcess[str]) -> str:
    """mkfs.btrfs (and others) refuse every device while any FUSE mount on the machine is
    dead; name those mounts and the way out, since the error names only the device."""
    if "Transport endpoint is not connected" not in f"{done.stderr}{done.stdout}":
        return ""
    dead = dead_fuse_mounts()
    if not dead:
        return ""
    return (f" (a FUSE mount whose daemon has gone blocks it: {', '.join(dead)}; unmount "
            f"it with `umount -l`, or `{command()} emulator stop --name NAME` for an "
            "emulator)")


def build(plan: ArrayPlan, members: list[TargetInfo], *, owner: str | None = None,
          say: Callable[[str], None] = print, run: Runner = run_command) -> ArrayState:
    """Build ``plan`` (its members already checked): the state file first, then every
    command; a failure tears down what was built and raises a one-line error."""
    check_backend(plan.backend, say=say, run=run)
    state = ArrayState(plan, "building", os.getpid(), _boot_id(), time.time(), owner,
                       backend_version(plan.backend), [member_identity(m) for m in members])
    if state.path.exists():
        raise UserError(f"an array named {plan.name} exists already (`{command()} array destroy "
                        f"{plan.name}` first)")
    state.save()
    try:
        if plan.backend != "md":
            _fresh_mount_dir(plan.mount_dir)
        steps = create_commands(plan)
        for i in range(len(steps)):
            argv = steps[i]
            say(f"  $ {' '.join(argv)}")
            _check(argv, run(argv))
            if argv[:2] == ["zpool", "create"]:  # the zvol's size: from what the pool has
                steps = create_commands(plan, pool_available(plan.name, run))
        if plan.backend == "zfs":
            await_device(plan.target, run)
    except BaseException:
        with contextlib.suppress(UserError):
            teardown(state, say=say, run=run)
        raise
    state.status = "ready"
    state.save()
    say(f"built {plan.describe()}")
    return state


def _fresh_mount_dir(path: str) -> None:
    mount = Path(path)
    if _mounted(path):
        raise UserError(f"{path} is mounted already; unmount it or name the array otherwise")
    mount.mkdir(parents=True, exist_ok=True)
    if any(mount.iterdir()):
        raise UserError(f"mount directory {path} is not empty")


def _mounted(path: str) -> bool:
    real = os.path.realpath(path)
    return any(e.mount_point == real for e in read_mountinfo())


Describe = Callable[[str], TargetInfo]


def _describe(path: str) -> TargetInfo:
    return identify_block(path)


def _whole_disks(sysfs: Path = SYSFS) -> list[str]:
    return sorted(entry.name for entry in (sysfs / "block").glob("*")
                  if not entry.name.startswith(("loop", "ram", "zram", "md", "dm-")))


def members_now(state: ArrayState, *, describe: Describe = _describe,
                disks: Callable[[], list[str]] = _whole_disks,
                say: Callable[[str], None] = print) -> list[str]:
    """Where the array's members are now, found by the serial each had when it was built:
    the kernel's names can change across a reboot (NVMe controllers are probed in
    parallel, so nvme0 and nvme1 may swap), and a teardown must wipe the members, not
    whatever now has their names. A member whose path shows another serial is looked
    for among the machine's disks by serial and size; where it is not found the teardown
    is refused (one line, its state file kept), so no other drive is wiped. A member
    recorded without a serial keeps its path."""
    recorded = {str(m.get("path")): m for m in state.members if isinstance(m, dict)}
    paths = []
    for path in state.plan.members:
        member = recorded.get(path) or {}
        serial, size = member.get("serial"), member.get("capacity_bytes")
        if not serial:
            paths.append(path)
            continue
        now = _serial_at(path, describe)
        found = None if now == serial else _found(serial, size, describe, disks)
        if now == serial or (found is None and now is None):
            paths.append(path)  # itself, or gone and nowhere else: the commands name it
            continue
        if found is None:
            raise ArrayCommandFailed(
                f"refusing to tear down {state.plan.name}: member {path} (serial {serial}) is "
                f"not found; {path} is now {'serial ' + now if now else 'another drive'} "
                f"and is not wiped; its state file {state.path} is kept")
        say(f"member {path} (serial {serial}) is {found} now")
        paths.append(found)
    return paths


def _serial_at(path: str, describe: Describe) -> str | None:
    try:
        return describe(path).serial
    except (TargetError, OSError):
        return None


def _found(serial: str, size: object, describe: Describe,
           disks: Callable[[], list[str]]) -> str | None:
    """The disk with this serial (and size, where recorded)."""
    for name in disks():
        try:
            info = describe(f"/dev/{name}")
        except (TargetError, OSError):
            continue
        if info.serial == serial and (size is None or info.capacity_bytes == size):
            return f"/dev/{name}"
    return None


def teardown(state: ArrayState, *, say: Callable[[str], None] = print,
             run: Runner = run_command) -> None:
    """Tear the array down and wipe its members; the state file goes last. Every command
    is tried; the first failure is raised at the end (one line)."""
    plan = dataclasses.replace(state.plan, members=tuple(members_now(state, say=say)))
    state.status = "destroying"
    state.save()
    failures: list[str] = []
    for argv in destroy_commands(plan):
        if argv[0] == "umount" and not _mounted(plan.mount_dir):
            continue
        if argv[:2] == ["mdadm", "--stop"] and not os.path.exists(plan.target):
            continue
        if argv[:2] == ["zpool", "labelclear"] and not os.path.exists(argv[-1]):
            continue  # no partition: ZFS never labelled that member
        say(f"  $ {' '.join(argv)}")
        done = _run_while_busy(argv, run) if argv[0] == "wipefs" else run(argv)
        if done.returncode != 0 and not _no_such_pool(argv, done):
            failures.append(f"`{' '.join(argv)}`: {_first_line(done)}")
    if plan.backend == "btrfs":
        run(["btrfs", "device", "scan", "--forget", *plan.members])
    if plan.backend != "md":
        with contextlib.suppress(OSError):
            Path(plan.mount_dir).rmdir()
    if failures:
        raise ArrayCommandFailed(f"tearing down {plan.name} left work to do: {failures[0]}; "
                                 f"its state file {state.path} is kept")
    state.path.unlink(missing_ok=True)
    say(f"destroyed {plan.name}; members wiped: {', '.join(plan.members)}")


def _no_such_pool(argv: list[str], done: subprocess.CompletedProcess[str]) -> bool:
    """``zpool destroy`` of a pool that is not there (its build failed before it, or it
    was destroyed already): nothing to tear down."""
    return argv[:2] == ["zpool", "destroy"] and "no such pool" in (done.stderr or "")


def _run_while_busy(argv: list[str], run: Runner) -> subprocess.CompletedProcess[str]:
    """``argv`` (wipefs, which opens the members exclusively), tried again for up to
    :data:`BUSY_WAIT_S` while a member is still busy: a member the kernel has not yet
    let go of just after the unmount (seen on btrfs: "Device or resource busy")."""
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        done = run(argv)
        if (done.returncode == 0 or "busy" not in (done.stderr or "").lower()
                or time.monotonic() >= deadline):
            return done
        time.sleep(0.2)


def clean_leftovers(*, say: Callable[[str], None] = print, run: Runner = run_command,
                    keep_owner: str | None = None) -> list[str]:
    """Tear down every array whose builder died (a killed run); their names."""
    cleaned = []
    for state in load_states():
        if not state.leftover() or (keep_owner is not None and state.owner == keep_owner):
            continue
        say(f"array {state.plan.name} was left by a stopped run (process {state.pid}); "
            "tearing it down")
        teardown(state, say=say, run=run)
        cleaned.append(state.plan.name)
    return cleaned


@contextlib.contextmanager
def built(plan: ArrayPlan, members: list[TargetInfo], *, owner: str | None = None,
          say: Callable[[str], None] = print) -> Iterator[ArrayState]:
    """The array for the length of the block, torn down however the block ends."""
    state = build(plan, members, owner=owner, say=say)
    try:
        yield state
    finally:
        teardown(state, say=say)


def describe_state(state: ArrayState) -> str:
    p = state.plan
    destroy = f"`{command()} array destroy`"
    alive = (f"stopped: a leftover, torn down by the next run or {destroy}"
             if state.leftover() else f"kept until {destroy}")
    owner = f", built for run {state.owner}" if state.owner else ""
    return (f"{p.name}: {p.describe()}; {state.status}, {alive}"
            f"{owner}; {format_bytes(p.member_bytes)} per member")


def live_status(state: ArrayState) -> list[str]:
    """What the array looks like now (one line each)."""
    p = state.plan
    lines = []
    missing = [m for m in p.members if not os.path.exists(m)]
    if missing:
        lines.append(f"members missing: {', '.join(missing)}")
    if p.backend == "btrfs":
        lines.append(f"mounted on {p.mount_dir}" if _mounted(p.mount_dir) else
                     f"not mounted ({p.mount_dir})")
        return lines
    if not os.path.exists(p.target):
        return [*lines, f"target {p.target} is absent"]
    try:
        lines.append(_md_health(p) if p.backend == "md" else _zfs_health(p))
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        lines.append(f"its state cannot be read: {err}")
    return lines


def _md_health(p: ArrayPlan, mdstat: Path = Path("/proc/mdstat")) -> str:
    """The md array's health line from /proc/mdstat."""
    name = os.path.basename(os.path.realpath(p.target))
    for md in parse_mdstat(mdstat.read_text(encoding="ascii")):
        if md.name == name:
            return health(md)
    return f"{name} is not in {mdstat}"


def _zfs_health(p: ArrayPlan, run: Runner = run_command) -> str:
    """The pool's health line from ``zpool status``."""
    done = run(["zpool", "status", p.name])
    if done.returncode != 0:
        return f"zpool status {p.name} failed: {_first_line(done)}"
    pools = parse_zpool_status(done.stdout)
    return health(pools[0]) if pools else f"pool {p.name} not found"
