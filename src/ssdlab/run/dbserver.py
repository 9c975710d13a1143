"""The private database servers of ``ssdlab run db``: the run's workspace (its private
directory, the file system made on the target or the work directory in ``--dir``), each
server started as its own user in a memory cgroup, and everything removed at the end,
also after Ctrl-C. A run killed outright (SIGKILL, a crash, a power cut) leaves a state
file: the next ``ssdlab run db`` or ``ssdlab db cleanup`` stops what it left and removes
it (:func:`clean_leftovers`).

The state file (``$SSDLAB_STATE_DIR/db/TOKEN.json``, default ``/var/lib/ssdlab/db``) is
written before anything is made and says what there is to undo: the private directory,
the mount, the work directory, each server's process and cgroup.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem, UserError
from ssdlab.plan.dbcommands import RUN_ROOT, Layout, mkfs, mount, shown
from ssdlab.run.session import boot_id
from ssdlab.targets.identity import read_mountinfo

STATE_VERSION = 1
#: how long a server may take to start (InnoDB's first start makes its log files)
START_TIMEOUT_S = 300.0
#: how long a server may take to stop cleanly before it is killed
STOP_TIMEOUT_S = 120.0
SERVER_PROGRAMS = ("mariadbd", "mysqld", "postgres")

Say = Callable[[str], None]


def state_dir() -> Path:
    """Where the state files of database runs are."""
    base = os.environ.get("SSDLAB_STATE_DIR") or "/var/lib/ssdlab"
    return Path(base) / "db"


@dataclass
class ServerRecord:
    """A server the run started: undone by stopping the process and removing the cgroup."""

    kind: str
    pid: int
    cgroup: str | None = None


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


# -- memory cgroups --------------------------------------------------------------------


def cgroup_root() -> Path | None:
    """The memory controller's hierarchy: cgroup v2 with memory, or v1's memory one."""
    unified = Path("/sys/fs/cgroup")
    controllers = unified / "cgroup.controllers"
    if controllers.exists():
        if "memory" in controllers.read_text(encoding="ascii").split():
            return unified
        return None
    v1 = unified / "memory"
    return v1 if (v1 / "memory.limit_in_bytes").exists() else None


def make_cgroup(name: str, limit_bytes: int) -> Path:
    """A memory cgroup limited to ``limit_bytes`` (EnvironmentProblem when there is none)."""
    root = cgroup_root()
    if root is None:
        raise EnvironmentProblem("--memory-limit: this machine has no memory cgroup "
                                 "controller; give --memory-limit off")
    path = root / name
    path.mkdir(exist_ok=True)
    limit_file = "memory.max" if (path / "memory.max").exists() else "memory.limit_in_bytes"
    (path / limit_file).write_text(f"{limit_bytes}\n", encoding="ascii")
    return path


def remove_cgroup(path: str) -> None:
    """Remove an (empty) cgroup; a cgroup that still holds processes is left alone."""
    with contextlib.suppress(OSError):
        os.rmdir(path)


# -- processes as another user -------------------------------------------------------------


#: what a server gets when ssdlab dies: PostgreSQL's immediate shutdown (SIGQUIT) still
#: removes its shared memory segments in /dev/shm, which SIGKILL would leave behind
DEATH_SIGNALS = {"postgres": signal.SIGQUIT}


def as_user(user: str, cgroup: Path | None = None) -> Callable[[], None]:
    """A child's setup before exec: into ``cgroup`` (while still root), then ``user``'s
    groups and ids, then stopped with ssdlab (set after the ids change: that clears it)."""
    entry = pwd.getpwnam(user)
    procs = None if cgroup is None else str(cgroup / "cgroup.procs")
    death = DEATH_SIGNALS.get(user, signal.SIGKILL)

    def setup() -> None:
        if procs is not None:
            with open(procs, "w", encoding="ascii") as fh:
                fh.write(f"{os.getpid()}\n")
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        die_with_parent(death)
    return setup


def user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def unreachable_by(path: Path, user: str) -> Path | None:
    """The first directory above ``path`` that ``user`` cannot pass through (None: it can
    reach ``path``)."""
    entry = pwd.getpwnam(user)
    for parent in reversed(path.resolve().parents):
        if not parent.exists():
            break  # made by the run, passable (0711)
        st = parent.stat()
        if st.st_uid == entry.pw_uid:
            allowed = st.st_mode & 0o100
        elif st.st_gid == entry.pw_gid:
            allowed = st.st_mode & 0o010
        else:
            allowed = st.st_mode & 0o001
        if not allowed:
            return parent
    return None


def chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def run_checked(argv: list[str], what: str, *, user: str | None = None,
                timeout_s: float = 600.0, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; a one-line EnvironmentProblem naming ``what`` when it
    fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              check=False, preexec_fn=as_user(user) if user else die_with_parent,
                              env=env, cwd="/")
    except FileNotFoundError:
        raise EnvironmentProblem(f"{what}: {argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: {shown(argv)} did not finish in {timeout_s:.0f} s"
                                 ) from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        why = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise EnvironmentProblem(f"{what} failed: {why[:300]}")
    return done


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

    def drop_server(self, pid: int) -> None:
        self.state.servers = [s for s in self.state.servers if s.pid != pid]
        self.state.save()

    def close(self) -> None:
        undo(self.state, self.say)


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def kill_server(pid: int, say: Say, *, wait_s: float = 30.0) -> None:
    """Stop a leftover server process at once (it is a server only if its name says so: a
    pid reused by another program is left alone)."""
    if _process_name(pid) not in SERVER_PROGRAMS:
        return
    name = _process_name(pid)
    say(f"stopping server process {pid} ({name})")
    first = DEATH_SIGNALS.get(name, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, first)
    if first != signal.SIGKILL:  # its own quick way out first, then no more waiting
        end = time.monotonic() + wait_s / 3
        while time.monotonic() < end and _process_name(pid) in SERVER_PROGRAMS:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            if _process_name(pid) in SERVER_PROGRAMS:
                os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + wait_s
    while time.monotonic() < end and _process_name(pid) in SERVER_PROGRAMS:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)


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


# -- one server ----------------------------------------------------------------------------


@dataclass
class ServerProcess:
    """A running server (a child of ssdlab, as its own user)."""

    kind: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    log: Path
    started_at: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int, say: Say) -> float:
        """Stop it with ``sig`` (a clean shutdown), killed after :data:`STOP_TIMEOUT_S`;
        the seconds it took."""
        start = time.monotonic()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                say(f"warning: the {self.kind} server did not stop in {STOP_TIMEOUT_S:.0f} s; "
                    "killing it")
                self.process.kill()
                self.process.wait()
        return time.monotonic() - start

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(ln.strip() for ln in text.splitlines()[-lines:] if ln.strip())


def start_server(kind: str, argv: list[str], user: str, log: Path, cgroup: Path | None,
                 ready: Callable[[], bool]) -> ServerProcess:
    """Start ``argv`` as ``user`` (output to ``log``) and wait until ``ready()``; a
    one-line EnvironmentProblem with the server's last log lines when it does not come up."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        try:
            # a session of its own: Ctrl-C at the terminal reaches ssdlab, which stops the
            # server cleanly, not the server itself
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=as_user(user, cgroup), cwd="/")
        except FileNotFoundError:
            raise EnvironmentProblem(f"{argv[0]} not found") from None
    server = ServerProcess(kind, argv, process, log, time.time())
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if not server.alive():
            raise EnvironmentProblem(f"the {kind} server stopped while starting (exit status "
                                     f"{process.returncode}): {server.log_tail()}")
        if ready():
            return server
        time.sleep(0.1)
    server.stop(signal.SIGKILL, lambda _m: None)
    raise EnvironmentProblem(f"the {kind} server did not start in {START_TIMEOUT_S:.0f} s: "
                             f"{server.log_tail()}")


def socket_answers(path: Path) -> bool:
    """A Unix socket at ``path`` accepts a connection."""
    import socket
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN):
                return False
            raise
    return True


def du_bytes(path: Path) -> int:
    """Bytes allocated under ``path`` (what ``du`` counts), as root sees them."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total
