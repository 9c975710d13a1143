"""A run on several hosts (run/remote.py): which hosts, and each host's part of every test.
The run's own pages show the aggregate; the hosts page of a test shows each host's
tracking variables per round beside the aggregate's, and each host's own steady-state
verdict (the ``host-round`` and ``host-verdicts`` events), and how far apart the hosts'
rounds started (each host-round event's ``start``). ``ssdlab show`` prints
:func:`host_header` and :func:`show_lines`."""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.plan.results import (
    HostPart,
    HostRecord,
    HostRoundEvent,
    HostVerdictsEvent,
    SteadyVerdict,
    TestParams,
)
from ssdlab.plan.round_start import summary
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, charts, esc, note, table
from ssdlab.report.scales import fmt_value
from ssdlab.store.records import RunData, TestData

__all__ = ["host_header", "hosts_page", "show_lines", "test_hosts"]

FRAME = ch.Frame(width=470, height=250, left=58, right=104, top=28, bottom=40)
HOSTS_NOTE = (
    "Every host ran the same job on its own target at the same time. The run's figures "
    "are the aggregate computed by ssdlab from each host's results: IOPS and MB/s summed, "
    "latency percentiles read from the hosts' merged latency histograms. The run's "
    "steady state is judged on the aggregate; each host's own verdict, on the same rule, "
    "is below.")


def _hosts_record(run: RunData) -> list[HostRecord]:
    details = run.target.get("details")
    hosts = details.get("hosts") if isinstance(details, dict) else None
    return [HostRecord.from_json(h, "the target's hosts") for h in hosts
            if isinstance(h, dict)] if isinstance(hosts, list) else []


def host_header(run: RunData) -> list[str]:
    """``show``'s lines naming the hosts (none for a run on one host)."""
    lines = []
    for h in _hosts_record(run):
        target = h.target
        lines.append(f"host {h.host} ({h.hostname}): {h.path} model "
                     f"{target.get('model') or '-'}, serial {target.get('serial') or '-'}, "
                     f"{h.fio}, ssdlab {h.ssdlab}, clock "
                     f"{float(h.clock_offset_s):+.2f} s")
    return lines


def test_hosts(run: RunData, test: str
               ) -> tuple[list[HostRoundEvent], dict[str, SteadyVerdict]]:
    """A test's host-round events (by round) and each host's verdict."""
    rounds = [HostRoundEvent.from_json(e.detail, "host-round event") for e in run.events
              if e.kind == "host-round" and e.test == test and e.detail]
    rounds.sort(key=lambda r: r.round)
    verdicts: dict[str, SteadyVerdict] = {}
    for e in run.events:
        if e.kind == "host-verdicts" and e.test == test and e.detail:
            verdicts = HostVerdictsEvent.from_json(e.detail, "host-verdicts event").hosts
    return rounds, verdicts


#: a host's part without tracking variables (a suite that keeps its jobs' summaries):
#: its jobs' IOPS summed
JOBS_IOPS = "IOPS"


def _tracked(part: HostPart | None) -> dict[str, float]:
    if part is None:
        return {}
    if part.tracking:
        return part.tracking
    return {JOBS_IOPS: sum(j.iops for j in part.jobs.values())} if part.jobs else {}


def _variables(rounds: Sequence[HostRoundEvent]) -> list[str]:
    for r in rounds:
        for part in r.hosts.values():
            if _tracked(part):
                return list(_tracked(part))
    return []


def _value(part: HostPart | None, name: str) -> float | None:
    value = _tracked(part).get(name)
    return None if value is None else float(value)


def show_lines(run: RunData, test: TestData) -> list[str]:
    """``show``'s lines of each host's part of ``test`` (none on one host)."""
    rounds, verdicts = test_hosts(run, test.name)
    if not rounds:
        return []
    names = _variables(rounds)
    out = []
    for host, part in rounds[-1].hosts.items():
        values = ", ".join(f"{n} {fmt_value(_value(part, n), 0)}" for n in names[:2])
        verdict = verdicts.get(host)
        # a suite without tracking variables judges no steady state per host
        message = f"; {verdict.message}" if verdict is not None else "" if not (
            part.tracking or verdicts) else "; no verdict"
        out.append(f"  host {host}: last round {values}{message}")
    skew = _skew_line(rounds)
    return out + ([f"  {skew}"] if skew else [])


def _skew_line(rounds: Sequence[HostRoundEvent]) -> str | None:
    """The test's round start skew in a line (None: not measured, an older run)."""
    starts = [(r.round, r.start) for r in rounds if r.start is not None]
    return summary(starts).line() if starts else None


def _series(run: RunData, test: TestData, rounds: Sequence[HostRoundEvent], name: str
            ) -> list[ch.Series]:
    hosts: list[str] = []
    for r in rounds:
        hosts += [h for h in r.hosts if h not in hosts]
    out = []
    for k, host in enumerate(hosts):
        xs = tuple(float(r.round) for r in rounds)
        ys = tuple(_value(r.hosts.get(host), name) for r in rounds)
        out.append(ch.Series(host, xs, ys, colour_index=k))
    agg = [(float(r.round_no), r.tracking.get(name)) for r in test.rounds if r.status == "ok"]
    if agg:
        out.append(ch.Series("all hosts", tuple(x for x, _ in agg),
                             tuple(float(y) if isinstance(y, int | float) else None
                                   for _, y in agg), colour_index=len(hosts)))
    return out


def _verdict_rows(verdicts: dict[str, SteadyVerdict]) -> list[list[str]]:
    return [[esc(host), "steady" if v.attained else "NOT steady", esc(v.message)]
            for host, v in verdicts.items()]


def hosts_page(run: RunData, test: TestData, anchor: str, head: str) -> Page | None:
    """The hosts page of ``test``, or None when it did not run on several hosts."""
    rounds, verdicts = test_hosts(run, test.name)
    if not rounds:
        return None
    body = note(HOSTS_NOTE)
    skew = _skew_line(rounds)
    if skew:
        body += note(f"{skew[0].upper()}{skew[1:]}: the spread of the hosts' start of each "
                     "round's first cell, each host's time read in the coordinator's clock.")
    body += charts(*(ch.line_chart(f"{anchor}-{i}", f"{name} per host", _series(
        run, test, rounds, name), x_label="round", y_label=name, y_unit="", frame=FRAME,
        y_log=False) for i, name in enumerate(_variables(rounds))), two=True)
    if verdicts or any(p.tracking for r in rounds for p in r.hosts.values()):
        body += "<h3>Each host's steady state</h3>" + table(("host", "verdict", "detail"),
                                                             _verdict_rows(verdicts))
    title = test.params_as(TestParams).title if "title" in test.params else test.name
    return Page(anchor, f"Hosts: {title}", body, head, run.quick)
