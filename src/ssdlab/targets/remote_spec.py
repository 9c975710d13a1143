"""Target names of other hosts: ``HOST:/dev/nvme0n1`` (HOST as ssh names it: an alias of
the user's ``~/.ssh/config``, ``user@name`` or an address), and several of them given as
one run's targets (``h1:/dev/a,h2:/dev/b``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ssdlab.errors import UserError

_REMOTE = re.compile(r"^(?P<host>[A-Za-z0-9_.@\[\]%][A-Za-z0-9_.@\[\]%-]*):(?P<path>/.*)$")


@dataclass(frozen=True)
class RemoteTarget:
    """One target on another host, reached through ssh."""

    host: str
    path: str

    def __str__(self) -> str:
        return f"{self.host}:{self.path}"


def is_remote(target: str) -> bool:
    """Whether ``target`` names a path on another host (``HOST:/path``): a local path
    starts with ``/`` or ``.``, a URI has ``://``."""
    if target.startswith(("/", ".")) or "://" in target:
        return False
    return _REMOTE.match(target) is not None


def parse_remote(target: str) -> RemoteTarget:
    """``HOST:/path`` as a :class:`RemoteTarget`; a one-line UserError otherwise."""
    match = _REMOTE.match(target) if is_remote(target) else None
    if match is None:
        raise UserError(f"{target!r} is not a target on another host: write HOST:/path "
                        "(for example node1:/dev/nvme0n1)")
    return RemoteTarget(match["host"], match["path"])


def parse_remote_set(targets: str) -> tuple[RemoteTarget, ...]:
    """The hosts' targets of one run, comma-separated; each host at most once."""
    parsed = tuple(parse_remote(t.strip()) for t in targets.split(",") if t.strip())
    hosts = [t.host for t in parsed]
    twice = sorted({h for h in hosts if hosts.count(h) > 1})
    if twice:
        raise UserError(f"host {twice[0]} is named twice: a run of several hosts takes one "
                        "target per host")
    if not parsed:
        raise UserError("no target given")
    return parsed
