"""The workspace of ``ssdlab run db``: its private directory, the file system made on the
target (mounted there) or the work directory in ``--dir``, made on entry and removed at the
end, also after Ctrl-C. A run killed outright (SIGKILL, a crash, a power cut) leaves a
state file: the next ``ssdlab run db`` or ``ssdlab db cleanup`` stops what it left and
removes it (:func:`clean_leftovers`).

The state file (``$SSDLAB_STATE_DIR/db/TOKEN.json``, default ``/var/lib/ssdlab/db``) is
written before anything is made and says what there is to undo: the private directory,
the mount, the work directory, each server's process and cgroup (run/dbserver.py starts
them).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ssdlab.errors import UserError
from ssdlab.plan.dbcommands import RUN_ROOT, Layout, mkfs, mount
from ssdlab.run.dbserver import (
    Say,
    ServerRecord,
    chown_tree,
    kill_server,
    remove_cgroup,
    run_checked,
)
from ssdlab.run.session import boot_id
from ssdlab.targets.identity import read_mountinfo

STATE_VERSION = 1


def state_dir() -> Path:
    """Where the state files of database runs are."""
    base = os.environ.get("SSDLAB_STATE_DIR") or "/var/lib/ssdlab"
    return Path(base) / "db"


@dataclass
class DbState:
    """What a run made, to undo (see the module's documentation)."""

    token: str
    owner_pid: int
    boot_id: str
    base: str
    mount: str | None = None  # the target's file system, mounted here
    device: str | None = None
    workdir: str | None = None  # the work directory made in --dir
    servers: list[ServerRecord] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.token}.json"

    def save(self) -> None:
        state_dir().mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, **asdict(self)}, indent=1),
                       encoding="utf-8")
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> DbState:
        d = json.loads(path.read_text(encoding="utf-8"))
        if d.pop("version", None) != STATE_VERSION:
            raise ValueError(f"{path}: not a state file of this ssdlab")
        servers = [ServerRecord(**s) for s in d.pop("servers", [])]
        return cls(**d, servers=servers)

    def owner_alive(self) -> bool:
        """The run that made this still runs (same boot, its process alive and ssdlab)."""
        if self.boot_id != boot_id():
            return False
        try:
            cmdline = Path(f"/proc/{self.owner_pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"ssdlab" in cmdline


# -- the workspace ---------------------------------------------------------------------


class Workspace:
    """A run's private places, made on entry and removed on exit (see the module's
    documentation): ``device`` gets a new ``fs`` file system mounted in the private
    directory, or ``work_in`` (a directory on a mounted file system) a work directory."""

    def __init__(self, *, device: str | None, fs: str, work_in: str | None,
                 say: Say) -> None:
        self.say = say
        token = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self.state = DbState(token=token, owner_pid=os.getpid(), boot_id=boot_id(),
                             base=str(RUN_ROOT / token), device=device)
        self.device, self.fs, self.work_in = device, fs, work_in
        self.layout = Layout(Path(self.state.base), Path(self.state.base) / "mnt")
        self.mkfs_output = ""

    @property
    def token(self) -> str:
        return self.state.token

    def __enter__(self) -> Workspace:
        self.state.save()  # before anything is made: what to undo if the run is killed
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        base = Path(self.state.base)
        if not base.parent.exists():
            base.parent.mkdir(parents=True, mode=0o711)
            os.chmod(base.parent, 0o711)
        base.mkdir(mode=0o711)
        os.chmod(base, 0o711)
        if self.device is not None:
            self.layout.mount.mkdir(mode=0o755)
            done = run_checked(mkfs(self.fs, self.device), f"making {self.fs} on {self.device}")
            self.mkfs_output = (done.stdout + done.stderr).strip()
            self.state.mount = str(self.layout.mount)
            self.state.save()
            run_checked(mount(self.fs, self.device, self.layout.mount),
                        f"mounting {self.device}")
            self.say(f"made {self.fs} on {self.device}, mounted at {self.layout.mount}")
            return
        assert self.work_in is not None
        work = Path(self.work_in) / f"ssdlab-db-{self.state.token}"
        self.state.workdir = str(work)
        self.state.save()
        work.mkdir(mode=0o755)
        self.layout = Layout(base, work)

    def server_dirs(self, server: str, user: str) -> None:
        """The server's data directory (on the target) and socket directory (private),
        its user's."""
        root = self.layout.data_dir(server).parent
        root.mkdir(parents=True, exist_ok=True)
        self.layout.data_dir(server).mkdir(exist_ok=True)
        sock = self.layout.sock_dir(server)
        sock.mkdir(exist_ok=True, mode=0o700)
        for path in (root, self.layout.data_dir(server), sock):
            chown_tree(path, user)
        os.chmod(root, 0o700)

    def remove_server_data(self, server: str) -> None:
        shutil.rmtree(self.layout.data_dir(server).parent, ignore_errors=True)
        shutil.rmtree(self.layout.sock_dir(server), ignore_errors=True)

    def add_server(self, record: ServerRecord) -> None:
        self.state.servers.append(record)
        if record.cgroup is not None and record.cgroup not in self.state.cgroups:
            self.state.cgroups.append(record.cgroup)
        self.state.save()

    def add_cgroup(self, path: str) -> None:
        self.state.cgroups.append(path)
        self.state.save()

    def drop_server(self, pid: int) -> None:
        self.state.servers = [s for s in self.state.servers if s.pid != pid]
        self.state.save()

    def close(self) -> None:
        undo(self.state, self.say)


# -- undoing what a run made --------------------------------------------------------------


def _mounted(path: str) -> bool:
    return any(e.mount_point == path for e in read_mountinfo())


def _umount(path: str, say: Say) -> None:
    for attempt in range(50):
        done = subprocess.run(["umount", path], capture_output=True, text=True, check=False)
        if done.returncode == 0 or not _mounted(path):
            return
        time.sleep(0.1 * (attempt + 1) if attempt < 10 else 1.0)
    say(f"warning: {path} is still busy; unmounting it lazily")
    subprocess.run(["umount", "-l", path], capture_output=True, check=False)


def _wipe(device: str, say: Say) -> None:
    """Erase the signature of the file system the run made (wipefs opens the device
    exclusively: a device someone mounted since is left alone, and said so)."""
    done = subprocess.run(["wipefs", "-a", "-q", device], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        say(f"warning: could not erase the file system made on {device}: "
            f"{(done.stderr.strip().splitlines() or ['wipefs failed'])[-1]}")


def undo(state: DbState, say: Say) -> None:
    """Undo what ``state`` says was made: servers, cgroups, mount, directories, the state
    file (in that order; each step goes on when another failed)."""
    for server in state.servers:
        kill_server(server.pid, say)
    for cgroup in state.cgroups:
        remove_cgroup(cgroup)
    if state.mount is not None and _mounted(state.mount):
        _umount(state.mount, say)
        say(f"unmounted {state.device or ''} from {state.mount}".replace("  ", " "))
    if state.mount is not None and state.device is not None and not _mounted(state.mount):
        _wipe(state.device, say)
    if state.workdir is not None:
        shutil.rmtree(state.workdir, ignore_errors=True)
    if state.mount is None or not _mounted(state.mount):
        shutil.rmtree(state.base, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        state.path.unlink()


def all_states() -> list[DbState]:
    """Every database run's state file: running runs' and killed runs' leftovers."""
    found = []
    directory = state_dir()
    if not directory.is_dir():
        return []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append(DbState.load(path))
        except (OSError, ValueError, TypeError) as exc:
            raise UserError(f"cannot read the database state file {path} ({exc}); remove it "
                            "once nothing it names is left") from None
    return found


def leftovers() -> list[DbState]:
    """State files of runs that are no longer running (killed, crashed, rebooted)."""
    return [s for s in all_states() if not s.owner_alive()]


def clean_leftovers(say: Say) -> int:
    """Stop and remove what killed database runs left; how many runs' leftovers."""
    found = leftovers()
    for state in found:
        say(f"cleaning up database run {state.token} left by process {state.owner_pid}")
        undo(state, say)
    return len(found)
