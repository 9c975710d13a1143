"""Rounds that start together on several hosts: the waiters' job text
(engine/startat.py), the clock offsets and instants (run/startsync.py), the skew and the
late hosts (plan/round_start.py), as the agent answers and ``show`` prints them."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ssdlab.engine import startat
from ssdlab.engine.client import ClientExecutor, ClientHost
from ssdlab.engine.jobtext import parse_job_file, positions
from ssdlab.engine.parser import parse_fio_output
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan.results import HostPart, HostRoundEvent
from ssdlab.plan.round_start import HostMarks, RoundStart, round_start, summary
from ssdlab.run import agent, startsync
from ssdlab.run.agent_wire import ClockAnswer, HostError, StartsAnswer

JOB = """; a round
[global]
filename=/dev/x
thread=1
direct=1

[a]
stonewall
rw=randread
time_based=1
runtime=2s
ramp_time=500ms

[b]
stonewall
rw=randwrite
time_based=1
runtime=1s

[c]
stonewall
rw=write
io_size=1048576

[d]
stonewall
rw=read
time_based=1
runtime=1s
"""


# -- the waiters' job text --------------------------------------------------------------


def test_each_position_starts_after_the_ones_before_and_a_gap() -> None:
    assert startat.schedule(JOB, 0.5) == [0.0, 3.0, 4.5, None]
    # a job that orders itself runs as it is
    assert startat.schedule(JOB.replace("[b]\n", "[b]\nstartdelay=1\n"), 0.5) is None
    assert startat.schedule(JOB.replace("runtime=1s", "runtime=1m"), 0.5) == [
        0.0, 3.0, None, None]


def test_every_job_gets_its_positions_waiter_and_runs_as_a_process() -> None:
    text = startat.with_waiters(JOB, [10, 20, 30, None], "/run/d/marks")
    assert "thread" not in text
    jobs = parse_job_file(text).jobs
    assert [len(p) for p in positions(jobs)] == [1, 1, 1, 1]
    waits = [job.value("exec_prerun") for job in jobs]
    assert waits == [startat.waiter(0, 10, "/run/d/marks"), startat.waiter(1, 20, "/run/d/marks"),
                     startat.waiter(2, 30, "/run/d/marks"),
                     startat.waiter(3, None, "/run/d/marks")]
    # nothing else changed
    assert [line for line in text.splitlines() if not line.startswith("exec_prerun=")] == [
        line for line in JOB.splitlines() if line != "thread=1"]
    for wait in waits:
        assert wait is not None
        assert ";" not in wait and "#" not in wait and "${" not in wait
        for keyword in ("$pagesize", "$mb_memory", "$ncpus"):
            assert keyword not in wait


def test_fio_reads_the_waiter_as_it_is_written(tmp_path: Path) -> None:
    """fio's own parser keeps the waiter whole (no comment cut, no substitution)."""
    text = startat.with_waiters(JOB, [1795892395523171402, None, None, None], "/run/d/m")
    job = tmp_path / "round.fio"
    job.write_text(text)
    shown = subprocess.run(["fio", "--showcmd", str(job)], capture_output=True, text=True,
                           check=True, timeout=30).stdout
    assert f"--exec_prerun={startat.waiter(0, 1795892395523171402, '/run/d/m')}" in shown


def _run_waiter(tmp_path: Path, position: int, at_ns: int | None) -> startat.Mark:
    marks = tmp_path / "marks"
    # as fio runs it (backend.c exec_string): its output to the job's prerun file
    command = f"{startat.waiter(position, at_ns, str(marks))} > {tmp_path}/j.prerun.txt 2>&1"
    subprocess.run(["sh", "-c", command], check=True, timeout=30)
    found = startat.host_marks(marks.read_text())
    marks.unlink()
    assert len(found) == 1
    return found[0]


def test_the_waiter_sleeps_until_its_instant_and_says_when(tmp_path: Path) -> None:
    at = time.time_ns() + 300_000_000
    mark = _run_waiter(tmp_path, 2, at)
    assert (mark.position, mark.at_ns) == (2, at)
    assert mark.began_ns < at <= mark.woke_ns
    # an instant that has passed: no sleep
    past = time.time_ns() - 10**9
    late = _run_waiter(tmp_path, 0, past)
    assert late.began_ns > past and late.woke_ns - late.began_ns < 10**9
    # no instant: it only says when it began
    free = _run_waiter(tmp_path, 1, None)
    assert free.at_ns == 0 and free.woke_ns >= free.began_ns


def test_lines_that_are_not_marks_are_skipped() -> None:
    assert startat.host_marks("0 5 6 7\ncut sh\n1 0 8\n2 0 9 10\n") == [
        startat.Mark(0, 5, 6, 7), startat.Mark(2, 0, 9, 10)]


# -- clock offsets --------------------------------------------------------------------


def test_the_clock_offset_is_read_from_the_shortest_round_trip() -> None:
    ticks = iter([100.0, 100.4, 200.0, 200.02, 300.0, 300.1])
    answers = iter([110.0, 210.3, 310.0])
    found = startsync.clock_offset(lambda: next(answers), 3, lambda: next(ticks))
    assert found.offset_s == pytest.approx(10.29)
    assert found.uncertainty_s == pytest.approx(0.01)


# -- the skew and the late hosts --------------------------------------------------------


def _marks(offset: float, began: list[float | None], woke: list[float | None],
           instant: float = 1000.0) -> HostMarks:
    def host(values: list[float | None]) -> list[float | None]:
        return [None if v is None else instant + offset + v for v in values]
    return HostMarks(offset, 0.001, host(began), host(woke))


def test_the_skew_is_the_spread_of_the_hosts_wakes_in_the_coordinators_clock() -> None:
    start = round_start(1000.0, [0.0, 3.0], 2.0, {
        "h1": _marks(0.0, [-1.0, -0.3], [0.002, 3.001]),
        "h2": _marks(0.7, [-1.2, -0.2], [0.010, 3.004]),  # its clock is 0.7 s ahead
        "h3": _marks(-0.4, [-0.5, -0.4], [0.006, 3.020]),
    })
    assert start.skew_s == pytest.approx(0.008)
    assert start.cell_skew_s == pytest.approx([0.008, 0.019])
    assert start.late == {}
    assert start.hosts["h2"].woke_s == pytest.approx([0.010, 3.004])
    assert start.lead_s == 2.0


def test_a_host_that_could_not_wait_is_named_late_with_why() -> None:
    start = round_start(1000.0, [0.0, 3.0, None], 2.0, {
        "h1": _marks(0.0, [-1.0, -0.3, 4.0], [0.002, 3.001, 4.0]),
        "h2": _marks(0.0, [0.25, -0.3, 4.5], [0.25, 3.002, 4.5]),  # got there late
        "h3": _marks(0.3, [-0.5, -0.4, 4.0], [0.003, 3.31, 4.0]),  # woke late at cell 2
    })
    assert start.skew_s == pytest.approx(0.248)
    assert list(start.late) == ["h2", "h3"]
    assert start.late["h2"] == ("its first cell started 0.248 s after the first host's: "
                                "its job got to the start 0.250 s after the common instant")
    assert start.late["h3"] == ("cell 2 started 0.309 s after the first host's: it woke "
                                "late (its clock or its scheduler)")
    # a position that did not wait is measured, not judged
    assert start.cell_skew_s[2] == pytest.approx(0.5)


def test_a_host_without_marks_is_left_out_of_the_skew() -> None:
    start = round_start(1000.0, [0.0], 2.0, {"h1": _marks(0.0, [-1.0], [0.001]),
                                              "h2": _marks(0.0, [None], [None])})
    assert start.skew_s is None and start.late == {}


def test_the_tests_skew_is_the_median_over_rounds_and_names_the_late_hosts() -> None:
    starts = [(1, RoundStart(0.004)), (2, RoundStart(0.3, late={"h2": "x"})),
              (3, RoundStart(0.006)), (4, RoundStart(None))]
    found = summary(starts)
    assert (found.rounds, found.median_s, found.max_s, found.late) == (
        3, 0.006, 0.3, {"h2": [2]})
    assert found.line() == ("round start skew: median 6.0 ms, largest 300.0 ms over 3 "
                            "rounds (limit 50 ms); host h2 late in round 2")


def test_a_host_round_event_keeps_its_start_and_older_ones_read_as_before() -> None:
    start = round_start(1000.0, [0.0], 2.0, {"h1": _marks(0.0, [-1.0], [0.001]),
                                              "h2": _marks(0.1, [-1.0], [0.003])})
    event = HostRoundEvent(3, "round", {"h1": HostPart(tracking={"iops": 1.0})}, start)
    document = json.loads(json.dumps(event.to_json()))
    assert HostRoundEvent.from_json(document) == event
    assert document["start"]["skew_s"] == pytest.approx(0.002)
    older = HostRoundEvent(3, "round", {"h1": HostPart(tracking={"iops": 1.0})})
    assert "start" not in older.to_json()


# -- the coordinator's instants ---------------------------------------------------------


class Hosts:
    """Agents as a coordinator reaches them: clocks offset, waiters run by hand."""

    def __init__(self, offsets: dict[str, float]) -> None:
        self.offsets = offsets
        self.marks: dict[str, list[startat.Mark]] = {name: [] for name in offsets}

    def ask(self, name: str, verb: str, timeout: float) -> JsonObject:
        if verb == "clock":
            return ClockAnswer(time.time() + self.offsets[name]).to_json()
        said, self.marks[name] = self.marks[name], []
        return StartsAnswer(said).to_json()

    def each(self, work: Callable[[str], object]) -> list[object]:
        return [work(name) for name in self.offsets]


def test_each_host_waits_for_the_instant_in_its_own_clock() -> None:
    hosts = Hosts({"h1": 0.0, "h2": 100.0})
    sync = startsync.StartSync(list(hosts.offsets), hosts.ask, hosts.each,
                               lambda name: f"/run/ssdlab-agent/{name}")
    texts = sync.begin(JOB)
    assert texts is not None and len(texts) == 2
    # the watchdog allows for the lead and the gaps
    assert sync.waits_s() == pytest.approx(startsync.FIRST_LEAD_S + 3 * startsync.FIRST_GAP_S)
    ats = {}
    for name, text in zip(hosts.offsets, texts, strict=True):
        waits = [j.value("exec_prerun") or "" for j in parse_job_file(text).jobs]
        assert all(f">> /run/ssdlab-agent/{name}/{startat.MARKS_FILE} && :" in w for w in waits)
        ats[name] = [int(w.split("r=$((")[1].split()[0]) for w in waits[:3]]
        assert "r=$((" not in waits[3]
    # the same instant, 100 s apart in the hosts' clocks; positions 2.5 s + gap apart
    assert ats["h2"][0] - ats["h1"][0] == pytest.approx(100e9, abs=0.05e9)
    assert ats["h1"][1] - ats["h1"][0] == pytest.approx((2.5 + sync.gap_s) * 1e9, abs=1e3)
    assert ats["h1"][0] / 1e9 - time.time() == pytest.approx(startsync.FIRST_LEAD_S, abs=0.5)
    # the hosts' jobs: h2 got to its first cell late, everything else on time
    for name in hosts.offsets:
        at = ats[name]
        began = at[0] + (299_000_000 if name == "h2" else -800_000_000)
        woke = at[0] + (301_000_000 if name == "h2" else 1_000_000)
        hosts.marks[name] = [
            startat.Mark(0, at[0], began, woke),
            startat.Mark(1, at[1], at[1] - 300_000_000, at[1] + 2_000_000),
            startat.Mark(0, 12, 13, 14),  # an earlier round's
        ]
    start = sync.end()
    assert start is not None
    assert start.skew_s == pytest.approx(0.3, abs=0.01)
    assert list(start.late) == ["h2"]
    assert "got to the start 0.299 s after" in start.late["h2"]
    assert start.hosts["h2"].clock_offset_s == pytest.approx(100.0, abs=0.05)
    # the next round's lead: half again the longest a host needed (h2: the lead + 0.299 s)
    assert sync.lead_s == pytest.approx(1.5 * (startsync.FIRST_LEAD_S + 0.299), abs=0.1)
    assert sync.end() is None  # one round, one end


def test_a_host_that_does_not_answer_its_clock_leaves_the_round_as_it_is() -> None:
    def ask(name: str, verb: str, timeout: float) -> JsonObject:
        raise HostError(f"host {name} dropped: its ssh connection ended")
    sync = startsync.StartSync(["h1", "h2"], ask, lambda work: [work(n) for n in ("h1", "h2")],
                               lambda name: "/d")
    assert sync.begin(JOB) is None and sync.waits_s() == 0 and sync.end() is None


def test_one_host_or_a_self_ordering_job_runs_as_it_is() -> None:
    hosts = Hosts({"h1": 0.0})
    sync = startsync.StartSync(["h1"], hosts.ask, hosts.each, lambda name: "/d")
    assert sync.begin(JOB) is None and sync.end() is None
    two = Hosts({"h1": 0.0, "h2": 0.0})
    sync = startsync.StartSync(["h1", "h2"], two.ask, two.each, lambda name: "/d")
    assert sync.begin(JOB.replace("[a]\n", "[a]\nexec_prerun=true\n")) is None


# -- the agent's side -------------------------------------------------------------------


def test_the_agent_answers_its_clock_and_hands_the_marks_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent, "SOCKET_ROOT", tmp_path)
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / agent.HELD_FILE).write_text(
        json.dumps({"pid": os.getpid(), "targets": ["/dev/loop7"]}))

    def ask(verb: str) -> JsonObject:
        return agent.answer(json.dumps({"verb": verb, "target": "/dev/loop7"}), "t1",
                            True).to_json()

    clock = ClockAnswer.from_json(ask("clock")).time
    assert abs(clock - time.time()) < 5
    assert StartsAnswer.from_json(ask("starts")).marks == []
    (tmp_path / "t1" / startat.MARKS_FILE).write_text("0 5 6 7\n1 0 8 9\n")
    assert StartsAnswer.from_json(ask("starts")).marks == [startat.Mark(0, 5, 6, 7),
                                                           startat.Mark(1, 0, 8, 9)]
    assert not (tmp_path / "t1" / startat.MARKS_FILE).exists()
    assert StartsAnswer.from_json(ask("starts")).marks == []
    # the test hook: the agent's clock as it reports it, ahead by the shift
    monkeypatch.setenv(agent.CLOCK_SHIFT_ENV, "0.3")
    assert ClockAnswer.from_json(ask("clock")).time - time.time() == pytest.approx(0.3,
                                                                                   abs=1)
    (tmp_path / "t1" / startat.MARKS_FILE).write_text("0 5 6 7\n")
    assert StartsAnswer.from_json(ask("starts")).marks == [
        startat.Mark(0, 5, 300_000_006, 300_000_007)]


# -- the client executor ----------------------------------------------------------------


class FakeStarts:
    """A ``RoundStarts`` that says what it was asked."""

    def __init__(self) -> None:
        self.begun: list[str] = []

    def begin(self, job_text: str) -> list[str]:
        self.begun.append(job_text)
        return [startat.with_waiters(job_text, [7], f"/run/d{i}/m") for i in (1, 2)]

    def waits_s(self) -> float:
        return 2.0

    def end(self) -> RoundStart:
        return RoundStart(0.001)


def test_the_client_executor_gives_each_host_its_waiters(tmp_path: Path) -> None:
    from tests.unit.test_hosts import CLIENT_OUTPUT
    output = tmp_path / "out.json"
    output.write_text(CLIENT_OUTPUT)
    fio = tmp_path / "fio"
    # a stand-in for fio's client: keeps the job files it was given, prints their results
    fio.write_text(f"#!/bin/sh\nfor a do case $a in *.fio) cat $a >> {tmp_path}/jobs ;; "
                   f"esac done\ncat {output}\n")
    fio.chmod(0o755)
    hosts = [ClientHost(f"h{i}", f"s{i}.sock", f"/dev/loop{i}") for i in (1, 2)]
    starts = FakeStarts()
    executor = ClientExecutor(hosts, "h1:/dev/loop1,h2:/dev/loop2", fio=str(fio),
                              starts=starts)
    text = "[global]\nfilename=h1:/dev/loop1,h2:/dev/loop2\nthread=1\n\n[c]\nrw=read\n"
    run = executor.run(text, 30)
    assert run.error is None and run.start == RoundStart(0.001)
    assert starts.begun == [text] and run.job_text == text  # the run's job is stored
    jobs = (tmp_path / "jobs").read_text()
    assert jobs == "".join(
        f"[global]\nfilename=/dev/loop{i}\n\n[c]\nexec_prerun="
        f"{startat.waiter(0, 7, f'/run/d{i}/m')}\nrw=read\n" for i in (1, 2))


def test_a_late_host_is_a_warning_beside_the_rounds_host_parts() -> None:
    from ssdlab.engine.model import JobResult
    from ssdlab.engine.runner import FioRun
    from ssdlab.plan.results import Reason
    from ssdlab.run.hosts import host_round_events
    from tests.unit.test_hosts import CLIENT_OUTPUT

    jobs = tuple(replace(j, host=f"h{i % 2 + 1}") for i, j in
                 enumerate(parse_fio_output(CLIENT_OUTPUT).jobs) if j.name != "All clients")
    assert all(isinstance(j, JobResult) for j in jobs)
    start = RoundStart(0.3, late={"h2": "it woke late"})
    run = FioRun("", (), "", "", 0, 0, 1, False, None, None, jobs, start)
    events = host_round_events(4, run, "round", {"h1": HostPart(), "h2": HostPart()})
    assert [(kind, message) for kind, message, _ in events] == [
        ("host-round", "round 4 on 2 hosts"),
        ("warning", "host h2 started round 4 late: it woke late")]
    host_round = events[0][2]
    assert isinstance(host_round, HostRoundEvent) and host_round.start == start
    assert events[1][2] == Reason("it woke late")
    assert host_round_events(4, replace(run, per_host=()), "round", None) == []
