"""A run on targets of several hosts (``--target h1:/dev/nvme0n1 --target h2:/dev/...``).

The coordinator (this process) reaches each host only through ssh: the user's own ssh
(keys, ``~/.ssh/config``; ``$SSDLAB_SSH_CONFIG`` names another config file) runs
``ssdlab agent`` there (``$SSDLAB_AGENT_COMMAND`` when it is not ``ssdlab`` on the
PATH). Requests (hello, check, purge, truth, probe) are one ssh command each; the fio
server of each host is reached through one long ssh connection per host forwarding a
local Unix socket to the agent's private one (``ssdlab agent serve``). Nothing listens on
the network but the hosts' own sshd.

The run is one run of one target as the suite sees it: every host runs the same job
(the same region of its own drive) at the same time, and the suite gets the aggregate
(engine/aggregate.py); each host's own results are kept per round.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import secrets
import select
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from ssdlab import __version__
from ssdlab.children import die_with_parent
from ssdlab.engine.client import ClientExecutor, ClientHost
from ssdlab.errors import ExitCode, TargetError, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan.results import HostRecord, HostTruth, PurgeStep, TruthAnswer
from ssdlab.plan.suite import SuiteSpec
from ssdlab.run.agent_wire import (
    PROTOCOL,
    CheckAnswer,
    Hello,
    HostError,
    ProbeAnswer,
    Ready,
    Request,
    decode,
)
from ssdlab.run.startsync import StartSync
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.remote_spec import RemoteTarget, is_remote, parse_remote_set
from ssdlab.targets.safety import DestroyData

SSH_CONFIG_ENV = "SSDLAB_SSH_CONFIG"
AGENT_ENV = "SSDLAB_AGENT_COMMAND"
#: the agent's socket directory on every host (run/agent.py SOCKET_ROOT)
REMOTE_SOCKET_ROOT = "/run/ssdlab-agent"
#: a host whose clock is off by more than this (after the request's round trip) is warned of
CLOCK_TOLERANCE_S = 2.0
CALL_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 60.0
#: ssh notices a host that stopped answering after about 3 x 2 s
KEEPALIVE = ("-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3")

T = TypeVar("T")
U = TypeVar("U")


class HostLost(UserError):
    """A host dropped while the run ran: its completed rounds (and every other host's)
    are kept; ``ssdlab resume`` goes on when it is back."""

    exit_code = ExitCode.FAILURE


@dataclass(frozen=True)
class Ssh:
    """How the coordinator runs commands on the hosts."""

    config: str | None = None
    agent: tuple[str, ...] = ("ssdlab",)

    @classmethod
    def from_env(cls) -> Ssh:
        agent = tuple(shlex.split(os.environ.get(AGENT_ENV, "ssdlab"))) or ("ssdlab",)
        return cls(os.environ.get(SSH_CONFIG_ENV) or None, agent)

    def argv(self, host: str, remote: Sequence[str], *extra: str) -> list[str]:
        config = ["-F", self.config] if self.config else []
        return ["ssh", *config, "-o", "BatchMode=yes", *KEEPALIVE, *extra, host,
                shlex.join([*self.agent, "agent", *remote])]

    def call(self, host: str, verb: str, *args: str,
             timeout: float = CALL_TIMEOUT_S) -> JsonObject:
        """``ssdlab agent VERB ARGS`` on ``host``: its JSON answer (:func:`decode` reads
        it as its record), or a HostError naming the host and what went wrong."""
        try:
            done = subprocess.run(self.argv(host, [verb, *args]), capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise HostError(f"host {host} did not answer {verb!r} in {timeout:.0f} s") from None
        except FileNotFoundError:
            raise UserError("ssh is not installed: install openssh-client",
                            ExitCode.ENVIRONMENT) from None
        answer = _last_json(done.stdout)
        if done.returncode != 0 or answer is None or "error" in answer:
            raise _refusal(host, verb, done, answer)
        return answer


def _last_json(text: str) -> JsonObject | None:
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return cast(JsonObject, value)
    return None


def _refusal(host: str, verb: str, done: subprocess.CompletedProcess[str],
             answer: JsonObject | None) -> HostError:
    if answer is not None and "error" in answer:
        err = HostError(f"host {host}: {answer['error']}")
        status = answer.get("exit", int(ExitCode.TARGET))
        with contextlib.suppress(ValueError):
            if isinstance(status, int | float | str):
                err.exit_code = ExitCode(int(status))
        return err
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    why = lines[-1] if lines else (f"exit status {done.returncode}" if done.returncode != 255
                                   else "the connection ended")
    if done.returncode == 255:
        return HostError(f"host {host} cannot be reached by ssh: {why}")
    return HostError(f"host {host}: ssdlab agent {verb} failed: {why}")


def parallel(items: Sequence[T], work: Callable[[T], U]) -> list[U]:
    """``work`` of every item at once (ssh round trips overlap); the first error raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return list(pool.map(work, items))


@dataclass
class RemoteHost:
    """One host of the run, as its agent described it."""

    target: RemoteTarget
    info: TargetInfo
    hello: Hello
    clock_offset_s: float
    tunnel: subprocess.Popen[str] | None = None
    socket: str = ""
    token: str = ""  # the agent's serve while connected
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock_uncertainty_s: float = 0.0

    @property
    def name(self) -> str:
        return self.target.host


def _destroy_flags(destroy_data: DestroyData) -> list[str]:
    if destroy_data is True:
        return ["--destroy-data"]
    if isinstance(destroy_data, str):
        return [f"--destroy-data={destroy_data}"]
    return []


@dataclass
class RemoteSet:
    """The hosts of one run: checked, connected while the run runs, asked for what the
    run needs of its targets."""

    targets: tuple[RemoteTarget, ...]
    ssh: Ssh
    destroy_data: DestroyData
    read_only: bool
    hosts: list[RemoteHost] = field(default_factory=list)
    local_fio: str = ""  # the coordinator's fio version
    #: what a lost host's error adds: where the completed rounds are, how to go on
    lost_hint: str = ""
    _dir: str | None = None
    _starts: StartSync | None = None

    @classmethod
    def checked(cls, spec: str, destroy_data: DestroyData, *, read_only: bool,
                ssh: Ssh | None = None) -> RemoteSet:
        """Every host's agent answers and its guardrails accept its target (a HostError
        naming the first host that refused otherwise). Nothing is written."""
        found = cls(parse_remote_set(spec), ssh or Ssh.from_env(), destroy_data, read_only)
        found.hosts = parallel(found.targets, found._check)
        return found

    def _flags(self) -> list[str]:
        return [*_destroy_flags(self.destroy_data), *(["--read-only"] if self.read_only else [])]

    def _check(self, target: RemoteTarget) -> RemoteHost:
        before = time.time()
        found = self.ssh.call(target.host, "check", "--target", target.path, *self._flags())
        after = time.time()
        said = found.get("hello")
        protocol = said.get("protocol") if isinstance(said, dict) else None
        if protocol != PROTOCOL:
            raise HostError(f"host {target.host}: its ssdlab agent speaks protocol "
                            f"{protocol!r}, this ssdlab speaks {PROTOCOL}: install the "
                            "same ssdlab there")
        checked = decode(target.host, "check", found, CheckAnswer)
        hello = checked.hello
        # the agent read its clock between the two: the offset is known to +- half the wait
        offset = (after if hello.time is None else hello.time) - (before + after) / 2
        host = RemoteHost(target, _target_info(target.host, checked.info), hello, offset)
        host.clock_uncertainty_s = (after - before) / 2
        return host

    # -- what the run records ------------------------------------------------------------
    def spec(self) -> str:
        return ",".join(str(t) for t in self.targets)

    def warnings(self) -> list[str]:
        """Hosts whose ssdlab or fio version, clock or target size differ."""
        fio = self.local_fio
        out: list[str] = []
        for host in self.hosts:
            theirs = host.hello
            if theirs.ssdlab != __version__:
                out.append(f"host {host.name} runs ssdlab {theirs.ssdlab}, the "
                           f"coordinator {__version__}")
            if theirs.fio != fio:
                out.append(f"host {host.name} runs {theirs.fio}, the coordinator {fio}")
            if abs(host.clock_offset_s) > CLOCK_TOLERANCE_S + host.clock_uncertainty_s:
                out.append(f"host {host.name}'s clock is {host.clock_offset_s:+.1f} s off the "
                           "coordinator's: its times are recorded as it reports them")
        sizes = {h.info.capacity_bytes for h in self.hosts}
        if len(sizes) > 1:
            out.append(f"the hosts' targets differ in size ({min(sizes):,} to {max(sizes):,} "
                       "bytes): every host runs on the smallest one's range")
        return out

    def host_records(self) -> list[HostRecord]:
        return [HostRecord(h.name, h.target.path, h.hello.hostname, h.hello.ssdlab,
                           h.hello.fio, round(h.clock_offset_s, 3),
                           cast(JsonObject, h.info.to_dict()), h.hello.host)
                for h in self.hosts]

    def combined_info(self) -> TargetInfo:
        """The run's target as the suite sees it: every host's, the smallest size."""
        infos = [h.info for h in self.hosts]
        kinds = {i.kind for i in infos}
        if len(kinds) > 1:
            raise UserError("the hosts' targets are of different kinds (block devices and "
                            "files): give one kind")
        return TargetInfo(
            path=self.spec(), kind=infos[0].kind, name=f"{len(infos)} hosts",
            device_class=_common([i.device_class for i in infos]) or "mixed",
            model=_common([i.model for i in infos]),
            serial=",".join(str(i.serial) for i in infos) if any(i.serial for i in infos)
            else None,
            firmware=_common([i.firmware for i in infos]),
            capacity_bytes=min(i.capacity_bytes for i in infos),
            logical_sector_bytes=max(i.logical_sector_bytes for i in infos),
            physical_sector_bytes=max(i.physical_sector_bytes for i in infos),
            rotational=None, numa_node=None, scheduler=None,
            discard_max_bytes=min((i.discard_max_bytes or 0) for i in infos) or None,
            details={"transport": "ssh", "hosts": [r.to_json() for r in self.host_records()]},
        )

    # -- while the run runs ------------------------------------------------------------
    @contextlib.contextmanager
    def connected(self) -> Iterator[None]:
        """Each host's fio server, forwarded to a local socket, for the whole run."""
        self._dir = tempfile.mkdtemp(prefix="ssdlab-hosts-")
        os.chmod(self._dir, 0o700)
        try:
            # started here, not in worker threads: a child dies with the thread that
            # started it (PR_SET_PDEATHSIG), and these must live as long as the run
            argvs = [self._spawn(host) for host in self.hosts]
            parallel(list(zip(self.hosts, argvs, strict=True)), _await_ready)
            yield
        finally:
            parallel(self.hosts, _disconnect)
            for host in self.hosts:
                host.tunnel, host.socket, host.token = None, "", ""
            shutil.rmtree(self._dir, ignore_errors=True)

    def _spawn(self, host: RemoteHost) -> list[str]:
        token = f"{os.getpid()}-{secrets.token_hex(6)}"
        local = os.path.join(str(self._dir), f"{host.name}.sock")
        remote = f"{REMOTE_SOCKET_ROOT}/{token}/fio.sock"
        argv = self.ssh.argv(host.name, ["serve", "--token", token, "--target",
                                         host.target.path, *self._flags()],
                             "-o", "ExitOnForwardFailure=yes",
                             "-o", "StreamLocalBindUnlink=yes", "-L", f"{local}:{remote}")
        # its own session (Ctrl-C reaches ssdlab, which ends it), and it dies with ssdlab:
        # the agent then stops its fio server
        tunnel = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True,
                                  preexec_fn=die_with_parent)
        host.tunnel, host.socket, host.token = tunnel, local, token
        return argv

    def executor(self, fio: str = "fio") -> ClientExecutor:
        """fio's client in the sockets' directory, each host's socket by its name there: a
        log a host's job sends back is then written as ``LOG.h1.sock`` (an absolute socket
        path would make it ``LOG./tmp/...``, a directory that does not exist)."""
        hosts = [ClientHost(h.name, os.path.basename(h.socket), h.target.path)
                 for h in self.hosts]
        return ClientExecutor(hosts, self.spec(), fio=fio, read_only=self.read_only,
                              stop_check=self.dropped, starts=self.start_sync(),
                              cwd=self._dir)

    def start_sync(self) -> StartSync:
        """The run's round instants (one for the whole run: its lead and gap adapt)."""
        if self._starts is None:
            by_name = {h.name: h for h in self.hosts}
            self._starts = StartSync(
                [h.name for h in self.hosts],
                lambda name, verb, timeout: self.ask(by_name[name], verb, timeout),
                lambda work: parallel([h.name for h in self.hosts], work),
                lambda name: f"{REMOTE_SOCKET_ROOT}/{by_name[name].token}")
        return self._starts

    def ask(self, host: RemoteHost, verb: str, timeout: float = CALL_TIMEOUT_S,
            **args: str) -> JsonObject:
        """A request to ``host``'s agent: through its serving connection while the run is
        connected (no new ssh, no new process), else by a command of its own; its answer
        (:func:`decode` reads it as its record)."""
        if host.tunnel is None:
            flags = [a for k, v in args.items() for a in (f"--{k}", v)]
            extra = self._flags() if verb == "purge" else []
            return self.ssh.call(host.name, verb, "--target", host.target.path, *flags,
                                 *extra, timeout=timeout)
        with host.lock:
            return _request(host, Request(verb, host.target.path, **args), timeout)

    def dropped(self) -> str | None:
        """The first host whose connection ended, said in one line; None while all hold."""
        for host in self.hosts:
            if host.tunnel is not None and host.tunnel.poll() is not None:
                return f"host {host.name} dropped: its ssh connection ended"
        return None

    def lost(self) -> str | None:
        """After a failure: the first host that dropped or no longer answers (or whose
        target no longer reads), or None."""
        dropped = self.dropped()
        if dropped is not None:
            return dropped
        for host in self.hosts:
            try:
                lost = decode(host.name, "probe", self.ask(host, "probe", timeout=30),
                              ProbeAnswer).lost
            except HostError as err:
                return str(err)
            if lost:
                return f"host {host.name}: {lost}"
        return None

    def purge(self, method: str, offset: int, size: int) -> list[tuple[str, PurgeStep]]:
        """Every host's purge of the range at once: each host and its outcome."""
        def one(host: RemoteHost) -> tuple[str, PurgeStep]:
            found = self.ask(host, "purge", 3600, method=method, offset=str(offset),
                             size=str(size))
            return host.name, decode(host.name, "purge", found, PurgeStep)
        return self._or_lost(lambda: parallel(self.hosts, one))

    def truth(self) -> list[HostTruth]:
        """Every host's ground truth, as the run stores it."""
        def one(host: RemoteHost) -> HostTruth:
            found = decode(host.name, "truth", self.ask(host, "truth"), TruthAnswer)
            return HostTruth(host.name, found)
        return self._or_lost(lambda: parallel(self.hosts, one))

    def _or_lost(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except HostError as err:
            raise HostLost(f"{err}{self.lost_hint}") from None


def _common(values: Sequence[str | None]) -> str | None:
    return values[0] if len(set(values)) == 1 else None


def _target_info(host: str, facts: JsonObject) -> TargetInfo:
    """The target as its host identified it (facts kept as they were read there)."""
    try:
        return TargetInfo(**cast(dict[str, Any], facts))
    except TypeError as err:
        raise HostError(f"host {host}: a malformed answer (check answer.info: {err}): is "
                        "the same ssdlab installed there?") from None


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``proc`` prints, or "" when it exits or the time runs out."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            return ""
    return ""


def _await_ready(started: tuple[RemoteHost, list[str]]) -> None:
    """The host's agent says its fio server is ready, or the run stops (one line)."""
    host, argv = started
    tunnel = host.tunnel
    assert tunnel is not None
    ready = _read_line(tunnel, READY_TIMEOUT_S)
    answer = _last_json(ready) if ready else None
    if answer is None or not answer.get("ready"):
        _disconnect(host, close_streams=False)  # what it said is read first
        err = tunnel.stderr.read() if tunnel.stderr else ""
        _close_streams(tunnel)
        done = subprocess.CompletedProcess(argv, tunnel.returncode or 1, ready, err)
        raise _refusal(host.name, "serve", done, answer)
    decode(host.name, "serve", answer, Ready)


def _request(host: RemoteHost, request: Request, timeout: float) -> JsonObject:
    """One request line to the host's serving agent and its answer line."""
    tunnel = host.tunnel
    assert tunnel is not None and tunnel.stdin is not None
    try:
        tunnel.stdin.write(json.dumps(request.to_json()) + "\n")
        tunnel.stdin.flush()
    except OSError:
        raise HostError(f"host {host.name} dropped: its ssh connection ended") from None
    line = _read_line(tunnel, timeout)
    answer = _last_json(line) if line else None
    if answer is None:
        why = "its ssh connection ended" if tunnel.poll() is not None else (
            f"no answer to {request.verb!r} in {timeout:.0f} s")
        raise HostError(f"host {host.name} dropped: {why}")
    if "error" in answer:
        raise HostError(f"host {host.name}: {answer['error']}")
    return answer


def _disconnect(host: RemoteHost, *, close_streams: bool = True) -> None:
    """End the host's connection: its agent stops its fio server when stdin closes."""
    tunnel = host.tunnel
    if tunnel is None:
        return
    with contextlib.suppress(OSError):
        if tunnel.stdin is not None:
            tunnel.stdin.close()
    try:
        tunnel.wait(timeout=10)
    except subprocess.TimeoutExpired:
        tunnel.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            tunnel.wait(timeout=5)
        if tunnel.poll() is None:
            tunnel.kill()
            tunnel.wait()
    if close_streams:
        _close_streams(tunnel)


def _close_streams(tunnel: subprocess.Popen[str]) -> None:
    for stream in (tunnel.stdout, tunnel.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def check_suite(spec: SuiteSpec[Any], target: str | None, remote: Sequence[str],
                directory: str | None = None) -> None:
    """A suite that cannot run on targets of other hosts (its spec is not ``remote``)
    refuses them, and a ``--dir`` of another host (``HOST:/path``): one line, why (its
    spec's ``local_only``), and ``remote``: the suites that can."""
    if directory is not None and is_remote(directory) and not spec.remote:
        why = spec.local_only or "--dir is a directory of this host"
        raise UserError(f"`ssdlab run {spec.name}`: --dir {directory} names a directory on "
                        f"another host; {why} (docs/hosts.md)")
    if target is None or spec.remote or not is_remote(target.split(",")[0]):
        return
    why = f": {spec.local_only}" if spec.local_only else ""
    raise UserError(f"`ssdlab run {spec.name}` runs on targets of this host only{why}; "
                    f"targets on other hosts ({target}) are for: {', '.join(remote)} "
                    "(docs/hosts.md)")


def prepare_remote(spec: str, destroy_data: DestroyData, *,
                   read_only: bool) -> tuple[TargetInfo, RemoteSet]:
    """Check every host's target (their own guardrails): the combined target and the hosts.
    A HostError (one line, naming the host) when one refuses or cannot be reached."""
    found = RemoteSet.checked(spec, destroy_data, read_only=read_only)
    if found.hosts and any(h.info.kind == "file" and h.info.details.get("planned")
                           for h in found.hosts):
        raise TargetError("a target on another host must exist")
    return found.combined_info(), found
