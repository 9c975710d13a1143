"""Trace replay: trace formats and their checks before any I/O, the job file, the IOPS
timeline, and a replay against a fake fio (store, report)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ssdlab.engine.fiolog import LogEntry
from ssdlab.engine.jobfile import render as render_job
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.errors import UserError
from ssdlab.plan import replay as rp
from ssdlab.plan.specs import IOENGINES
from ssdlab.report.build import render
from ssdlab.report.replay_pages import PAGES
from ssdlab.run.progress import Progress
from ssdlab.run.replay_run import PreparedReplay, ReplayRun, describe, timeline
from ssdlab.run.workload_target import WorkloadTarget
from ssdlab.store.db import Store
from tests.support.fake_fio import _job, _sections
from tests.support.prepared import file_info

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = DATA / "replay-sample.iolog"
SAMPLE_V3 = DATA / "replay-sample-v3.iolog"
MIB = 1 << 20


def refused(path: Path | str) -> str:
    with pytest.raises(UserError) as info:
        rp.read_trace(str(path))
    assert len(info.value.message.splitlines()) == 1
    return info.value.message


def test_the_samples_are_read_and_summarised() -> None:
    v2 = rp.read_trace(str(SAMPLE))
    assert v2.format == "iolog-v2" and v2.ios == 3000 and v2.reads + v2.writes == 3000
    assert v2.extent_bytes <= 32 * MIB and v2.unaligned == 0 and v2.duration_ms is None
    assert set(v2.block_sizes) == {4096, 8192} and v2.main_block == 4096
    assert 60 <= v2.read_pct <= 80
    v3 = rp.read_trace(str(SAMPLE_V3))
    assert v3.format == "iolog-v3" and v3.ios > 1000
    assert v3.duration_ms is not None and 1400 <= v3.duration_ms <= 1600
    assert "I/Os" in v3.describe() and v3.record().format == "iolog-v3"


def blk_event(sector: int, nbytes: int, write: bool, what: int = 1, pdu: bytes = b"",
              magic: int = rp.BLK_MAGIC | 7, t_ns: int = 0) -> bytes:
    category = (rp.BLK_TC_WRITE if write else 1) << rp.BLK_TC_SHIFT
    return rp.BLK_EVENT.pack(magic, 0, t_ns, sector, nbytes, category | what, 1, 0, 0, 0,
                             len(pdu)) + pdu


def test_a_blktrace_is_recognised_and_its_queue_events_counted(tmp_path: Path) -> None:
    trace = tmp_path / "t.blktrace"
    trace.write_bytes(blk_event(8, 4096, False) + blk_event(16, 8192, True, t_ns=2_000_000)
                      + blk_event(100, 4096, True, what=7)  # a completion: not counted
                      + blk_event(0, 0, False, what=1, pdu=b"notify"))
    s = rp.read_trace(str(trace))
    assert s.format == "blktrace" and (s.reads, s.writes) == (1, 1)
    assert s.extent_bytes == 16 * 512 + 8192 and s.duration_ms == 2
    trace.write_bytes(blk_event(8, 4096, False)[:30])
    assert "truncated" in refused(trace)
    trace.write_bytes(blk_event(8, 4096, False) + blk_event(8, 4096, False, magic=1))
    assert "bad event magic" in refused(trace)


@pytest.mark.parametrize(("content", "fragment"), [
    ("", "empty"),
    ("hello\n", "not a trace fio replays"),
    ("fio version 2 iolog\n/dev/x add\n", "no read, write or trim"),
    ("fio version 2 iolog\n/dev/x read 0\n", "line 2"),
    ("fio version 2 iolog\n/dev/x read zero 4096\n", "whole numbers"),
    ("fio version 2 iolog\n/dev/x scribble 0 4096\n", "unknown action 'scribble'"),
    ("fio version 2 iolog\n/dev/x write 0 0\n", "zero-length"),
    ("fio version 3 iolog\n/dev/x read 0 4096\n", "TIME_US FILE ACTION"),
    ("fio version 3 iolog\nsoon /dev/x read 0 4096\n", "timestamp"),
])
def test_bad_traces_are_refused_in_one_line(tmp_path: Path, content: str,
                                            fragment: str) -> None:
    trace = tmp_path / "t.log"
    trace.write_text(content)
    assert fragment in refused(trace)


def test_missing_trace_and_bad_options(tmp_path: Path) -> None:
    assert "no such file" in refused(tmp_path / "nope")
    for args, fragment in [(rp.ReplayArgs(), "give --trace"),
                           (rp.ReplayArgs(str(SAMPLE), time_scale_pct=0), "--time-scale 0"),
                           (rp.ReplayArgs(str(SAMPLE), iodepth=0), "--qd 0"),
                           (rp.ReplayArgs(str(SAMPLE), log_interval_ms=1), "--log-interval"),
                           (rp.ReplayArgs(str(SAMPLE), max_seconds=-1.0), "--max-seconds"),
                           (rp.ReplayArgs(str(SAMPLE), ioengine="spdk"), "--ioengine")]:
        with pytest.raises(UserError, match=fragment.replace("-", r"\-")):
            rp.build_options(args, IOENGINES)


def test_the_trace_must_fit_the_target_in_whole_sectors(tmp_path: Path) -> None:
    s = rp.read_trace(str(SAMPLE))
    rp.check_fits(s, 32 * MIB, 512, True, "/dev/x")
    with pytest.raises(UserError, match="beyond the end of /dev/x"):
        rp.check_fits(s, 16 * MIB, 512, True, "/dev/x")
    with pytest.raises(UserError, match="whole 8192-byte sectors"):
        rp.check_fits(s, 32 * MIB, 8192, True, "/dev/x")
    odd = tmp_path / "odd.log"
    odd.write_text("fio version 2 iolog\n/dev/x read 100 4096\n")
    with pytest.raises(UserError, match="direct I/O"):
        rp.check_fits(rp.read_trace(str(odd)), MIB, 512, True, "/dev/x")
    rp.check_fits(rp.read_trace(str(odd)), MIB, 512, False, "/dev/x")


def job_text(o: rp.ReplayOptions, target: str, log_prefix: str) -> str:
    return render_job(rp.replay_job(o, target, log_prefix), "head")


def test_the_job_redirects_the_trace_and_logs_iops() -> None:
    o = rp.build_options(rp.ReplayArgs(str(SAMPLE_V3), no_stall=True, time_scale_pct=200,
                                       iodepth=4, log_interval_ms=250, max_seconds=3),
                         IOENGINES)
    text = job_text(o, "/dev/loop9", "/tmp/x/replay")
    for line in (f"read_iolog={SAMPLE_V3}", "replay_redirect=/dev/loop9", "iodepth=4",
                 "replay_no_stall=1", "replay_time_scale=200", "write_iops_log=/tmp/x/replay",
                 "log_avg_msec=250", "runtime=3s", "direct=1"):
        assert line in text.splitlines(), line
    assert rp.planned_seconds(o) == 3
    timed = rp.build_options(rp.ReplayArgs(str(SAMPLE_V3), time_scale_pct=200), IOENGINES)
    assert rp.planned_seconds(timed) == pytest.approx(0.75, abs=0.05)
    assert "replay_time_scale" in job_text(timed, "/d", "/p")


def test_the_timeline_adds_reads_and_writes_per_interval() -> None:
    entries = [LogEntry(1000, 700, "read", 0, 0), LogEntry(1001, 300, "write", 0, 0),
               LogEntry(2000, 650, "read", 0, 0), LogEntry(2000, 5, "trim", 0, 0)]
    assert [p.to_json() for p in timeline(entries, 1000)] == [
        {"t_s": 1.0, "iops": 1000.0, "read_iops": 700.0, "write_iops": 300.0},
        {"t_s": 2.0, "iops": 650.0, "read_iops": 650.0, "write_iops": 0.0}]


class FakeReplay:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.calls.append(job_text)
        prefix = next(x.split("=", 1)[1] for x in job_text.splitlines()
                      if x.startswith("write_iops_log="))
        Path(f"{prefix}_iops.1.log").write_text("1000, 2100, 0, 0, 0\n1000, 900, 1, 0, 0\n")
        section = {**_sections(job_text)[0], "rw": "randrw", "rwmixread": "70"}
        out = json.dumps({"fio version": "fio-3.33", "jobs": [_job(section, 3000.0)]})
        now = time.time()
        return FioRun(job_text, ("fake",), out, "", 0, now, now + 1, False,
                      parse_fio_output(out), None)


def test_a_replay_is_stored_and_reported(tmp_path: Path) -> None:
    target = tmp_path / "t.img"
    target.write_bytes(b"")
    info = file_info(target, 64 * MIB)
    base = WorkloadTarget(info, False, {"hostname": "t", "cpu_count": 2},
                          {"ssdlab": "test", "fio": "3.33"}, None, rp.FILE_NAME)
    args = rp.ReplayArgs(str(SAMPLE))
    p = PreparedReplay(base, rp.build_options(args, IOENGINES), args)
    assert "DRY RUN" in describe(p) and "replay_redirect=" in describe(p)
    fio = FakeReplay()
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = ReplayRun(p, store, fio, Progress(live=False)).execute(["t"])
        run = store.load(run_id)
    test = run.test("replay")
    assert run.status == "complete" and test.status == "complete"
    assert test.result["cell"]["iops"] == pytest.approx(3000)
    assert test.result["timeline"] == [{"t_s": 1.0, "iops": 3000.0, "read_iops": 2100.0,
                                        "write_iops": 900.0}]
    assert test.params["trace"]["format"] == "iolog-v2"
    html, _ = render([run])
    assert "Trace replay" in html and "IOPS timeline" in html and "iolog-v2" in html
    ended = PAGES.outcome(run, tmp_path)
    assert ended.lines == (f"run {run_id} complete; {test.result['message']}",
                           f"  see them: ssdlab report {run_id} -o DIR")
    assert ended.failure is None
