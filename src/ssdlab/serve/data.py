"""What the dashboard shows, read from the store as plain JSON-able dicts.

Every read of the store goes through :func:`open_store_readonly`, one store per request
(or per poll of a live stream): connections are never shared between threads. Nothing
here writes the store, or makes one: a store no run has made yet reads as one without
runs (:class:`NoStoreYet`), so the dashboard can start first and show the runs as soon
as a run makes the store.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from ssdlab.analysis.steady import SteadyRule, check_window, rule_by_name
from ssdlab.errors import RunNotFound
from ssdlab.report.consistency import marked_json
from ssdlab.report.figures import progress_params
from ssdlab.report.registry import quick_summary
from ssdlab.store.db import Store
from ssdlab.store.export import CHECKS_KIND, finite
from ssdlab.store.location import StoreLocation
from ssdlab.store.records import EventData, RoundData, RunData, RunSummary, TestData
from ssdlab.store.schema import StoreNotMade

JSON = dict[str, Any]
#: where the store is: ``--store``'s text, a path, or the parsed location
Location = str | Path | StoreLocation

#: the filters of the runs page (query parameters of ``/api/runs``)
FILTERS = ("suite", "target", "model", "status")
#: events of a run on several hosts: each host's part of one round (run/hosts.py)
HOST_ROUND_KIND = "host-round"
#: events of a run whose target has members: one round, member by member
#: (plan/member_rounds.py)
MEMBERS_KIND = "members"
#: the newest events a run page lists
EVENTS_SHOWN = 30


class Reader(Protocol):
    """What the dashboard reads of a store: :class:`Store`, or :class:`NoStoreYet`."""

    def list_runs(self) -> list[RunSummary]: ...

    def resolve(self, ref: str) -> str: ...

    def load(self, run_id: str) -> RunData: ...

    def close(self) -> None: ...


class NoStoreYet:
    """A store no run has made yet (no SQLite file, or a database without ssdlab's
    tables): no runs. Nothing is made: the next read opens the store once a run made it."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location

    def _missing(self, ref: str) -> RunNotFound:
        return RunNotFound(f"no run {ref!r}: no results store at {self.location} yet")

    def list_runs(self) -> list[RunSummary]:
        return []

    def resolve(self, ref: str) -> str:
        raise self._missing(ref)

    def load(self, run_id: str) -> RunData:
        raise self._missing(run_id)

    def close(self) -> None:
        pass

    def __enter__(self) -> NoStoreYet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def open_store_readonly(location: Location) -> Store | NoStoreYet:
    """The store at ``location``, opened for reading only (never created, migrated or
    written): an SQLite file or a PostgreSQL database; :class:`NoStoreYet` where no run has
    made it yet. The one place the dashboard opens a store."""
    if not isinstance(location, StoreLocation):
        location = StoreLocation.parse(location)
    if not location.exists():
        return NoStoreYet(location)
    try:
        return Store.open_readonly(location)
    except StoreNotMade:
        return NoStoreYet(location)


def to_json(value: Any) -> str:
    """Compact JSON text of ``value`` (non-finite numbers as null)."""
    return json.dumps(finite(value), separators=(",", ":"), allow_nan=False)


# -- the runs page -------------------------------------------------------------------


def summary_json(run: RunSummary) -> JSON:
    return {
        "id": run.run_id, "suite": run.suite, "profile": run.profile, "quick": run.quick,
        "status": run.status, "message": run.message, "target": run.target_path,
        "model": run.target_model or "", "created": run.created_at,
        "finished": run.finished_at, "tests": list(run.tests), "read_only": run.read_only,
    }


def _matches(run: JSON, filters: Mapping[str, str]) -> bool:
    """Suite and status must be equal; target and model contain the text (any case)."""
    for key, wanted in filters.items():
        if not wanted:
            continue
        if key in ("suite", "status"):
            if run[key] != wanted:
                return False
        elif wanted.lower() not in str(run[key]).lower():
            return False
    return True


def runs_list(summaries: Sequence[RunSummary], filters: Mapping[str, str]) -> JSON:
    """The runs page's data: the runs that pass ``filters``, newest first, and the values
    each filter can take (over all runs)."""
    every = [summary_json(r) for r in summaries]
    chosen = {k: v for k, v in filters.items() if k in FILTERS and v}
    return {
        "runs": [r for r in every if _matches(r, chosen)],
        "total": len(every),
        "filters": chosen,
        "choices": {key: sorted({str(r[key]) for r in every if r[key]}) for key in FILTERS},
    }


def list_fingerprint(summaries: Iterable[RunSummary]) -> str:
    """Changes when a run is added, ends, or records a new test."""
    digest = hashlib.sha256()
    for r in summaries:
        digest.update(f"{r.run_id}|{r.status}|{r.finished_at}|{','.join(r.tests)}\n".encode())
    return digest.hexdigest()


# -- a run's page --------------------------------------------------------------------


def run_fingerprint(run: RunData) -> str:
    """Changes whenever anything is stored for the run (a round, step, event, test
    update, its end)."""
    parts = [run.status, str(run.finished_at), str(len(run.events)), str(len(run.steps))]
    for test in run.tests:
        parts.append(f"{test.name}:{test.status}:{len(test.rounds)}:"
                     f"{test.rounds[-1].status if test.rounds else ''}:{len(test.verdicts)}")
    return "|".join(parts)


def _rule(test: TestData) -> SteadyRule | None:
    name = progress_params(test).rule
    if name is None:
        return None
    try:
        return rule_by_name(name)
    except ValueError:
        return None


def _rule_json(rule: SteadyRule | None) -> JSON | None:
    if rule is None:
        return None
    return {"name": rule.name, "window": rule.window,
            "max_data_excursion": rule.max_data_excursion,
            "max_slope_excursion": rule.max_slope_excursion, "line_band": rule.line_band,
            "description": rule.description}


def _primary_variables(test: TestData) -> list[str]:
    """The tracking variables the test's steady state is judged on (PTS: its tracking
    set); every variable the rounds recorded otherwise."""
    return [v.name for v in progress_params(test).tracked()]


def _variables(rounds: Sequence[RoundData]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rounds:
        seen.update((k, None) for k in r.tracking)
    return list(seen)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _stored_window(test: TestData) -> tuple[int, int] | None:
    primary = test.verdicts.get("primary")
    window = primary.get("window_rounds") if isinstance(primary, Mapping) else None
    if isinstance(window, list) and len(window) == 2:
        return int(window[0]), int(window[1])
    return None


def window_of(test: TestData, rule: SteadyRule, ok: Sequence[RoundData]) -> tuple[int, int] | None:
    """The measurement window drawn: the stored verdict's once the test has one, else the
    last ``rule.window`` rounds (None with fewer rounds)."""
    stored = _stored_window(test)
    if stored is not None:
        return stored
    if len(ok) < rule.window:
        return None
    return ok[-rule.window].round_no, ok[-1].round_no


def _window_json(name: str, ok: Sequence[RoundData], window: tuple[int, int],
                 rule: SteadyRule) -> JSON | None:
    by_no = {r.round_no: r for r in ok}
    values = [_number(by_no[n].tracking.get(name)) if n in by_no else None
              for n in range(window[0], window[1] + 1)]
    if len(values) != rule.window or any(v is None for v in values):
        return None
    check = check_window(name, [float(v) for v in values if v is not None], window[0], rule)
    return {
        "first": check.first_round, "last": check.last_round, "average": check.average,
        "slope": check.slope, "intercept": check.intercept,
        "data_excursion_pct": check.data_excursion_pct,
        "slope_excursion_pct": check.slope_excursion_pct,
        "line_min_pct": check.line_min_pct, "line_max_pct": check.line_max_pct,
        "passed": check.passed, "reasons": list(check.reasons),
    }


def _tracking_json(test: TestData, rule: SteadyRule | None) -> list[JSON]:
    """Per tracking variable: its value each round, and the window judged by the rule."""
    ok = [r for r in test.rounds if r.status == "ok"]
    primary = _primary_variables(test)
    window = window_of(test, rule, ok) if rule is not None else None
    out = []
    for name in _variables(ok):
        judged = rule is not None and window is not None and (not primary or name in primary)
        out.append({
            "name": name,
            "primary": not primary or name in primary,
            "rounds": [r.round_no for r in ok],
            "values": [_number(r.tracking.get(name)) for r in ok],
            "window": _window_json(name, ok, window, rule)
            if judged and rule is not None and window is not None else None,
        })
    return out


def _members_json(events: Sequence[EventData]) -> list[JSON]:
    """Each member's MB/s (read + write) and busy share, round by round."""
    series: dict[str, JSON] = {}
    for event in events:
        detail = event.detail or {}
        round_no = detail.get("round")
        for member in detail.get("members") or []:
            if not isinstance(member, Mapping) or not isinstance(round_no, int):
                continue
            seconds = _number(member.get("seconds")) or 0.0
            moved = (_number(member.get("read_bytes")) or 0.0) + (
                _number(member.get("write_bytes")) or 0.0)
            busy = _number(member.get("busy_ms"))
            entry = series.setdefault(str(member.get("name")), {
                "name": str(member.get("name")), "rounds": [], "mb_per_s": [], "busy_pct": []})
            entry["rounds"].append(round_no)
            entry["mb_per_s"].append(moved / seconds / 1e6 if seconds > 0 else None)
            entry["busy_pct"].append(busy / 10 / seconds if busy is not None and seconds > 0
                                     else None)
    return list(series.values())


def _host_value(part: Mapping[str, Any], variable: str | None) -> float | None:
    tracking = part.get("tracking")
    if variable is not None and isinstance(tracking, Mapping):
        return _number(tracking.get(variable))
    jobs = part.get("jobs")
    if isinstance(jobs, Mapping):
        rates = [_number(j.get("iops")) for j in jobs.values() if isinstance(j, Mapping)]
        return sum(r for r in rates if r is not None)
    return None


def _hosts_json(events: Sequence[EventData], variable: str | None) -> JSON | None:
    """Each host's part of every round: its value of ``variable`` (the first tracking
    variable), else the IOPS of its jobs summed."""
    hosts: dict[str, JSON] = {}
    found = False
    for event in sorted(events, key=lambda e: int((e.detail or {}).get("round", 0))):
        detail = event.detail or {}
        for host, part in dict(detail.get("hosts") or {}).items():
            if not isinstance(part, Mapping):
                continue
            has_tracking = isinstance(part.get("tracking"), Mapping)
            found = found or has_tracking
            entry = hosts.setdefault(str(host), {"name": str(host), "rounds": [], "values": []})
            entry["rounds"].append(detail.get("round"))
            entry["values"].append(_host_value(part, variable if has_tracking else None))
    if not hosts:
        return None
    label = variable if found and variable is not None else "IOPS (its jobs summed)"
    return {"variable": label, "hosts": list(hosts.values())}


def _round_json(r: RoundData) -> JSON:
    return {"round": r.round_no, "status": r.status, "started": r.started_at,
            "ended": r.ended_at, "tracking": r.tracking}


def view_of_test(test: TestData, events: Sequence[EventData]) -> JSON:
    rule = _rule(test)
    tracking = _tracking_json(test, rule)
    first = next((t["name"] for t in tracking if t["primary"]), None)
    primary = test.verdicts.get("primary")
    params = progress_params(test)
    return {
        "name": test.name,
        "title": params.title or test.name,
        "status": test.status,
        "rule": _rule_json(rule),
        "max_rounds": params.max_rounds,
        "round_seconds": params.round_seconds,
        "rounds": [_round_json(r) for r in test.rounds],
        "tracking": tracking,
        "verdict": primary.get("message") if isinstance(primary, Mapping) else None,
        "members": _members_json([e for e in events if e.kind == MEMBERS_KIND
                                  and e.test == test.name]),
        "hosts": _hosts_json([e for e in events if e.kind == HOST_ROUND_KIND
                              and e.test == test.name], first),
        "checks": checks_json(test.name, events),
    }


def checks_json(test: str, events: Sequence[EventData]) -> JSON | None:
    """A test's self-consistency checks (docs/consistency.md): its line, whether it
    measured memory, and each marked cell's reason (None: a run stored before them, or a
    test still running)."""
    found = [e.detail for e in events if e.kind == CHECKS_KIND and e.test == test
             and isinstance(e.detail, dict)]
    if not found:
        return None
    detail = found[-1]
    cache: dict[str, Any] = detail["cache"] if isinstance(detail.get("cache"), dict) else {}
    return {"message": detail.get("message"), "memory": bool(cache.get("memory")),
            "cache": cache.get("message"), "marked": marked_json(detail)}


def current_test(run: RunData) -> TestData | None:
    """The test being measured: the last one still running, else the one whose round was
    stored last."""
    running = [t for t in run.tests if t.status == "running"]
    if running:
        return running[-1]
    with_rounds = [t for t in run.tests if t.rounds]
    if not with_rounds:
        return None
    return max(with_rounds, key=lambda t: max(r.ended_at for r in t.rounds))


def _phase(run: RunData, test: TestData) -> str:
    """``round``, or the step under way (purge, precondition) when one was stored after
    the test's last round."""
    last_round = max((r.ended_at for r in test.rounds), default=0.0)
    steps = [s for s in test.steps if s.created_at > last_round]
    return steps[-1].kind if steps else "round"


def _round_seconds(test: TestData) -> float | None:
    """Seconds per round: the time between stored rounds (fio's start-up and the store's
    commit included), else the plan's round time."""
    ok = sorted((r for r in test.rounds if r.status == "ok"), key=lambda r: r.round_no)
    if len(ok) >= 2:
        return (ok[-1].ended_at - ok[0].ended_at) / (len(ok) - 1)
    if ok:
        return ok[0].ended_at - ok[0].started_at
    return _number(progress_params(test).round_seconds)


def eta_json(run: RunData, test: TestData | None, now: float) -> JSON:
    """How long the run may still take: the current test's remaining rounds (at least
    until the steady-state window is full, at most to its maximum) times its time per
    round. Tests not started yet are counted but not timed (their rounds' time is known
    only once they start); purge and preconditioning are not included."""
    if run.status != "running":
        return {"text": "finished", "low_s": None, "high_s": None}
    planned = run.plan.get("tests")
    started = {t.name for t in run.tests}
    later = [str(t) for t in planned if str(t) not in started] if isinstance(planned, list) \
        else []
    max_rounds = _number(progress_params(test).max_rounds) if test else None
    rule = _rule(test) if test else None
    per_round = _round_seconds(test) if test else None
    if test is None or max_rounds is None or per_round is None or rule is None:
        return {"text": "ETA unknown (this suite's plan does not say how many rounds are "
                "left)", "low_s": None, "high_s": None, "later_tests": later}
    done = sum(1 for r in test.rounds if r.status == "ok")
    last_end = max((r.ended_at for r in test.rounds), default=now)
    into = max(0.0, now - last_end) if test.rounds else 0.0
    low = max(0.0, max(0, rule.window - done) * per_round - into)
    high = max(0.0, max(0, int(max_rounds) - done) * per_round - into)
    text = f"{test.name}: {_duration(low)}-{_duration(high)}"
    if later:
        text += f"; then {len(later)} more test(s) not yet timed ({', '.join(later)})"
    return {"text": text, "low_s": low, "high_s": high, "later_tests": later}


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def run_view(run: RunData, now: float | None = None) -> JSON:
    """Everything the run page shows."""
    now = time.time() if now is None else now
    test = current_test(run)
    last = test.rounds[-1].round_no if test and test.rounds else None
    finished = run.status != "running"
    return {
        "fingerprint": run_fingerprint(run),
        "run": {
            "id": run.run_id, "suite": run.suite, "profile": run.profile, "quick": run.quick,
            "status": run.status, "status_text": run.status_text, "created": run.created_at,
            "finished": run.finished_at, "target": run.target_path,
            "model": run.target_model or "", "hostname": run.host.get("hostname"),
            "set": run.set_id, "read_only": run.read_only, "argv": run.argv,
            "quick_text": quick_summary([run.suite]),
        },
        "current": None if test is None or finished else {
            "test": test.name, "round": last, "phase": _phase(run, test),
            "max_rounds": progress_params(test).max_rounds},
        "eta": eta_json(run, test, now),
        "rounds_stored": sum(len(t.rounds) for t in run.tests),
        "tests": [view_of_test(t, run.events) for t in run.tests],
        "memory": _memory_lines(run.events),
        "events": [{"test": e.test, "kind": e.kind, "message": e.message,
                    "time": e.created_at} for e in run.events[-EVENTS_SHOWN:]],
        "report": f"/runs/{run.run_id}/report" if finished else None,
    }


def _memory_lines(events: Sequence[EventData]) -> list[str]:
    """Each different "measured memory, not the drive" verdict of the run's tests."""
    lines: list[str] = []
    for e in events:
        cache = e.detail.get("cache") if e.kind == CHECKS_KIND and isinstance(
            e.detail, dict) else None
        if isinstance(cache, dict) and cache.get("memory") and cache.get("message") not in lines:
            lines.append(str(cache.get("message")))
    return lines


def load_run(store: Reader, ref: str) -> RunData:
    """The run ``ref`` names (an id or a unique prefix of one)."""
    return store.load(store.resolve(ref))
