"""fio's averaged logs merged over jobs, and reading logs while they grow."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdlab.engine.fiolog import (
    FioLogError,
    LogEntry,
    RateInterval,
    RateLogFollower,
    RateLogMerger,
    fio_log_path,
    merge_rate_logs,
    parse_log_lines,
    read_log,
    throughput_points,
)
from ssdlab.engine.logtail import Line, LogTail
from ssdlab.engine.parser import parse_fio_output
from ssdlab.errors import ExitCode, UserError

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33" / "logs"
RUN_A = "a_randwrite_c0"  # 2 jobs x 12001 writes at 4000 IOPS
RUN_B = "b_randrw_c2"  # 2 jobs of randrw 70/30 for 3 s


def _entry(time_ms: int, value: int, direction: str = "write") -> LogEntry:
    return LogEntry(time_ms, value, direction, 0, None, 0)


# --------------------------------------------------------------------------- lines


def test_fio_333_averaged_lines_have_five_fields_the_last_a_priority() -> None:
    (entry,) = read_log(LOGS / f"{RUN_A}_iops.1.log")[:1]
    assert (entry.direction, entry.block_size, entry.offset, entry.priority) == (
        "write",
        0,
        None,
        0,
    )
    lines = ["12, 340000, 1, 131072, 262144, 1", "5, 2000, 0, 4096, 0", "5, 9, 2, 512"]
    six, five, four, hexprio = parse_log_lines([*lines, "7, 1, 1, 0, 0x2004"])
    assert (six.offset, six.priority) == (262144, 1)
    assert (five.offset, five.priority) == (None, 0)
    assert (four.direction, four.offset, four.priority) == ("trim", None, None)
    assert hexprio.priority == 0x2004


@pytest.mark.parametrize(
    "text", ["1, 2, 1", "1, 2, 3, 4096", "1, x, 1, 0, 0", "1, 2, 1, 0, 0, 0, 0", "-5, 2, 1, 0, 0"]
)
def test_a_malformed_line_is_an_error_naming_file_and_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "w_iops.1.log"
    path.write_text(f"100, 5, 1, 0, 0\n{text}\n")
    with pytest.raises(FioLogError, match=r"w_iops\.1\.log, line 2: not a fio log line") as info:
        read_log(path)
    # a user-facing error (one line, exit status 1), and still a ValueError
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)
    assert info.value.exit_code == ExitCode.FAILURE


def test_fio_log_path_follows_fios_names() -> None:
    assert fio_log_path("/x/run", "iops", 2) == Path("/x/run_iops.2.log")
    assert fio_log_path("r", "clat_hist", 1) == Path("r_clat_hist.1.log")
    with pytest.raises(ValueError):
        fio_log_path("r", "bw", 0)


# --------------------------------------------------------------------------- tail


def test_tail_returns_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "grow.log"
    tail = LogTail(path)
    assert tail.read_new() == []  # not written yet
    path.write_bytes(b"1, 10, 1, 0, 0\n2, 2")
    assert tail.read_new() == [Line(1, "1, 10, 1, 0, 0")]
    assert tail.offset == 15
    assert tail.read_new() == []  # the half line stays unread
    with path.open("ab") as out:
        out.write(b"0, 1, 0, 0\n3, 30, 1, 0, 0\r\n4, 4")
    assert tail.read_new() == [Line(2, "2, 20, 1, 0, 0"), Line(3, "3, 30, 1, 0, 0")]
    assert tail.read_rest() == [Line(4, "4, 4")]  # the writer has finished
    assert tail.read_new() == [] and tail.read_rest() == []
    assert tail.offset == path.stat().st_size


def test_tail_refuses_a_file_that_shrank_or_was_replaced(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("1\n2\n")
    tail = LogTail(path)
    assert len(tail.read_new()) == 2
    with path.open("r+") as handle:
        handle.truncate(2)
    with pytest.raises(FioLogError, match="shrank from 4 to 2 bytes"):
        tail.read_new()
    other = tmp_path / "y.log"
    other.write_text("1\n2\n3\n")
    os.replace(other, path)
    with pytest.raises(FioLogError, match="replaced"):
        tail.read_new()
    path.unlink()
    with pytest.raises(FioLogError, match="disappeared"):
        tail.read_new()


def test_tail_names_the_line_of_a_byte_that_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "b.log"
    path.write_bytes(b"1, 2, 1, 0, 0\n1, \xff, 1, 0, 0\n")
    with pytest.raises(FioLogError, match=r"b\.log, line 2: not text"):
        LogTail(path).read_new()


# --------------------------------------------------------------------------- merging


def test_two_jobs_stamped_apart_merge_into_the_sum_of_their_rates() -> None:
    # job 1 stamps at 141, 241 ...; job 2 at 137, 237 ...: 1000 and 3000 IOPS
    job1 = [_entry(141 + 100 * k, 1000) for k in range(10)]
    job2 = [_entry(137 + 100 * k, 3000) for k in range(10)]
    merged = merge_rate_logs([job1, job2], 100, final=False)
    # complete up to the earlier last stamp (1037): ten intervals of (k*100, (k+1)*100]
    assert [(i.start_ms, i.end_ms) for i in merged] == [(k * 100, k * 100 + 100) for k in range(10)]
    assert [i.rate for i in merged] == pytest.approx([4000.0] * 10)
    assert merged[-1].cumulative == pytest.approx(4000 * 1.0)
    # once fio has exited: up to the last stamp of any job, the last interval partial
    final = merge_rate_logs([job1, job2], 100, final=True)
    # (1000, 1041]: job 1 for 41 ms at 1000/s, job 2 for 37 ms at 3000/s
    last = final[-1]
    assert (last.start_ms, last.end_ms) == (1000, 1041)
    assert last.rate == pytest.approx((41 + 111) / 0.041)
    assert last.cumulative == pytest.approx(1041 + 3111)
    # a coarser grid: the same amounts
    by_second = merge_rate_logs([job1, job2], 100, step_ms=500, final=False)
    assert [(i.start_ms, i.end_ms) for i in by_second] == [(0, 500), (500, 1000)]
    assert [i.rate for i in by_second] == pytest.approx([4000.0, 4000.0])


def test_a_step_in_one_job_is_spread_by_overlap() -> None:
    job = [_entry(150, 1000), _entry(250, 3000), _entry(350, 3000)]
    merged = merge_rate_logs([job], 100, final=False)
    # (0,150] at 1000/s, then (150,250] at 3000/s: the (100,200] interval is half each
    assert [i.rate for i in merged] == pytest.approx([1000.0, 2000.0, 3000.0])


def test_reads_and_writes_are_merged_separately() -> None:
    lines = ["100, 70, 0, 0, 0", "100, 30, 1, 0, 0", "200, 70, 0, 0, 0", "200, 30, 1, 0, 0"]
    entries = parse_log_lines(lines)
    assert [i.rate for i in merge_rate_logs([entries], 100, direction="read")] == [70.0, 70.0]
    assert [i.rate for i in merge_rate_logs([entries], 100, direction="write")] == [30.0, 30.0]


def test_merger_refuses_time_going_back_and_late_lines() -> None:
    merger = RateLogMerger((1, 2), 100)
    merger.add(1, [_entry(100, 5)], "j1.log")
    with pytest.raises(FioLogError, match=r"j1\.log: time goes back from 100 to 50 ms"):
        merger.add(1, [_entry(50, 5)], "j1.log")
    merger.add(2, [_entry(300, 5)])
    merger.complete(final=True)
    with pytest.raises(FioLogError, match="after the series was merged up to 300 ms"):
        merger.add(1, [_entry(250, 5)])
    with pytest.raises(ValueError, match="job 3"):
        merger.add(3, [])
    with pytest.raises(ValueError):
        RateLogMerger((1, 1), 100)
    with pytest.raises(ValueError):
        RateLogMerger((1,), 0)


_series = st.lists(
    st.tuples(st.integers(min_value=1, max_value=250), st.integers(min_value=0, max_value=10**6)),
    min_size=1,
    max_size=25,
).map(lambda steps: [(sum(d for d, _ in steps[: i + 1]), v) for i, (_, v) in enumerate(steps)])


@given(st.lists(_series, min_size=1, max_size=4), st.data())
def test_merging_is_order_independent_and_incremental(
    jobs: list[list[tuple[int, int]]], data: st.DataObject
) -> None:
    entries = [[_entry(t, v) for t, v in job] for job in jobs]
    whole = merge_rate_logs(entries, 100, final=True)
    # the same lines fed job by job in any interleaving, completing as they arrive
    merger = RateLogMerger(range(1, len(jobs) + 1), 100)
    pending = {n: list(e) for n, e in enumerate(entries, 1)}
    got: list[RateInterval] = []
    while any(pending.values()):
        job = data.draw(st.sampled_from([n for n, e in pending.items() if e]))
        take = data.draw(st.integers(min_value=1, max_value=len(pending[job])))
        merger.add(job, pending[job][:take])
        del pending[job][:take]
        got += merger.complete()
    got += merger.complete(final=True)
    assert [(i.start_ms, i.end_ms) for i in got] == [(i.start_ms, i.end_ms) for i in whole]
    assert [i.rate for i in got] == pytest.approx([i.rate for i in whole])
    # nothing is lost: the amount at the end is every line's rate x its time
    expected = sum(v * (t - (job[k - 1][0] if k else 0)) / 1000 for job in jobs
                   for k, (t, v) in enumerate(job))  # fmt: skip
    assert whole[-1].cumulative == pytest.approx(expected)


def test_throughput_points() -> None:
    intervals = [RateInterval(0, 100, 1000.0, 100.0), RateInterval(100, 200, 500.0, 150.0)]
    points = throughput_points(intervals, "iops", 4096)
    assert [(p.elapsed_s, p.bytes_done, p.rate) for p in points] == [
        (0.1, 100 * 4096.0, 1000.0),
        (0.2, 150 * 4096.0, 500.0),
    ]
    kib = throughput_points(intervals, "bw")
    assert [(p.bytes_done, p.rate) for p in kib] == [(102400.0, 1024000.0), (153600.0, 512000.0)]
    with pytest.raises(ValueError, match="block size"):
        throughput_points(intervals, "iops")


# --------------------------------------------------------------------------- real runs


@pytest.mark.parametrize("kind", ["iops", "bw"])
def test_a_real_runs_logs_count_the_bytes_fio_reports(kind: str) -> None:
    fio = parse_fio_output((LOGS / f"{RUN_A}.json").read_text())
    (job,) = fio.jobs
    logs = [read_log(fio_log_path(LOGS / RUN_A, kind, n)) for n in (1, 2)]
    points = throughput_points(merge_rate_logs(logs, 100), "bw" if kind == "bw" else "iops", 4096)
    # every I/O but the held-back last one per job is in a window; the rates are whole
    # numbers per second, so the count is close, not exact
    assert points[-1].bytes_done == pytest.approx(job.write.io_bytes, rel=0.005)
    steady = [p.rate for p in points[2:-3]]  # 2 x rate_iops=4000 in the middle
    scale = 4096 if kind == "bw" else 1
    assert min(steady) > 7900 * scale and max(steady) < 8100 * scale
    # the bytes grow with time and reach the total at fio's last stamp
    assert all(a.bytes_done < b.bytes_done for a, b in itertools.pairwise(points))


@pytest.mark.parametrize("direction", ["read", "write"])
def test_a_time_based_run_misses_only_its_last_partial_window(direction: str) -> None:
    fio = parse_fio_output((LOGS / f"{RUN_B}.json").read_text())
    io_bytes = sum(getattr(job, direction).io_bytes for job in fio.jobs)
    runtime_ms = max(getattr(job, direction).runtime_ms for job in fio.jobs)
    logs = [read_log(fio_log_path(LOGS / RUN_B, "iops", n)) for n in (1, 2)]
    points = throughput_points(merge_rate_logs(logs, 100, direction=direction), "iops", 4096)
    # fio's last stamp is under 100 ms before the end of the run; the rest is in no line
    missing = 1 - points[-1].bytes_done / io_bytes
    assert 0 <= missing < 1.5 * (runtime_ms - points[-1].elapsed_s * 1000) / runtime_ms + 0.005
    bw = [read_log(fio_log_path(LOGS / RUN_B, "bw", n)) for n in (1, 2)]
    by_bw = throughput_points(merge_rate_logs(bw, 100, direction=direction), "bw")
    assert by_bw[-1].bytes_done == pytest.approx(points[-1].bytes_done, rel=0.001)


def test_follower_polls_growing_files_and_matches_the_whole_logs(tmp_path: Path) -> None:
    texts = {n: fio_log_path(LOGS / RUN_B, "bw", n).read_bytes() for n in (1, 2)}
    follower = RateLogFollower(tmp_path / RUN_B, "bw", (1, 2), 100, direction="write")
    got = follower.poll()
    assert got == []
    for cut in (0.3, 0.6, 1.0):
        for n, text in texts.items():
            fio_log_path(tmp_path / RUN_B, "bw", n).write_bytes(text[: int(len(text) * cut)])
        got += follower.poll()
    got += follower.poll(final=True)
    whole = merge_rate_logs(
        [read_log(fio_log_path(LOGS / RUN_B, "bw", n)) for n in (1, 2)], 100, direction="write"
    )
    assert [(i.start_ms, i.end_ms) for i in got] == [(i.start_ms, i.end_ms) for i in whole]
    assert [i.cumulative for i in got] == pytest.approx([i.cumulative for i in whole])


def test_follower_names_the_file_and_line_of_a_bad_line(tmp_path: Path) -> None:
    fio_log_path(tmp_path / "r", "iops", 1).write_text("100, 5, 1, 0, 0\n")
    fio_log_path(tmp_path / "r", "iops", 2).write_text("100, 5, 1, 0, 0\n200, five, 1, 0, 0\n")
    follower = RateLogFollower(tmp_path / "r", "iops", (1, 2), 100)
    with pytest.raises(FioLogError, match=r"r_iops\.2\.log, line 2: not a fio log line"):
        follower.poll()
