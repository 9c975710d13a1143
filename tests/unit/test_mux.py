"""The set's fio multiplexer with the fake fio: one fio run per round for every target
still running, each target its own part; a target that ends leaves; Ctrl-C and failures
reach every waiting target."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from ssdlab.engine.jobfile import render
from ssdlab.engine.jobmerge import SET_KEY
from ssdlab.engine.jobtext import JobFileError, parse_job_file
from ssdlab.engine.mux import SetExecutor, SetStopped
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun, TickFn
from ssdlab.plan.specs import CellSpec, FioJob, Mix, Pattern
from tests.support.fake_fio import FakeFio


def _cell(name: str) -> CellSpec:
    return CellSpec(name=name, pattern=Pattern.RANDOM, block_bytes=4096, mix=Mix(100),
                    threads=2, iodepth=8, offset_bytes=0, size_bytes=1 << 26, runtime_s=0.1)


def _job(target: str, *cells: str) -> str:
    return render(FioJob(target, tuple(_cell(c) for c in cells)))


@dataclass
class Recorder:
    """An executor that records what it was asked and answers as the fake fio does;
    ``before`` runs first (it may raise, or call ``on_tick``)."""

    fio: FakeFio = field(default_factory=lambda: FakeFio(lambda name, n: 1000.0))
    before: Callable[[str, TickFn | None], None] | None = None
    asked: list[tuple[str, float, bool]] = field(default_factory=list)

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.asked.append((job_text, timeout_s, json_plus))
        if self.before is not None:
            self.before(job_text, on_tick)
        return self.fio.run(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)


Got = list[FioRun | BaseException]
Work = Callable[[Executor, Got], None]


def _serve(mux: SetExecutor, work: dict[str, Work]) -> tuple[dict[str, Got], BaseException | None]:
    """Each target's ``work`` in a thread of its own (it leaves when done); the mux served
    here. What each target got, and what serving raised."""
    got: dict[str, Got] = {tag: [] for tag in work}

    def body(tag: str, fn: Work) -> None:
        try:
            fn(mux.member(tag), got[tag])
        except BaseException as exc:
            got[tag].append(exc)
        finally:
            mux.leave(tag)

    threads = [threading.Thread(target=body, args=item) for item in work.items()]
    for t in threads:
        t.start()
    raised = None
    try:
        mux.serve()
    except BaseException as exc:
        raised = exc
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    return got, raised


def _rounds(target: str, count: int, *, timeout: float = 60.0, json_plus: bool = False
            ) -> Work:
    def work(ex: Executor, out: Got) -> None:
        for n in range(1, count + 1):
            out.append(ex.run(_job(target, f"r{n}a", f"r{n}b"), timeout, json_plus=json_plus))
    return work


def _once(text: str, on_tick: TickFn | None = None) -> Work:
    def work(ex: Executor, out: Got) -> None:
        out.append(ex.run(text, 10.0, on_tick=on_tick))
    return work


def test_one_fio_run_per_round_for_the_targets_still_running() -> None:
    inner = Recorder()
    mux = SetExecutor(inner, ["t1", "t2", "t3"], name="set-x")
    got, raised = _serve(mux, {"t1": _rounds("/dev/a", 2), "t2": _rounds("/dev/b", 4),
                               "t3": _rounds("/dev/c", 3)})
    assert raised is None
    assert mux.fio_runs == len(inner.asked) == 4  # the longest run's rounds, not 2 + 4 + 3
    tags = [sorted({j.name.split(".")[0] for j in parse_job_file(text).jobs})
            for text, _, _ in inner.asked]
    # round 4: t2 alone, its own job file as it wrote it
    assert tags[:3] == [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t2", "t3"]]
    assert inner.asked[3][0] == _job("/dev/b", "r4a", "r4b")
    for tag, count in (("t1", 2), ("t2", 4), ("t3", 3)):
        runs = got[tag]
        assert len(runs) == count and all(isinstance(r, FioRun) for r in runs)
        for n, run in enumerate(runs, 1):
            assert isinstance(run, FioRun) and run.output is not None
            assert [j.name for j in run.output.jobs] == [f"r{n}a", f"r{n}b"]
    shared = got["t3"][0]
    assert isinstance(shared, FioRun) and shared.output is not None
    doc = shared.output.documents[0][SET_KEY]
    assert isinstance(doc, dict) and doc["fio_run"] == 1 and doc["set"] == "set-x"


def test_the_shared_run_takes_the_longest_watchdog_and_json_plus_if_any_asks() -> None:
    inner = Recorder()
    mux = SetExecutor(inner, ["t1", "t2"])
    _serve(mux, {"t1": _rounds("/dev/a", 1, timeout=30.0),
                 "t2": _rounds("/dev/b", 1, timeout=90.0, json_plus=True)})
    assert [(t, j) for _, t, j in inner.asked] == [(90.0, True)]


def test_ctrl_c_interrupts_every_waiting_target_and_every_later_call() -> None:
    def interrupt(text: str, tick: TickFn | None) -> None:
        if len(inner.asked) == 2:
            raise FioInterrupted()

    inner = Recorder(before=interrupt)
    mux = SetExecutor(inner, ["t1", "t2"])
    got, raised = _serve(mux, {"t1": _rounds("/dev/a", 5), "t2": _rounds("/dev/b", 5)})
    assert isinstance(raised, FioInterrupted)
    for tag in ("t1", "t2"):
        assert [type(r) for r in got[tag]] == [FioRun, FioInterrupted]
    with pytest.raises(FioInterrupted):
        mux.member("t1").run(_job("/dev/a", "late"), 10.0)


def test_a_failure_to_run_fio_is_every_waiting_targets_and_the_set_goes_on() -> None:
    def broken(text: str, tick: TickFn | None) -> None:
        if len(inner.asked) == 1:
            raise OSError("fio: cannot execute")

    inner = Recorder(before=broken)

    def tolerant(target: str) -> Work:
        def work(ex: Executor, out: Got) -> None:
            for n in (1, 2):
                try:
                    out.append(ex.run(_job(target, f"c{n}"), 10.0))
                except OSError:
                    continue
        return work

    mux = SetExecutor(inner, ["t1", "t2"])
    got, raised = _serve(mux, {"t1": tolerant("/dev/a"), "t2": tolerant("/dev/b")})
    assert raised is None and mux.fio_runs == 2
    assert [len(got[t]) for t in ("t1", "t2")] == [1, 1]


def test_a_targets_failing_tick_is_its_own_error() -> None:
    def ticking(text: str, tick: TickFn | None) -> None:
        assert tick is not None
        tick(0.5)
        tick(1.0)

    seen: list[float] = []

    def bad_tick(elapsed: float) -> None:
        raise ValueError("tick failed")

    inner = Recorder(before=ticking)
    mux = SetExecutor(inner, ["t1", "t2"], ticker=seen.append)
    got, _ = _serve(mux, {
        "t1": _once(_job("/dev/a", "c"), bad_tick),
        "t2": _once(_job("/dev/b", "c"), seen.append),
    })
    assert isinstance(got["t1"][0], ValueError) and isinstance(got["t2"][0], FioRun)
    assert seen == [0.5, 0.5, 1.0, 1.0]  # t2's tick and the set's own, each tick


def test_a_job_file_that_cannot_be_merged_is_its_targets_error_only() -> None:
    inner = Recorder()
    mux = SetExecutor(inner, ["t1", "t2"])
    got, _ = _serve(mux, {"t1": _once("bs=4k\n[c]\n"), "t2": _rounds("/dev/b", 1)})
    assert isinstance(got["t1"][0], JobFileError) and isinstance(got["t2"][0], FioRun)
    assert inner.asked[0][0] == _job("/dev/b", "r1a", "r1b")  # t2 alone


def test_a_target_that_left_cannot_run_fio() -> None:
    mux = SetExecutor(Recorder(), ["t1"])
    mux.leave("t1")
    with pytest.raises(SetStopped, match="left"):
        mux.member("t1").run(_job("/dev/a", "c"), 10.0)
    with pytest.raises(KeyError):
        mux.member("t9")
