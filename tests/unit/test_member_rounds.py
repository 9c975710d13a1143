"""Every member, every round (issue 15 item 3): the pure judgement of a round's members,
its stored record, the sampling in the shared run skeleton (a fake fio over a fake sysfs
whose two members mirror every write), ``ssdlab show``'s line and the members page."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest

from ssdlab.analysis.member_rounds import (
    SMALL_WRITE_BYTES,
    byte_penalty,
    even_spread,
    judge_round,
    periods_between,
    round_message,
    textbook_penalty,
)
from ssdlab.analysis.members import MemberPeriod
from ssdlab.engine.model import FioOutput
from ssdlab.engine.runner import TICK_S, Executor, FioRun, TickFn
from ssdlab.jsonrecord import StoredDataError
from ssdlab.plan.member_rounds import EVENT_KIND, MemberRound, member_rounds, summarise
from ssdlab.plan.peak import PeakArgs, build_options
from ssdlab.plan.pts import PtsArgs
from ssdlab.plan.specs import active_range
from ssdlab.report.build import render
from ssdlab.report.html import esc
from ssdlab.report.members_pages import BTRFS_PARITY_NOTE, members_page
from ssdlab.report.terminal import render_run
from ssdlab.run import session as session_module
from ssdlab.run.cpu_window import FIO_STARTUP_S
from ssdlab.run.member_rounds import OFF_KIND, MemberSampler, find_sampler, host_io
from ssdlab.run.peak_run import PeakRun, PreparedPeak
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun
from ssdlab.store.db import Store
from ssdlab.store.records import EventData
from tests.support.fake_fio import FakeFio, FakeProcStat, QueueFakeFio
from tests.support.fakesys import VIRTUAL, FakeSys
from tests.support.prepared import file_info, make_prepared

KIB = 1024
MIB = 1024 * KIB


def period(name: str, reads: int, writes: int, *, block: int = 4 * KIB,
           wait_ms: float = 0.1, seconds: float = 1.0) -> MemberPeriod:
    """A member's period: ``wait_ms`` per I/O."""
    return MemberPeriod(name, seconds, reads, writes, reads * block, writes * block,
                        round(reads * wait_ms), round(writes * wait_ms), 500)


# -- the judgement of one round ---------------------------------------------------------


def test_a_mirror_costs_two_member_ios_per_host_write() -> None:
    # RAID 1: every write on both members, the reads on one of them
    periods = [period("loop0", 500, 1000), period("loop1", 0, 1000)]
    judged = judge_round(periods, 500, 1000, "raid1", textbook_penalty("raid1"))
    assert judged.write_penalty == 2.0 and judged.textbook == 2.0
    assert judged.imbalance == 1.5 and judged.slow_member is None
    assert round_message("round 3", 2, judged, "raid1") == (
        "members over round 3: 2 members, write penalty 2.00 (textbook 2 for raid1), "
        "imbalance 1.50, no slow member among 2")


def test_the_share_finding_applies_only_where_the_level_spreads_evenly() -> None:
    # one member did a quarter of its peers' I/Os: slow in a stripe, not in a mirror,
    # whose reads may go to one member of each set
    periods = [period("a", 1000, 0), period("b", 1000, 0), period("c", 250, 0)]
    assert judge_round(periods, 2250, 0, "raid0", 1.0).slow_member == "c"
    for level in ("raid1", "raid10", None):
        assert judge_round(periods, 2250, 0, level, None).slow_member is None
    no_writes = judge_round(periods, 2250, 0, "raid0", 1.0)
    assert no_writes.write_penalty is None
    assert "no host writes" in round_message("round 1", 3, no_writes, "raid0")


def test_waits_compare_only_under_comparable_loads_where_the_spread_is_uneven() -> None:
    # a mirror whose first member serves the reads as well: it waits longer per I/O
    # from its queue alone, which does not make it slow
    busy = [period("a", 2000, 1000, wait_ms=0.3), period("b", 0, 1000, wait_ms=0.1)]
    judged = judge_round(busy, 2000, 1000, "raid1", 2.0)
    assert judged.slow_member is None and judged.imbalance == 3.0
    assert judged.verdict == ("no slow member judged: loads differ 3.00x, so their waits "
                              "per I/O do not compare")
    # the same load, three times the wait: slow, on any level
    even = [period("a", 0, 1000, wait_ms=0.3), period("b", 0, 1000, wait_ms=0.1)]
    for level in ("raid1", None, "raid0"):
        assert judge_round(even, 0, 1000, level, None).slow_member == "a"


def test_levels_and_their_textbook_values() -> None:
    assert [even_spread(level) for level in ("raid0", "raid1", "raid5", "raid6", "raid10",
                                             None)] == [True, False, True, True, False, False]
    assert textbook_penalty("raid5", "md") == 4.0 and textbook_penalty("raid6", "btrfs") == 6.0
    assert textbook_penalty("raid5", "zfs") is None  # raidz writes full stripes
    assert textbook_penalty("raid10", "zfs") == 2.0
    assert textbook_penalty(None) is None and textbook_penalty("jbod") is None


def test_large_writes_cost_in_bytes_what_they_blur_in_ios() -> None:
    # 100 host writes of 1 MiB on a mirror, split into 128 KiB member I/Os
    periods = [period("a", 0, 800, block=128 * KIB), period("b", 0, 800, block=128 * KIB)]
    assert judge_round(periods, 0, 100, "raid1", 2.0).write_penalty == 16.0
    assert byte_penalty(periods, 0, 100 * MIB) == 2.0
    assert byte_penalty(periods, 0, 0) is None


def test_periods_between_two_readings() -> None:
    line = "{} 0 {} 10 {} 0 {} 20 0 {} 30"
    before = {"a": line.format(10, 80, 5, 40, 100), "b": line.format(0, 0, 5, 40, 100)}
    after = {"a": line.format(20, 160, 15, 120, 600), "b": line.format(0, 0, 15, 120, 600)}
    a, b = periods_between(before, after, 0.5)
    assert (a.name, a.reads, a.writes, a.read_bytes, a.write_bytes, a.busy_ms) == (
        "a", 10, 10, 80 * 512, 80 * 512, 500)
    assert b.reads == 0 and b.utilisation_pct == 100.0
    with pytest.raises(ValueError, match="no second reading of b"):
        periods_between(before, {"a": after["a"]}, 0.5)
    with pytest.raises(ValueError, match="backwards"):
        periods_between(after, before, 0.5)


# -- the stored record ------------------------------------------------------------------


def _record(round_no: int, penalty_block: int = 4 * KIB, slow: bool = False,
            last_round: int | None = None) -> MemberRound:
    periods = [period("loop0", 0, 1000, block=penalty_block),
               period("loop1", 0, 1000, block=penalty_block, wait_ms=0.1 if not slow else 0.6)]
    return MemberRound.build(round_no, "round", 1.0, periods,
                             host=(0, 1000, 0, 1000 * penalty_block), level="raid1",
                             textbook=2.0,
                             last_round=last_round)


def test_the_record_is_the_documented_detail_and_reads_back() -> None:
    record = _record(3)
    detail = record.to_json()
    assert list(detail) == ["round", "phase", "seconds", "level", "members", "host_reads",
                            "host_writes", "host_read_bytes", "host_write_bytes",
                            "write_penalty", "textbook", "imbalance", "slow_member",
                            "verdict"]
    members = detail["members"]
    assert isinstance(members, list) and isinstance(members[0], dict)
    assert list(members[0]) == ["name", "seconds", "reads", "writes", "read_bytes",
                                "write_bytes", "read_wait_ms", "write_wait_ms", "busy_ms"]
    assert detail["round"] == 3 and detail["write_penalty"] == 2.0
    assert detail["verdict"] == "no slow member among 2"
    back = MemberRound.from_json(detail)
    assert back == record and back.to_json() == detail
    assert record.message == ("members over round 3: 2 members, write penalty 2.00 "
                              "(textbook 2 for raid1), imbalance 1.00, no slow member among 2")
    cut = _record(5, last_round=9)
    assert cut.to_json()["last_round"] == 9 and cut.label == "rounds 5-9"
    with pytest.raises(StoredDataError, match="members"):
        MemberRound.from_json({**detail, "members": [{"name": "x"}]})


def test_a_tests_rounds_together() -> None:
    rounds = [_record(1), _record(2, penalty_block=MIB), _record(3, slow=True), _record(4)]
    assert [r.small_writes for r in rounds] == [True, False, True, True]
    summary = summarise(rounds)
    assert summary.members == ["loop0", "loop1"] and summary.rounds == 4
    # the median of the small-write rounds (2, 2, 2); the 1 MiB round is left out
    assert summary.write_penalty == 2.0 and summary.penalty_rounds == 3
    assert summary.small_writes and summary.textbook == 2.0 and summary.level == "raid1"
    assert summary.slow == {"loop1": 1}
    assert summary.max_imbalance == 1.0
    assert summary.message == (
        "members loop0, loop1: write penalty 2.00 (median of 3 rounds of small writes; "
        "textbook 2 for raid1), imbalance at most 1.00, slow member loop1 in 1 of 4 rounds")
    assert SMALL_WRITE_BYTES == 64 * KIB


def test_a_runs_member_rounds_come_from_its_events_by_test() -> None:
    events = [EventData("iops", EVENT_KIND, "m", _record(2).to_json(), 0.0),
              EventData(None, "process", "p", {"pid": 1}, 0.0),
              EventData("iops", EVENT_KIND, "m", _record(1).to_json(), 0.0),
              EventData("latency", EVENT_KIND, "m", _record(1).to_json(), 0.0),
              EventData(None, OFF_KIND, "none", None, 0.0)]
    rounds = member_rounds(events)
    assert list(rounds) == ["iops", "latency"]
    assert [r.round_no for r in rounds["iops"]] == [1, 2]


# -- finding a target's members ---------------------------------------------------------


STAT = "0 0 0 0 0 0 0 0 0 0 0\n"


def test_the_members_under_a_block_target_and_its_level(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("md0", "9:0", parent=VIRTUAL)
    for i, name in enumerate(("sdb", "sdc")):
        fake.disk(name, f"8:{16 * (i + 1)}")
        fake.stack("md0", name)
        fake.write(name, "stat", STAT)
    details = {"array": {"backend": "md", "level": "raid5"}}
    sampler, why = find_sampler("/dev/md0", "block", "md0", details, sysfs=fake.sys,
                                proc=fake.proc)
    assert sampler is not None and why == ""
    assert sampler.names == ["sdb", "sdc"]
    assert sampler.level == "raid5" and sampler.textbook == 4.0
    (fake.sys / "class" / "block" / "sdc").resolve().joinpath("stat").unlink()
    gone, why = find_sampler("/dev/md0", "block", "md0", {}, sysfs=fake.sys, proc=fake.proc)
    assert gone is None and "statistics of sdb, sdc cannot be read" in why


def test_a_plain_drive_has_no_members_so_no_write_penalty(tmp_path: Path) -> None:
    """issue 30: a single emulated SSD printed "write penalty 1.79". Members exist where two
    or more devices are at the bottom of the target's stack, or on an array ssdlab built.
    A plain drive's one device is still read, for the cache-bound check only."""
    fake = FakeSys(tmp_path)
    fake.disk("loop0", "7:0", parent=VIRTUAL)
    fake.write("loop0", "stat", STAT)
    fake.disk("sdb", "8:16")
    fake.partition("sdb", "sdb1", "8:17", 1)
    fake.write("sdb", "stat", STAT)
    fake.disk("dm-0", "253:0", parent=VIRTUAL)  # one device under a dm (LVM, dm-crypt)
    fake.stack("dm-0", "loop0")
    for path, name in (("/dev/loop0", "loop0"), ("/dev/sdb1", "sdb1"), ("/dev/dm-0", "dm-0")):
        sampler, why = find_sampler(path, "block", name, {}, sysfs=fake.sys, proc=fake.proc)
        assert sampler is not None and not sampler.figures, path
        assert sampler.names == [{"sdb1": "sdb"}.get(name, "loop0" if name == "dm-0" else name)]
        assert why.startswith(f"member devices not sampled: {path} is a plain drive (one "
                              "device below it"), why
        assert why.endswith("and no array): no members to compare")
    # an array ssdlab built is sampled whatever is left of it
    array = {"array": {"backend": "md", "level": "raid1"}}
    sampler, why = find_sampler("/dev/dm-0", "block", "dm-0", array, sysfs=fake.sys,
                                proc=fake.proc)
    assert sampler is not None and sampler.names == ["loop0"] and why == ""
    assert sampler.figures


def test_a_file_on_tmpfs_has_no_members(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.mount("0:40", "/scratch", "tmpfs", "tmpfs")
    sampler, why = find_sampler("/scratch/t.img", "file", "t.img", {}, sysfs=fake.sys,
                                proc=fake.proc)
    assert sampler is None and "no block device below it" in why


# -- sampling in a run ------------------------------------------------------------------


class Mirror:
    """A fake sysfs of two members that mirror every host write (RAID 1) and serve every
    host read from the first; :meth:`apply` counts a fio run's I/Os into their stat."""

    names = ("loop0", "loop1")

    def __init__(self, root: Path) -> None:
        self.fs = FakeSys(root)
        self.counters = {name: [0] * 11 for name in self.names}
        for i, name in enumerate(self.names):
            self.fs.disk(name, f"7:{i}", parent=VIRTUAL)
            self._write(name)

    def _write(self, name: str) -> None:
        self.fs.write(name, "stat", " ".join(map(str, self.counters[name])) + "\n")

    def apply(self, output: FioOutput | None, share: float = 1.0) -> None:
        """Count ``share`` of the fio run's host I/Os into the members' counters."""
        reads, writes, read_bytes, write_bytes = (round(n * share) for n in host_io(output))
        if self.array is not None:
            c = self.counters[self.array]
            c[0], c[4] = c[0] + reads, c[4] + writes
            self._write(self.array)
        for i, name in enumerate(self.names):
            c = self.counters[name]
            if i == 0:
                c[0] += reads
                c[2] += read_bytes // 512
                c[3] += reads // 10
            c[4] += writes
            c[6] += write_bytes // 512
            c[7] += writes // 10
            c[9] += 100
            self._write(name)

    def sampler(self, level: str | None = "raid1", array: str | None = None
                ) -> MemberSampler:
        return MemberSampler(list(self.names), level=level, backend="btrfs",
                             sysfs=self.fs.sys, array=array)

    def add_array(self, name: str) -> None:
        """An array device above the members that counts the host's I/Os itself (md)."""
        self.fs.disk(name, "9:0", parent=VIRTUAL)
        self.counters[name] = [0] * 11
        self._write(name)
        self.array = name

    array: str | None = None


class MirroredFio:
    """The fake fio, whose I/Os the fake members see."""

    def __init__(self, inner: FakeFio, mirror: Mirror) -> None:
        self.inner, self.mirror = inner, mirror

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        run = self.inner.run(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)
        self.mirror.apply(run.output)
        return run


QUICK_IOPS = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False)


def _pts_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             sampler: MemberSampler | None, fio: Executor) -> tuple[Store, str]:
    monkeypatch.setattr(session_module, "find_sampler",
                        lambda *a, **kw: (sampler, "" if sampler else "no members here"))
    store = Store.open(tmp_path / "store.sqlite")
    runner = PtsRun(make_prepared(tmp_path, QUICK_IOPS), store, fio,
                    Progress(io.StringIO(), live=False, quick=True))
    return store, runner.execute(["test"])


def test_a_run_stores_one_members_event_per_measured_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = Mirror(tmp_path / "fake")
    fio = MirroredFio(FakeFio(lambda name, n: 10_000.0), mirror)
    store, run_id = _pts_run(tmp_path, monkeypatch, mirror.sampler(), fio)
    run = store.load(run_id)
    test = run.test("iops")
    rounds = member_rounds(run.events)["iops"]
    assert [r.round_no for r in rounds] == [r.round_no for r in test.rounds] == [1, 2, 3, 4, 5]
    for r in rounds:
        assert [m.name for m in r.members] == ["loop0", "loop1"]
        assert r.host_writes > 0 and r.host_reads > 0
        assert r.members[0].reads == r.host_reads and r.members[1].reads == 0
        assert r.members[0].writes == r.members[1].writes == r.host_writes
        assert r.write_penalty == 2.0 and r.textbook == 2.0 and r.level == "raid1"
        assert r.phase == "round" and r.seconds > 0
    assert not [e for e in run.events if e.kind == OFF_KIND]
    show = render_run(run)
    assert "  members loop0, loop1: write penalty 2.00 (median of 5 rounds of large " \
           "writes; textbook 2 for raid1)" in show
    html, _ = render([run])
    assert "<h2>Members: IOPS</h2>" in html and "<h3>Write penalty</h3>" in html
    assert html.count('id="run0-t0-members-') == 4  # the four charts
    assert esc(BTRFS_PARITY_NOTE) not in html and "(btrfs)" not in html


def test_an_array_devices_own_counts_are_kept_beside_its_members(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """md counts the host's I/Os in its own /sys/block/mdX/stat (the VM lab's guest: fio's
    1,000 writes, 1,000 there): each round keeps them, and the penalty per array write."""
    mirror = Mirror(tmp_path / "fake")
    mirror.add_array("md0")
    fio = MirroredFio(FakeFio(lambda name, n: 10_000.0), mirror)
    store, run_id = _pts_run(tmp_path, monkeypatch, mirror.sampler(array="md0"), fio)
    rounds = member_rounds(store.load(run_id).events)["iops"]
    assert len(rounds) == 5
    for r in rounds:
        assert r.array is not None and r.array.name == "md0"
        assert (r.array.reads, r.array.writes) == (r.host_reads, r.host_writes)
        stored = r.to_json()["array"]
        assert r.array_penalty == 2.0 and isinstance(stored, dict)
        assert stored["writes"] == r.host_writes
    assert "array" not in _record(1).to_json() and _record(1).array_penalty is None


def test_the_btrfs_parity_note_and_a_page_per_test(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = Mirror(tmp_path / "fake")
    fio = MirroredFio(FakeFio(lambda name, n: 10_000.0), mirror)
    store, run_id = _pts_run(tmp_path, monkeypatch, mirror.sampler("raid5"), fio)
    run = store.load(run_id)
    raid5 = dataclasses.replace(run, target={**run.target, "details": {
        "array": {"backend": "btrfs", "level": "raid5"}}})
    rounds = member_rounds(run.events)["iops"]
    page = members_page(raid5, run.test("iops"), rounds, "a", "head")
    assert esc(BTRFS_PARITY_NOTE) in page.body and "raid5 (btrfs)" in page.body
    assert page.title == "Members: IOPS"


def test_a_target_without_members_is_not_sampled_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, run_id = _pts_run(tmp_path, monkeypatch, None, FakeFio(lambda name, n: 1e4))
    run = store.load(run_id)
    assert [e.message for e in run.events if e.kind == OFF_KIND] == ["no members here"]
    assert not member_rounds(run.events)
    assert "  members " not in render_run(run) and "Members:" not in render([run])[0]


# -- ramp I/Os are never counted against measured ones (issue 30) --------------------------


def fio_seconds(text: str) -> float:
    """``500ms`` or ``2s`` (units.fio_time) in seconds."""
    return float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


#: the wall clock at the fake clock's zero (fio's JSON stamps are on the wall clock)
EPOCH = 1_795_000_000.0

class RampedMirroredFio:
    """The fake fio over the mirror, with time: after fio's start-up (``FIO_STARTUP_S`` +
    ``slow_start``), a job file's ``ramp_time`` runs at the rate fio measures (those I/Os
    reach the members, not fio's figures), then the measured
    ``runtime``; a progress tick every ``TICK_S`` (none without ``tick``). fio stamps its
    output with the wall clock (``EPOCH`` + the fake clock) as its I/O ends, unless
    ``stamp`` is off, and exits ``tail`` seconds later (a loaded host)."""

    def __init__(self, inner: Executor, mirror: Mirror, clock: FakeClock, *,
                 tick: bool = True, tail: float = 0.0, stamp: bool = True,
                 slow_start: float = 0.0) -> None:
        self.inner, self.mirror, self.clock, self.tick = inner, mirror, clock, tick
        self.tail, self.stamp = tail, stamp
        self.slow_start = slow_start

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        run = self.inner.run(job_text, timeout_s, json_plus=json_plus)
        ramp, runtime = (sum(fio_seconds(x) for x in re.findall(rf"^{key}=(\w+)$", job_text,
                                                                 re.M))
                         for key in ("ramp_time", "runtime"))
        started = self.clock.now
        io_from = FIO_STARTUP_S + self.slow_start
        measured_from, io_end = io_from + ramp, io_from + ramp + runtime

        def shares_until(t: float) -> float:  # host-write shares the members saw by t
            warm = min(max(t - io_from, 0.0), ramp)
            return (warm + min(max(t - measured_from, 0.0), runtime)) / runtime

        def advance(t: float) -> None:
            self.mirror.apply(run.output, share=shares_until(t) - shares_until(
                self.clock.now - started))
            self.clock.now = started + t

        t = TICK_S
        while t < io_end:
            advance(t)
            if on_tick is not None and self.tick:
                on_tick(t)
            t += TICK_S
        advance(io_end)
        output = run.output
        if self.stamp and output is not None:
            stamped = {**output.documents[-1], "timestamp_ms": (EPOCH + self.clock.now) * 1000}
            output = dataclasses.replace(output, documents=(*output.documents[:-1], stamped))
        self.clock.now += self.tail
        return dataclasses.replace(run, output=output, started_at=started,
                                   ended_at=self.clock.now)


def _ramped_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                **fio: float | bool) -> list[MemberRound]:
    """A quick peak search of 4 KiB random writes (0.5 s ramp + 1 s probes) on the mirror:
    its member rounds."""
    clock = FakeClock()
    mirror = Mirror(tmp_path / "fake")
    sampler = MemberSampler(list(mirror.names), level="raid1", backend="btrfs",
                            sysfs=mirror.fs.sys, clock=clock, wall=lambda: EPOCH + clock.now)
    monkeypatch.setattr(session_module, "find_sampler", lambda *a, **kw: (sampler, ""))
    args = PeakArgs(profile="quick", workloads="rnd4k_write", engines="io_uring",
                    max_threads=2, max_qd=4, pin="none")
    target = tmp_path / "target.img"
    target.write_bytes(b"")
    info = file_info(target)
    base = PreparedTarget(info, False, {"hostname": "test", "cpu_count": 2},
                          {"ssdlab": "test", "fio": "3.33"})
    prepared = PreparedPeak(base, build_options(args, 2), args,
                            active_range(info.capacity_bytes, 100.0))
    store = Store.open(tmp_path / "store.sqlite")
    ramped = RampedMirroredFio(QueueFakeFio(), mirror, clock, **fio)  # type: ignore[arg-type]
    runner = PeakRun(prepared, store, ramped, Progress(io.StringIO(), live=False, quick=True),
                     read_stat=FakeProcStat(lambda: 30.0), fio_cpus=lambda: frozenset({0, 1}))
    run = store.load(runner.execute(["test"]))
    return member_rounds(run.events)["rnd4k_write"]


def test_ramp_ios_are_never_counted_against_measured_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 30: `run peak` printed write penalties 1.50 and 1.52: (0.5 s ramp + 1 s probe)
    / 1 s. The members are read at the first tick after the ramp: a mirror is 2.00."""
    rounds = _ramped_run(tmp_path, monkeypatch)
    assert rounds
    for r in rounds:
        assert r.write_penalty == pytest.approx(2.0, rel=1e-3), r.message
        assert r.byte_penalty == pytest.approx(2.0, rel=1e-3), r.message
        assert r.seconds == pytest.approx(0.95) and r.host_seconds == pytest.approx(1.0)
    assert summarise(rounds).write_penalty == pytest.approx(2.0)


def test_fio_starting_or_exiting_late_moves_the_measured_period_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stressed make test: a mirror's round measured 1.68, its members read for 1.30 s
    from the first tick past the warm-up against fio's 1.00 s. On a loaded host fio starts
    late (the first tick can come before its I/O) and exits late (idle time after it). The
    period runs from the first reading after fio's I/O began to where fio stamped its
    output; unstamped, to the reading after fio exited, as before."""
    slow = {"slow_start": 0.6, "tail": 0.3}  # I/O from 0.8 s to 2.3 s; ticks from 0.75 s
    rounds = _ramped_run(tmp_path / "slow", monkeypatch, **slow)
    assert rounds
    for r in rounds:
        assert r.write_penalty == pytest.approx(2.0, rel=1e-3), r.message
        assert r.seconds == pytest.approx(1.3) and r.host_seconds == pytest.approx(1.0)
    unstamped = _ramped_run(tmp_path / "unstamped", monkeypatch, stamp=False, **slow)
    assert unstamped
    for r in unstamped:  # from the tick at 0.75 s, before any I/O, to fio's exit
        assert r.seconds == pytest.approx(1.85)
        assert r.write_penalty == pytest.approx(2.0 * 1.5 / 1.85, rel=1e-3), r.message


def test_a_ramp_that_cannot_be_told_apart_gives_no_write_penalty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _ramped_run(tmp_path, monkeypatch, tick=False)  # no tick after the ramp
    assert rounds
    for r in rounds:
        assert r.write_penalty is None and r.byte_penalty is None
        assert "write penalty not measured: the warm-up (ramp) could not be told apart" \
            in r.message
    summary = summarise(rounds).message
    assert summary.startswith("members loop0, loop1: write penalty not measured (the warm-up "
                              f"could not be told apart from the measured period in "
                              f"{len(rounds)} of {len(rounds)} rounds)"), summary
