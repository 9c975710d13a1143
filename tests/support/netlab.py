"""A lab of SSH "hosts" on this one machine, for tests of multi-host runs.

ssdlab's multi-host runs have a coordinator in the root network namespace that reaches an
agent on each host only through SSH. :class:`NetLab` builds that here: each host is a
network namespace joined to one bridge in the root namespace by its own veth pair, running
Debian's sshd on its own address (port 22 only, its own ed25519 host key, keys only, root
by key only, no PAM); a client key authorized on every host (in the lab's own
authorized_keys file, never /root/.ssh); and an ``ssh_config`` with ``Host h1``, ``h2``, ...
so that ``ssh -F <lab.ssh_config> h1 CMD`` works from the root namespace with no prompt::

    with NetLab(3) as lab:
        lab.ssh("h1", "fio", "--version")         # ssh -F lab.ssh_config h1 fio --version
        lab.exec("h2", "ip", "-o", "addr")         # ip netns exec <h2's namespace> ip -o addr
        lab.kill_sshd("h3"); lab.start_sshd("h3")  # the host drops and comes back

The optional stranger is one more namespace on the same bridge (it reaches every host
directly, no forwarding) with no key authorized anywhere. Its commands
(:meth:`NetLab.exec_stranger`) run with an empty private tmpfs over the directory of the
lab's client key, so it cannot borrow that key either; it can use
``lab.stranger_ssh_config`` (its own, unauthorized, key). It is a stranger on the network
only: being root on the same machine, it could still enter a host's namespace.

Names carry the pid: ``sl<pid><i>h1``, ... the host namespaces (``<i>`` a letter per lab
in this process), ``sl<pid><i>s`` the stranger's, ``sl<pid><i>br`` the bridge,
``sl<pid><i>v1``, ..., ``sl<pid><i>vs`` the root ends of the veth pairs (``eth0`` inside),
``/tmp/sl<pid><i>-netlab-*`` the lab's directory. Addresses: a /24 of 10.231.0.0/16 that no
address or route of the root namespace overlaps (chosen under a lock, so concurrent labs
differ): .1 the bridge, .11, .12, ... the hosts, .250 the stranger. No sysctl is changed.

Hosts have their own network only: they share this machine's filesystem (a path such as
/tmp/x is the same file on every host), processes and devices, so tests keep per-host paths
apart. Unix sockets forward as on real hosts: ``ssh -F <config> -N -L /tmp/y/local.sock:
/tmp/x/fio.sock h1`` with ``fio --server=sock:/tmp/x/fio.sock`` started in h1 lets ``fio
--client=sock:/tmp/y/local.sock`` run a job on h1 (checked by hand with fio 3.33 and
OpenSSH 9.2). ssh leaves the local socket file behind when it ends, and a second ``-L`` to
the same path then fails ("Address already in use") unless ``-o StreamLocalBindUnlink=yes``.

Setup takes about 0.35 s for 1 host, 0.5-0.8 s for 3 hosts and the stranger and 1.3 s for 8
on 2 cores (under some load): namespaces and links about 0.05 s, ssh-keygen 0.02 s, the
rest is sshd starting and the first ``ssh hN true`` (one login takes about 0.3 s here; the
hosts are polled in parallel). Teardown takes 0.15-0.2 s (0.4 s for 8 hosts).

Teardown (at the context's exit, after an exception too) kills every process in the
namespaces, children before their parents so that each is reaped by its parent (PID 1 of a
container may reap orphans late or never: they would show as ``<defunct>``), then deletes
the veths, namespaces and bridge and removes the lab's directory. :func:`cleanup_stale`
removes what a killed earlier run left (names whose pid is dead); every new lab calls it
first. The lab creates /run/sshd (sshd's privilege separation directory) when it is missing
and leaves it. A client whose login fails (the stranger) leaves an orphaned ``[sshd]
<defunct>`` that is sshd's own doing; where PID 1 reaps lazily (this VM) it shows in ``ps``
for a second or two.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SSHD = Path("/usr/sbin/sshd")
SFTP_SERVER = Path("/usr/lib/openssh/sftp-server")
PRIVSEP_DIR = Path("/run/sshd")
LAB_RANGE = ipaddress.IPv4Network("10.231.0.0/16")
LOCK_FILE = Path("/run/lock/ssdlab-netlab.lock")
MAX_HOSTS = 99
HOST_OCTET = 10  # host N gets .(10 + N)
STRANGER_OCTET = 250
READY_TIMEOUT_S = 30.0  # a login on a loaded machine can take over 5 s
KILL_TIMEOUT_S = 10.0
REAP_TIMEOUT_S = 1.0
TCP_END_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 60.0
#: TCP states in which the peer may not know yet that the connection ended
_UNFINISHED_TCP = ("established", "syn-sent", "syn-recv", "fin-wait-1", "closing", "last-ack")
#: a name this module made: namespaces, links and the lab directory's prefix
_OUR_NAME = re.compile(r"^sl(\d+)(?:[a-z](?:h\d+|s|br|v\d+|vs)?|probe)$")
_INSTANCES = itertools.count()


@dataclass(frozen=True)
class Host:
    """One namespace of the lab."""

    alias: str  # its Host in ssh_config: "h1", ... ("stranger" for the stranger)
    netns: str  # the network namespace
    address: str  # its address, on eth0 inside the namespace
    veth: str  # the root namespace's end of its veth pair, a port of the lab's bridge
    dir: Path  # its files: sshd_config, host key, sshd.pid, sshd.log (stranger: its key)



#: the start of every command a host of the lab runs (``$KEEP``: mount points it keeps).
#: ``ip netns exec`` gives the command a mount namespace of its own, a copy of every mount
#: of the moment, and on a machine whose mounts are private (no systemd: this one) the
#: copy outlives their unmounting in the root namespace: a test running beside the lab
#: (make test runs two files at once) that mounts a file system on a loop or zram device
#: and unmounts it finds the device still busy (wipefs, mkfs, an exclusive open: "in use by
#: another program") for as long as the host's sshd lives. So the copies of file systems on
#: the devices tests make are dropped (lazily) before the command runs, but for those the
#: test gave the lab to keep (``NetLab(keep=...)``: a host that has a drive mounted).
DROP_COPIES = (
    'findmnt -rn -o SOURCE,TARGET | while read -r source target; do '
    'case " $KEEP " in *" $target "*) continue;; esac; '
    'case "$source" in /dev/loop*|/dev/zram*) umount -l "$target" 2>/dev/null;; esac; '
    'done; exec "$@"')


def _run(*argv: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}: {result.stderr}")
    return result


def _ip(*args: str) -> str:
    return _run("ip", *args).stdout


def _ip_quiet(*args: str) -> None:
    """``ip ARGS``, whatever it says (teardown of something that may be gone already)."""
    _run("ip", *args, check=False)


@functools.cache
def netlab_unavailable() -> str | None:
    """Why a lab cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root"
    if not SSHD.exists():
        return f"{SSHD} is missing (apt-get install openssh-server)"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 openssh-client)"
    if _root_locked():
        return "root's password is locked ('!' in /etc/shadow): sshd without PAM refuses root"
    return _netns_problem()


def _root_locked() -> bool:
    for line in Path("/etc/shadow").read_text().splitlines():
        if line.startswith("root:"):
            return line.split(":")[1].startswith("!")
    return False


def _netns_problem() -> str | None:
    """Why network namespaces, veth pairs or bridges do not work here, or None."""
    probe = f"sl{os.getpid()}probe"
    steps = [
        ("netns", "add", probe),
        ("-n", probe, "link", "add", "name", "probe0", "type", "veth", "peer", "name", "probe1"),
        ("-n", probe, "link", "add", "name", "probe2", "type", "bridge"),
    ]
    try:
        for step in steps:
            result = _run("ip", *step, check=False)
            if result.returncode != 0:
                return f"ip {' '.join(step)} fails: {result.stderr.strip()}"
        return None
    finally:
        _ip_quiet("netns", "del", probe)


# --- processes in a namespace -------------------------------------------------------------


def _netns_pids(netns: str) -> list[int]:
    """The live processes in ``netns`` (``ip netns pids`` leaves zombies out)."""
    result = _run("ip", "netns", "pids", netns, check=False)
    return [int(word) for word in result.stdout.split()]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _leaves(pids: list[int]) -> list[int]:
    """The processes of ``pids`` that have no child among them."""
    parents = {stat[1] for stat in map(_stat, pids) if stat is not None}
    return [pid for pid in pids if pid not in parents] or pids


def _await_reaped(pid: int) -> None:
    """Wait (a little) until a killed process is reaped by its parent: it is gone, or a
    zombie of this process (its own Popen reaps it) or of PID 1."""
    deadline = time.monotonic() + REAP_TIMEOUT_S
    while (stat := _stat(pid)) is not None and time.monotonic() < deadline:
        if stat[0] == "Z" and stat[1] in (1, os.getpid()):
            return
        time.sleep(0.005)


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _kill_all_in(netns: str, own: Mapping[int, subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process in ``netns``, children before their parents (each parent reaps
    its child before it dies itself); ``own`` are this lab's children, reaped here."""
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while pids := _netns_pids(netns):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} in namespace {netns} outlive SIGKILL")
        leaves = _leaves(pids)
        for pid in leaves:
            _sigkill(pid)
        for pid in leaves:
            if pid in own:
                own[pid].wait(timeout=KILL_TIMEOUT_S)
            else:
                _await_reaped(pid)


def _await_tcp_ends(netns: str) -> None:
    """Wait (a little) until every TCP connection of ``netns`` has had its end
    acknowledged: the kernel may still be sending a dead process's last data and FIN, and a
    client outside whose FIN is lost with the link hangs instead of seeing the end."""
    states = [arg for state in _UNFINISHED_TCP for arg in ("state", state)]
    deadline = time.monotonic() + TCP_END_TIMEOUT_S
    while _run("ss", "-H", "-t", "-n", "-N", netns, *states, check=False).stdout.strip():
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


# --- what a killed earlier run left ---------------------------------------------------------


def _is_stale(name: str) -> bool:
    """True for a name this module made in a process that is gone."""
    match = _OUR_NAME.match(name)
    if match is None:
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _netns_names() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _link_names() -> list[str]:
    """Links of the root namespace, veths before bridges (a veth may be a bridge's port)."""
    links = json.loads(_ip("-j", "link", "show"))
    names = [str(link["ifname"]) for link in links]
    return sorted(names, key=lambda name: name.endswith("br"))


def cleanup_stale() -> list[str]:
    """Remove the links, namespaces and directories of labs whose process is dead (a test
    run killed before its teardown); return what was removed."""
    removed = [name for name in _link_names() if _is_stale(name)]
    for name in removed:
        _ip_quiet("link", "del", name)
    for name in filter(_is_stale, _netns_names()):
        _kill_all_in(name, {})
        _ip_quiet("netns", "del", name)
        removed.append(name)
    for path in Path(tempfile.gettempdir()).glob("sl*-netlab-*"):
        if _is_stale(path.name.split("-")[0]):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


# --- addresses -----------------------------------------------------------------------------


def _used_networks() -> list[ipaddress.IPv4Network]:
    """The networks of every IPv4 address and route of the root namespace (but default)."""
    used = []
    for link in json.loads(_ip("-j", "-4", "addr", "show")):
        for info in link.get("addr_info", []):
            used.append(ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}").network)
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all")):
        if route.get("dst", "default") != "default":
            used.append(ipaddress.IPv4Network(route["dst"], strict=False))
    return used


def _free_subnet(seed: int) -> ipaddress.IPv4Network:
    """A /24 of LAB_RANGE that nothing in the root namespace uses, the search starting at
    ``seed`` (so that concurrent labs rarely contend)."""
    used = _used_networks()
    candidates = list(LAB_RANGE.subnets(new_prefix=24))
    for k in range(len(candidates)):
        net = candidates[(seed + k) % len(candidates)]
        if not any(net.overlaps(other) for other in used):
            return net
    raise RuntimeError(f"every /24 of {LAB_RANGE} is in use")


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """Held from choosing a subnet until the bridge has its address (then others see it)."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- keys and configuration files ------------------------------------------------------------


def _keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair without passphrase at ``path``; its public key line."""
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    return Path(f"{path}.pub").read_text().strip()


def _write_private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


def _sshd_config(host: Host, authorized_keys: Path) -> str:
    return f"""\
ListenAddress {host.address}:22
HostKey {host.dir}/ssh_host_ed25519_key
PidFile {host.dir}/sshd.pid
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowStreamLocalForwarding yes
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
PrintLastLog no
Subsystem sftp {SFTP_SERVER}
LogLevel VERBOSE
"""


def _client_config(hosts: Sequence[Host], identity: Path, known_hosts: Path) -> str:
    aliases = "".join(f"Host {host.alias}\n  HostName {host.address}\n" for host in hosts)
    return f"""\
{aliases}
Host *
  User root
  Port 22
  IdentityFile {identity}
  IdentitiesOnly yes
  IdentityAgent none
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  UserKnownHostsFile {known_hosts}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  ConnectTimeout 5
  ControlMaster no
  ControlPath none
  LogLevel ERROR
"""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"({path}: {err})"


# --- the lab ---------------------------------------------------------------------------------


class NetLab:
    """``n_hosts`` SSH hosts (namespaces ``h1``...) and, with ``stranger``, a namespace
    without any authorized key; a context manager that leaves nothing behind."""

    def __init__(self, n_hosts: int, *, stranger: bool = True,
                 keep: Sequence[Path] = ()) -> None:
        if not 1 <= n_hosts <= MAX_HOSTS:
            raise ValueError(f"n_hosts must be 1..{MAX_HOSTS}, not {n_hosts}")
        self.n_hosts = n_hosts
        self.with_stranger = stranger
        #: mount points the hosts keep their copies of (:data:`DROP_COPIES`)
        self.keep = " ".join(str(p) for p in keep)
        self.instance = next(_INSTANCES)
        self.prefix = f"sl{os.getpid()}{chr(ord('a') + self.instance % 26)}"
        self.dir = Path()
        self.subnet = LAB_RANGE
        self.hosts: list[Host] = []
        self._stranger: Host | None = None
        self._sshd: dict[str, subprocess.Popen[bytes]] = {}
        self._stack = contextlib.ExitStack()

    # context

    def __enter__(self) -> NetLab:
        reason = netlab_unavailable()
        if reason is not None:
            pytest.skip(reason)
        cleanup_stale()
        try:
            self._setup()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _setup(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-netlab-"))
        self._stack.callback(shutil.rmtree, self.dir, ignore_errors=True)
        self._make_network()
        self._write_keys_and_configs()
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        for host in self.hosts:
            self._spawn_sshd(host)
        with ThreadPoolExecutor(len(self.hosts)) as pool:  # a login takes about 0.3 s
            for done in [pool.submit(self._wait_ready, host) for host in self.hosts]:
                done.result()

    # public API

    @property
    def ssh_config(self) -> Path:
        """``ssh -F`` this: Host h1, h2, ... with the authorized client key."""
        return self.dir / "ssh_config"

    @property
    def stranger_ssh_config(self) -> Path:
        """The same hosts with the stranger's own key, authorized nowhere."""
        return self.stranger.dir / "ssh_config"

    @property
    def stranger(self) -> Host:
        if self._stranger is None:
            raise RuntimeError("this lab has no stranger (NetLab(..., stranger=True))")
        return self._stranger

    def host(self, host: Host | str) -> Host:
        """A host by its alias ("h1") or itself."""
        if isinstance(host, Host):
            return host
        for candidate in self.hosts:
            if candidate.alias == host:
                return candidate
        raise KeyError(f"no host {host!r} in this lab ({', '.join(h.alias for h in self.hosts)})")

    def argv(self, host: Host | str, *cmd: str) -> list[str]:
        """``cmd`` run inside the host's namespace (for Popen), without copies of other
        tests' file systems (:data:`DROP_COPIES`)."""
        return ["ip", "netns", "exec", self.host(host).netns, "env", f"KEEP={self.keep}",
                "sh", "-c", DROP_COPIES, "netlab", *cmd]

    def exec(
        self, host: Host | str, *cmd: str, check: bool = False, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` inside the host's namespace (not through SSH)."""
        return _run(*self.argv(host, *cmd), check=check, timeout=timeout)

    def ssh_argv(self, host: Host | str, *cmd: str, options: Sequence[str] = ()) -> list[str]:
        """``ssh -F <ssh_config> [-o OPTION]... ALIAS CMD...`` (the remote shell parses
        ``cmd`` joined by spaces, as ssh always does)."""
        opts = [arg for option in options for arg in ("-o", option)]
        return ["ssh", "-F", str(self.ssh_config), *opts, self.host(host).alias, *cmd]

    def ssh(
        self,
        host: Host | str,
        *cmd: str,
        options: Sequence[str] = (),
        check: bool = False,
        timeout: float = COMMAND_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` on the host through SSH, from the root namespace."""
        return _run(*self.ssh_argv(host, *cmd, options=options), check=check, timeout=timeout)

    def stranger_argv(self, *cmd: str) -> list[str]:
        """``cmd`` run in the stranger's namespace, the lab's client key hidden from it."""
        hide = 'mount -t tmpfs -o size=64k,mode=0700 netlab-hidden "$0" && exec "$@"'
        client = str(self.dir / "client")
        return ["ip", "netns", "exec", self.stranger.netns, "env", f"KEEP={self.keep}",
                "sh", "-c", DROP_COPIES, "netlab", "sh", "-c", hide, client, *cmd]

    def exec_stranger(
        self, *cmd: str, check: bool = False, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` in the stranger's namespace (see :meth:`stranger_argv`)."""
        return _run(*self.stranger_argv(*cmd), check=check, timeout=timeout)

    def kill_sshd(self, host: Host | str, *, listener_only: bool = False) -> None:
        """The host drops: every process in its namespace is killed (sshd, its sessions,
        whatever they started). With ``listener_only`` only the listening sshd dies and
        open sessions go on (their sshd processes become orphans: where PID 1 reaps late
        or never, each shows as ``<defunct>`` after it ends)."""
        host = self.host(host)
        proc = self._sshd.pop(host.alias, None)
        if listener_only:
            if proc is not None:
                proc.kill()
                proc.wait(timeout=KILL_TIMEOUT_S)
            return
        _kill_all_in(host.netns, {proc.pid: proc} if proc is not None else {})

    def start_sshd(self, host: Host | str, *, wait: bool = True) -> None:
        """The host comes back: start its sshd (again) and, with ``wait``, wait until it
        accepts the client key."""
        host = self.host(host)
        running = self._sshd.get(host.alias)
        if running is not None and running.poll() is None:
            raise RuntimeError(f"sshd of {host.alias} is running already (pid {running.pid})")
        self._spawn_sshd(host)
        if wait:
            self._wait_ready(host)

    def block(self, host: Host | str) -> None:
        """Cut the host off the network (its bridge port down): packets are lost, open
        connections hang rather than fail."""
        _ip("link", "set", self.host(host).veth, "down")

    def unblock(self, host: Host | str) -> None:
        _ip("link", "set", self.host(host).veth, "up")

    # building

    def _make_network(self) -> None:
        bridge = f"{self.prefix}br"
        with _subnet_lock():
            self.subnet = _free_subnet(os.getpid() * 26 + self.instance)
            # an address of its own: else it takes its ports' lowest, and changes when a port
            # goes, and then the hosts send to a stale address (their connections hang)
            mac = "02:" + ":".join(f"{byte:02x}" for byte in os.urandom(5))
            _ip("link", "add", "name", bridge, "address", mac, "type", "bridge")
            self._stack.callback(_ip_quiet, "link", "del", bridge)
            _ip("addr", "add", f"{self.subnet[1]}/{self.subnet.prefixlen}", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for n in range(1, self.n_hosts + 1):
            self.hosts.append(self._add_netns(f"h{n}", f"h{n}", f"v{n}", HOST_OCTET + n))
        if self.with_stranger:
            self._stranger = self._add_netns("stranger", "s", "vs", STRANGER_OCTET)

    def _add_netns(self, alias: str, suffix: str, veth: str, octet: int) -> Host:
        host = Host(
            alias=alias,
            netns=self.prefix + suffix,
            address=str(self.subnet[octet]),
            veth=self.prefix + veth,
            dir=self.dir / alias,
        )
        host.dir.mkdir(mode=0o700)
        _ip("netns", "add", host.netns)
        self._stack.callback(self._drop_netns, host)
        peer = ("peer", "name", "eth0", "netns", host.netns)
        _ip("link", "add", "name", host.veth, "type", "veth", *peer)
        _ip("link", "set", host.veth, "master", f"{self.prefix}br", "up")
        inside = ("-n", host.netns)
        _ip(*inside, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "link", "set", "eth0", "up")
        return host

    def _drop_netns(self, host: Host) -> None:
        """Kill its processes with its link up and wait until their connections have
        ended (so that their peers see them close), then delete its veth pair and
        namespace."""
        _ip_quiet("link", "set", host.veth, "up")  # unblocked
        proc = self._sshd.pop(host.alias, None)
        _kill_all_in(host.netns, {proc.pid: proc} if proc is not None else {})
        if proc is not None and proc.poll() is None:  # not in the namespace any more?
            proc.kill()
            proc.wait(timeout=KILL_TIMEOUT_S)
        _await_tcp_ends(host.netns)
        _ip_quiet("link", "del", host.veth)
        _ip_quiet("netns", "del", host.netns)

    def _write_keys_and_configs(self) -> None:
        client = self.dir / "client"
        client.mkdir(mode=0o700)
        authorized = self.dir / "authorized_keys"
        _write_private(authorized, _keygen(client / "id_ed25519", f"netlab@{self.prefix}") + "\n")
        known = []
        for host in self.hosts:
            public = _keygen(host.dir / "ssh_host_ed25519_key", f"{host.alias}@{self.prefix}")
            known.append(f"{host.address} {' '.join(public.split()[:2])}\n")
            _write_private(host.dir / "sshd_config", _sshd_config(host, authorized))
        known_hosts = self.dir / "known_hosts"
        _write_private(known_hosts, "".join(known))
        config = _client_config(self.hosts, client / "id_ed25519", known_hosts)
        _write_private(self.ssh_config, config)
        if self._stranger is not None:
            own = self._stranger.dir / "id_ed25519"
            _keygen(own, f"stranger@{self.prefix}")
            config = _client_config(self.hosts, own, known_hosts)
            _write_private(self.stranger_ssh_config, config)

    def _spawn_sshd(self, host: Host) -> None:
        log = host.dir / "sshd.log"
        argv = [str(SSHD), "-D", "-f", str(host.dir / "sshd_config"), "-E", str(log)]
        with log.open("ab") as out:
            self._sshd[host.alias] = subprocess.Popen(
                self.argv(host, *argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )

    def _wait_ready(self, host: Host) -> None:
        """Until ``ssh hN true`` succeeds; a clear error with sshd's log if it never does."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        proc = self._sshd[host.alias]
        while True:
            if proc.poll() is not None:
                raise RuntimeError(self._not_ready(host, f"sshd exited with {proc.returncode}"))
            try:
                result = self.ssh(host, "true", options=["ConnectTimeout=1"], timeout=5.0)
            except subprocess.TimeoutExpired:  # a loaded machine: try again until the deadline
                result = subprocess.CompletedProcess(["ssh"], 255, "", "no answer in 5 s")
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                why = f"no login within {READY_TIMEOUT_S:g} s: {result.stderr.strip()}"
                raise RuntimeError(self._not_ready(host, why))
            time.sleep(0.02)

    def _not_ready(self, host: Host, why: str) -> str:
        log = host.dir / "sshd.log"
        return f"sshd of {host.alias} ({host.netns}, {host.address}): {why}\n{log}:\n{_tail(log)}"


@pytest.fixture(name="netlab_hosts")
def netlab_hosts_fixture(request: pytest.FixtureRequest) -> Iterator[NetLab]:
    """A :class:`NetLab` of 3 hosts and the stranger, torn down after the test. Another
    number of hosts: ``@pytest.mark.parametrize("netlab_hosts", [2], indirect=True)``.
    Use it with ``from tests.support.netlab import netlab_hosts_fixture  # noqa: F401``."""
    param: Any = getattr(request, "param", 3)
    with NetLab(int(param)) as lab:
        yield lab
