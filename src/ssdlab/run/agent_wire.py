"""The messages between the coordinator (run/remote.py) and a host's agent (run/agent.py)
as records: what each side writes, one JSON object a line, and reads back typed.

An agent answers a command (``ssdlab agent VERB``) or a serving connection's request
(:class:`Request`, one line) with one object: :class:`Hello`, :class:`CheckAnswer`,
:class:`~ssdlab.plan.results.PurgeStep` (a purge's outcome, as a run stores it),
:class:`~ssdlab.plan.results.TruthAnswer` (a host's ground truth, as a run stores it),
:class:`ControlAnswer`, :class:`ProbeAnswer`, :class:`ClockAnswer`, :class:`StartsAnswer`,
``serve``'s
:class:`Ready` line, or :class:`ErrorAnswer`. The coordinator decodes an answer once,
where its line is read (:func:`decode`): one that is not its record is a one-line
:class:`HostError` naming the host. The facts a message carries as they are (a host's
identity, a target's, the emulator's statistics, the health log) are JSON objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from ssdlab.engine.startat import Mark
from ssdlab.errors import ExitCode, UserError
from ssdlab.jsonrecord import JsonObject, Record, StoredDataError

#: the request format; a coordinator refuses an agent that speaks another one
#: (2: the ``clock`` and ``starts`` requests)
PROTOCOL = 2

R = TypeVar("R", bound=Record)


class HostError(UserError):
    """A host refused a request, or cannot be reached: the message names it."""

    exit_code = ExitCode.TARGET


@dataclass(frozen=True)
class Hello(Record):
    """Who a host is: its protocol, versions, clock (seconds since the epoch) and
    identity (``host``: its facts); the coordinator compares them with its own."""

    protocol: int
    ssdlab: str | None = None
    fio: str | None = None
    time: float | None = None
    hostname: str | None = None
    boot_id: str | None = None
    host: JsonObject | None = None


@dataclass(frozen=True)
class CheckAnswer(Record):
    """A target this host's guardrails accept: its facts, the host's, the versions of
    what runs there, and who the host is."""

    info: JsonObject
    host: JsonObject
    versions: dict[str, str]
    hello: Hello


@dataclass(frozen=True)
class ControlAnswer(Record):
    """The control command the emulated SSD took."""

    done: str


@dataclass(frozen=True)
class ProbeAnswer(Record):
    """Whether the target still answers a read: None, or why not."""

    lost: str | None = None


@dataclass(frozen=True)
class ClockAnswer(Record):
    """The agent's clock when it read the request (seconds since the epoch)."""

    time: float


@dataclass(frozen=True)
class StartsAnswer(Record):
    """What the jobs' waiters said since the last ``starts`` request (engine/startat.py):
    each job's position, the instant it waited for, when it began and woke."""

    marks: list[Mark]


@dataclass(frozen=True)
class ErrorAnswer(Record):
    """A refusal or a failure: the message and the exit status it stands for."""

    error: str
    exit: int = int(ExitCode.TARGET)


@dataclass(frozen=True)
class Ready(Record):
    """``serve``'s first line: its fio server listens on ``socket`` (on the host)."""

    ready: bool
    socket: str = ""
    fio_pid: int = 0
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request(Record):
    """One request on a serving connection: a verb on one of its targets, with the
    verb's arguments (as text, as on the command line)."""

    OMIT_NONE = frozenset({"command", "method", "offset", "size"})

    verb: str
    target: str
    command: str | None = None
    method: str | None = None
    offset: str | None = None
    size: str | None = None


def decode(host: str, verb: str, answer: JsonObject, record: type[R]) -> R:
    """``host``'s answer to ``verb`` read as ``record``; one that is not is a one-line
    HostError naming the host."""
    try:
        return record.from_json(answer, f"{verb} answer")
    except StoredDataError as err:
        raise HostError(f"host {host}: a malformed answer ({err}): is the same ssdlab "
                        "installed there?") from None
