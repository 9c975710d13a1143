"""Rounds that start together on several hosts: the coordinator's side.

Before each round, every host's clock is read over its agent's serving connection (no
new ssh, no new process): :data:`CLOCK_SAMPLES` requests, the one with the shortest
round trip kept, so a host's offset is known to half that round trip (milliseconds),
not to half an ssh command's (seconds in a slow guest). The round's instant is then
:attr:`StartSync.lead_s` ahead: long enough for every host's fio server to act on the
client's "run" (fio 3.33's servers look every 1 s) and set its jobs up. Each host's
jobs wait for it in that host's clock (engine/startat.py); after the round, each agent
hands over what its waiters said, and :func:`~ssdlab.plan.round_start.round_start`
reads the skew and the late hosts from it.

The lead and the gap between positions adapt: each is :data:`MARGIN` times the longest
a host needed over the last :data:`MEMORY` rounds (when its job got to the waiter,
counted from fio's start or from the end of the position before), never less than its
floor. A slow guest makes them longer; a host that was late once makes the next rounds
wait longer.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ssdlab.engine.startat import MARKS_FILE, Mark, schedule, with_waiters
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan.round_start import HostMarks, RoundStart, round_start
from ssdlab.run.agent_wire import ClockAnswer, HostError, StartsAnswer, decode

#: the first round's lead (s), and the least any round's is (fio 3.33's servers need 1.3
#: s here, and now and then 3 s on a busy machine)
FIRST_LEAD_S = 3.0
MIN_LEAD_S = 2.5
#: the first round's gap between positions (s; fio's own pause is about 0.3-0.4 s here,
#: 0.6 s on a busy machine), and the least any round's is
FIRST_GAP_S = 0.8
MIN_GAP_S = 0.6
#: a lead or gap is this many times the longest one needed ...
MARGIN = 1.5
#: ... over this many rounds
MEMORY = 3
#: clock requests per host before each round (the shortest round trip is kept)
CLOCK_SAMPLES = 5
#: a request's time limit while the run is connected
REQUEST_TIMEOUT_S = 30.0

#: ask(host name, verb, timeout): the agent's answer over its serving connection
Ask = Callable[[str, str, float], JsonObject]
#: run the function on every host at once
Each = Callable[[Callable[[str], object]], list[object]]


@dataclass(frozen=True)
class Offset:
    """A host's clock minus the coordinator's, known to within ``uncertainty_s``."""

    offset_s: float
    uncertainty_s: float


def clock_offset(ask: Callable[[], float], samples: int = CLOCK_SAMPLES,
                 clock: Callable[[], float] = time.time) -> Offset:
    """The offset of the clock ``ask`` reads (another host's), from the request with the
    shortest round trip: the answer was read between sending and receiving, so it is
    known to half that round trip."""
    best: Offset | None = None
    for _ in range(samples):
        before = clock()
        theirs = ask()
        after = clock()
        found = Offset(theirs - (before + after) / 2, (after - before) / 2)
        if best is None or found.uncertainty_s < best.uncertainty_s:
            best = found
    assert best is not None
    return best


@dataclass
class _Round:
    """A round under way: its instant, its positions' planned starts, each host's offset
    and instants (host clock, ns)."""

    launch: float
    instant: float
    gap_s: float
    planned: list[float | None]
    offsets: dict[str, Offset]
    at_ns: dict[str, list[int | None]]


def _latest(marks: Sequence[Mark], positions: int, field_: str) -> list[float | None]:
    """Each position's latest job's time (seconds since the epoch, host clock)."""
    out: list[float | None] = [None] * positions
    for mark in marks:
        if mark.position < positions:
            value = getattr(mark, field_) / 1e9
            known = out[mark.position]
            out[mark.position] = value if known is None else max(known, value)
    return out


@dataclass
class StartSync:
    """The round instants of a run's hosts (``names``): :meth:`begin` before fio
    starts, :meth:`end` after (engine/client.py's ``RoundStarts``)."""

    names: Sequence[str]
    ask: Ask
    each: Each
    #: each host's private directory on its host (where its waiters write)
    directory: Callable[[str], str]
    lead_s: float = FIRST_LEAD_S
    gap_s: float = FIRST_GAP_S
    _leads: collections.deque[float] = field(default_factory=lambda: collections.deque(
        maxlen=MEMORY))
    _gaps: collections.deque[float] = field(default_factory=lambda: collections.deque(
        maxlen=MEMORY))
    _round: _Round | None = None

    def offsets(self) -> dict[str, Offset]:
        """Every host's clock offset, now."""
        def one(name: str) -> Offset:
            return clock_offset(lambda: decode(
                name, "clock", self.ask(name, "clock", REQUEST_TIMEOUT_S), ClockAnswer).time)
        found = self.each(one)
        return {name: o for name, o in zip(self.names, found, strict=True)
                if isinstance(o, Offset)}

    def begin(self, job_text: str) -> list[str] | None:
        self._round = None
        planned = schedule(job_text, self.gap_s)
        if len(self.names) < 2 or planned is None:
            return None
        try:
            offsets = self.offsets()
        except HostError:
            return None  # a host dropped: the round fails and says so without waiters
        launch = time.time()
        instant = launch + self.lead_s
        at_ns = {name: [None if p is None else round((instant + p + offsets[name].offset_s)
                                                      * 1e9) for p in planned]
                 for name in self.names}
        self._round = _Round(launch, instant, self.gap_s, planned, offsets, at_ns)
        return [with_waiters(job_text, at_ns[name], f"{self.directory(name)}/{MARKS_FILE}")
                for name in self.names]

    def waits_s(self) -> float:
        """The lead and the gaps of the round begun last (0: it does not wait)."""
        done = self._round
        if done is None:
            return 0.0
        return done.instant - done.launch + done.gap_s * (len(done.planned) - 1)

    def end(self) -> RoundStart | None:
        done, self._round = self._round, None
        if done is None:
            return None
        try:
            said = self.each(lambda name: decode(
                name, "starts", self.ask(name, "starts", REQUEST_TIMEOUT_S), StartsAnswer))
        except HostError:
            return None
        hosts: dict[str, HostMarks] = {}
        for name, answer in zip(self.names, said, strict=True):
            assert isinstance(answer, StartsAnswer)
            marks = _this_round(done, name, answer.marks)
            offset = done.offsets[name]
            hosts[name] = HostMarks(offset.offset_s, offset.uncertainty_s,
                                    _latest(marks, len(done.planned), "began_ns"),
                                    _latest(marks, len(done.planned), "woke_ns"))
        self._adapt(done, hosts)
        return round_start(done.instant, done.planned, done.instant - done.launch, hosts)

    def _adapt(self, done: _Round, hosts: dict[str, HostMarks]) -> None:
        """The next rounds' lead and gap from how long the hosts needed in this one."""
        lead = gap = 0.0
        for marks in hosts.values():
            began = [None if b is None else b - marks.offset_s for b in marks.began]
            woke = [None if w is None else w - marks.offset_s for w in marks.woke]
            if began and began[0] is not None:
                lead = max(lead, began[0] - done.launch)
            for p in range(1, len(began)):
                here, before, prev_at, at = began[p], woke[p - 1], done.planned[p - 1], \
                    done.planned[p]
                if None in (here, before, prev_at, at):
                    continue
                assert here is not None and before is not None
                assert prev_at is not None and at is not None
                length = at - prev_at - done.gap_s  # the position before's own duration
                gap = max(gap, here - before - length)
        self._leads.append(lead)
        self.lead_s = max(MIN_LEAD_S, MARGIN * max(self._leads))
        if gap > 0:
            self._gaps.append(gap)
            self.gap_s = max(MIN_GAP_S, MARGIN * max(self._gaps))


def _this_round(done: _Round, name: str, marks: Sequence[Mark]) -> list[Mark]:
    """The marks of this round's jobs (a failed round's may be left over): those of a
    position that waited name its instant; the others began after fio started."""
    at = done.at_ns[name]
    started_ns = (done.launch + done.offsets[name].offset_s
                  - done.offsets[name].uncertainty_s) * 1e9
    return [m for m in marks if m.position < len(at) and (
        m.at_ns == at[m.position] if at[m.position] is not None
        else m.at_ns == 0 and m.began_ns >= started_ns)]
