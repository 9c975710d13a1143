"""A ``--dir`` on each host of a run on several hosts (``--dir h1:/mnt/share,h2:/srv/x``,
docs/hosts.md): the presets that take a directory run there through the agents.

Before the run nothing is written: each host's agent checks its directory (``ssdlab agent
dir``: a directory, writable, not a system tree, room for the test file; its file system
and, on a network share, what network.py reads of it). When the run starts, each agent
makes a work directory in it (``ssdlab-work-XXXXXXXX``) with ssdlab's test file there
(``ssdlab agent workdir``); the run is then one on those test files, like any run on
targets of several hosts (run/remote.py: checked and served by the agents). When it ends
(also after an error or Ctrl-C) each agent removes its work directory (``ssdlab agent
rmwork``, which removes nothing but a work directory of ssdlab's holding only files).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ssdlab.errors import TargetError, UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.run.agent_wire import PROTOCOL, Hello, HostError, decode
from ssdlab.run.remote import RemoteHost, RemoteSet, Ssh, parallel
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.remote_spec import RemoteTarget, parse_remote_set
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir
from ssdlab.units import format_bytes


@dataclass(frozen=True)
class DirAnswer(Record):
    """A directory this host's checks accept: its facts (DirInfo) and who the host is."""

    info: JsonObject
    hello: Hello


@dataclass(frozen=True)
class WorkAnswer(Record):
    """A work directory made (with the test file at ``path``) or removed."""

    path: str
    removed: bool = False


# -- the agent's side -----------------------------------------------------------------------


def check_dir(path: str, needed_bytes: int, hello: Hello) -> DirAnswer:
    """The directory as this host sees it, with room for ``needed_bytes`` (nothing is
    written); TargetError (one line) otherwise."""
    found = _room(describe_dir(path), needed_bytes)
    return DirAnswer(_dir_facts(found), hello)


def _room(found: DirInfo, needed_bytes: int) -> DirInfo:
    if needed_bytes > found.free_bytes:
        raise TargetError(f"--dir {found.path}: {format_bytes(needed_bytes)} needed, "
                          f"{format_bytes(found.free_bytes)} free")
    return found


def _dir_facts(found: DirInfo) -> JsonObject:
    facts: JsonObject = {k: v for k, v in found.to_dict().items()
                         if isinstance(v, str | int | bool | dict | None)}
    return facts


def make_work(path: str, needed_bytes: int, size_bytes: int, name: str) -> WorkAnswer:
    """A work directory in ``path`` with ssdlab's test file ``name`` of ``size_bytes``
    in it (made fully allocated, as any ssdlab test file): the file's path."""
    if os.sep in name or name.startswith("."):
        raise UserError(f"bad test file name {name!r}")
    work = WorkDir(_room(describe_dir(path), needed_bytes), needed_bytes)
    try:
        return WorkAnswer(create_file_target(str(work.path / name), size_bytes).path)
    except BaseException:
        work.remove()
        raise


def remove_work(path: str) -> WorkAnswer:
    """Remove a work directory ssdlab made (its name, only files in it); anything else is
    refused (one line) and left."""
    real = os.path.realpath(path)
    if not os.path.basename(real).startswith(WORK_PREFIX) or not os.path.isdir(real):
        raise TargetError(f"refusing to remove {path}: not a work directory of ssdlab's")
    with os.scandir(real) as entries:
        only_files = all(entry.is_file(follow_symlinks=False) for entry in entries)
    if not only_files:
        raise TargetError(f"refusing to remove {path}: it holds more than files")
    shutil.rmtree(real)
    return WorkAnswer(real, removed=not os.path.lexists(real))


# -- the coordinator's side ------------------------------------------------------------------


@dataclass
class HostDirs:
    """Each host's directory of a run, checked; once the run started, each host's work
    directory (the hosts' targets are then their test files)."""

    remote: RemoteSet
    dirs: tuple[RemoteTarget, ...]
    size_bytes: int
    needed_bytes: int
    infos: dict[str, DirInfo] = dataclasses.field(default_factory=dict)

    @property
    def spec(self) -> str:
        return ",".join(str(d) for d in self.dirs)

    @contextmanager
    def work(self, name: str, cleaned: Callable[[str, str, bool], None]) -> Iterator[None]:
        """Each host's work directory and test file for as long as the run runs (the
        hosts' targets are the test files meanwhile), removed afterwards; each removal
        told to ``cleaned(host, work directory, removed)``."""
        remote = self.remote
        made: dict[str, str] = {}

        def make(target: RemoteTarget) -> None:
            found = remote.ssh.call(target.host, "workdir", "--dir", target.path, "--size",
                                    str(self.size_bytes), "--needed", str(self.needed_bytes),
                                    "--file", name)
            made[target.host] = decode(target.host, "workdir", found, WorkAnswer).path

        try:
            parallel(self.dirs, make)
            for host in remote.hosts:
                host.target = RemoteTarget(host.name, made[host.name])
            remote.targets = tuple(h.target for h in remote.hosts)
            yield
        finally:
            for host, target in zip(remote.hosts, self.dirs, strict=True):
                host.target = target
            remote.targets = self.dirs
            for who, work, gone in parallel(sorted(made.items()), self._remove):
                cleaned(who, work, gone)

    def _remove(self, made: tuple[str, str]) -> tuple[str, str, bool]:
        host, file = made
        work = os.path.dirname(file)
        try:
            found = self.remote.ssh.call(host, "rmwork", "--dir", work)
            return host, work, decode(host, "rmwork", found, WorkAnswer).removed
        except HostError:
            return host, work, False


def checked_dirs(spec: str, size_bytes: int, needed_bytes: int, *,
                 ssh: Ssh | None = None) -> HostDirs:
    """Every host's directory checked by its agent (a HostError naming the first host
    that refused); nothing is written."""
    dirs = parse_remote_set(spec)
    remote = RemoteSet(dirs, ssh or Ssh.from_env(), False, False)
    found = HostDirs(remote, dirs, size_bytes, needed_bytes)

    def check(target: RemoteTarget) -> RemoteHost:
        answer = remote.ssh.call(target.host, "dir", "--dir", target.path, "--needed",
                                 str(needed_bytes))
        said = answer.get("hello")
        if not isinstance(said, dict) or said.get("protocol") != PROTOCOL:
            raise HostError(f"host {target.host}: its ssdlab agent speaks another protocol: "
                            "install the same ssdlab there")
        checked = decode(target.host, "dir", answer, DirAnswer)
        info = _dir_info(checked.info)
        found.infos[target.host] = info
        return RemoteHost(target, info.as_target(size_bytes), checked.hello, 0.0)

    remote.hosts = parallel(dirs, check)
    return found


def _dir_info(facts: JsonObject) -> DirInfo:
    network = facts.get("network")
    return DirInfo(str(facts.get("path")), str(facts.get("fs_type")), str(facts.get("source")),
                   str(facts.get("mount_point")), bool(facts.get("network_share")),
                   int(str(facts.get("free_bytes") or 0)),
                   dict(network) if isinstance(network, dict) else None)
