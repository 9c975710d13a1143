"""fio's histogram logs: bins, parsing, merging, rounds, percentiles == fio's own."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdlab.engine.fiolog import FioLogError
from ssdlab.engine.histlog import (
    DEFAULT_PERCENTILES,
    FIO_DEFAULT_PERCENTILES,
    PLAT_NR,
    HistInterval,
    HistLogFollower,
    HistRounds,
    LatencyHistogram,
    bin_bounds_ns,
    bin_index,
    bin_value_ns,
    merge_histograms,
    parse_hist_line,
    parse_hist_lines,
    read_hist_log,
    round_of,
    rounds_from_intervals,
)
from ssdlab.engine.parser import parse_fio_output

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33" / "logs"
RUN_A = "a_randwrite_c0"  # coarseness 0, every I/O logged, group_reporting
RUN_B = "b_randrw_c2"  # coarseness 2, randrw, jobs reported separately


def _hist_path(run: str, job: int) -> Path:
    return LOGS / f"{run}_clat_hist.{job}.log"


def _line(time_ms: int, counts: dict[int, int], direction: int = 1, coarseness: int = 0) -> str:
    values = [0] * (PLAT_NR >> coarseness)
    for index, count in counts.items():
        values[index] = count
    return ", ".join(str(v) for v in [time_ms, direction, 4096, *values])


def _interval(job: int, time_ms: int, counts: dict[int, int], line: int = 1) -> HistInterval:
    return parse_hist_line(_line(time_ms, counts), "test", line, job)


# --------------------------------------------------------------------------- bins


def test_fio_333_has_1856_bins_and_every_fixture_line_has_them() -> None:
    assert PLAT_NR == 29 * 64 == 1856
    for job in (1, 2):
        for line in _hist_path(RUN_A, job).read_text().splitlines():
            assert len(line.split(",")) == 3 + 1856
        for line in _hist_path(RUN_B, job).read_text().splitlines():
            assert len(line.split(",")) == 3 + 1856 // 4


def test_bin_values_are_fios_plat_idx_to_val() -> None:
    assert [bin_value_ns(i) for i in (0, 1, 63, 64, 127)] == [0, 1, 63, 64, 127]
    # group 2: [128, 256) in bins of 2 ns, each standing for its middle
    assert [bin_value_ns(i) for i in (128, 129, 191)] == [129, 131, 255]
    assert bin_value_ns(192) == 258  # group 3: bins of 4 ns from 256
    assert bin_value_ns(PLAT_NR - 1) == 2**33 + 63 * 2**27 + 2**26
    with pytest.raises(ValueError):
        bin_value_ns(PLAT_NR)


def test_bin_index_inverts_bin_value_and_bounds_tile_the_line() -> None:
    previous_high = 0.0
    for index in range(PLAT_NR):
        low, high = bin_bounds_ns(index)
        assert low == previous_high
        assert bin_index(low) == index == bin_index(bin_value_ns(index))
        assert low <= bin_value_ns(index) < high
        if not math.isinf(high):
            assert bin_index(int(high) - 1) == index
        previous_high = high
    assert bin_index(2**40) == PLAT_NR - 1  # everything above 2^34 ns: the last bin


@given(st.integers(min_value=128, max_value=2**34 - 1))
def test_a_bin_value_is_within_fios_error_bound(latency: int) -> None:
    value = bin_value_ns(bin_index(latency))
    assert abs(value - latency) / latency <= 1 / 128


# --------------------------------------------------------------------------- fio's numbers


def test_whole_run_reproduces_fios_json_plus_bins_and_percentiles() -> None:
    fio = parse_fio_output((LOGS / f"{RUN_A}.json").read_text())
    (job,) = fio.jobs  # group_reporting: both jobs in one
    intervals = [i for n in (1, 2) for i in read_hist_log(_hist_path(RUN_A, n))]
    assert {i.job for i in intervals} == {1, 2}
    merged = merge_histograms(i.histogram for i in intervals)
    # the bin mapping, checked on real data: every bin at fio's json+ value
    assert merged.value_counts() == job.write.clat_bins_ns
    assert merged.total == job.write.total_ios
    # fio's default percentile list, to the nanosecond
    assert list(job.write.clat_percentiles_ns) == list(FIO_DEFAULT_PERCENTILES)
    assert merged.percentiles_ns(FIO_DEFAULT_PERCENTILES) == job.write.clat_percentiles_ns


@pytest.mark.parametrize("direction", ["read", "write"])
def test_coarse_logs_give_an_upper_bound_within_one_coarse_bin(direction: str) -> None:
    fio = parse_fio_output((LOGS / f"{RUN_B}.json").read_text())
    assert len(fio.jobs) == 2
    for number, job in enumerate(fio.jobs, 1):
        stats = getattr(job, direction)
        logged = merge_histograms(
            (i.histogram for i in read_hist_log(_hist_path(RUN_B, number), coarseness=2)
             if i.direction == direction),
            coarseness=2,
        )  # fmt: skip
        # fio's own bins, summed the way log_hist_coarseness=2 sums them
        coarse: dict[int, int] = {}
        for value, count in stats.clat_bins_ns.items():
            coarse[bin_index(value) >> 2] = coarse.get(bin_index(value) >> 2, 0) + count
        # the log holds the run except its last partial interval
        assert all(count <= coarse.get(i, 0) for i, count in logged.counts.items())
        assert 0.9 * stats.total_ios < logged.total < stats.total_ios
        rebinned = LatencyHistogram(2, coarse)
        for pct, fio_value in stats.clat_percentiles_ns.items():
            ours = rebinned.percentile_ns(pct)
            assert ours is not None and ours >= fio_value
            assert bin_index(int(ours)) >> 2 == bin_index(int(fio_value)) >> 2


# --------------------------------------------------------------------------- parsing


def test_parse_a_line_and_its_fields() -> None:
    interval = parse_hist_line(_line(1001, {0: 2, 600: 5}, direction=0), "h.log", 7, 3)
    assert (interval.job, interval.line, interval.time_ms) == (3, 7, 1001)
    assert (interval.direction, interval.block_size, interval.ios) == ("read", 4096, 7)
    assert dict(interval.histogram.counts) == {0: 2, 600: 5}
    coarse = parse_hist_line(_line(5, {28: 1}, coarseness=6))
    assert coarse.histogram.coarseness == 6
    assert coarse.histogram.value_ns(28) == bin_value_ns(PLAT_NR - 1)
    assert coarse.histogram.value_ns(0) == bin_value_ns(63)
    assert parse_hist_lines(["", _line(1, {1: 1}), "  "])[0].line == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1001, 1, 4096", "not a fio histogram log line"),
        ("1001, 1, 4096, x, 0", "not an integer"),
        ("1001, 1, 4096, " + ", ".join(["0"] * 1000), "1000 latency bins"),
        (_line(1001, {}, direction=3), "direction 3"),
        (_line(1001, {5: 2**64 - 3}), "went backwards"),
        (_line(-1, {}), "negative"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x_clat_hist.2.log"
    path.write_text(f"{_line(500, {3: 1})}\n{_line(1000, {3: 1})}\n{text}\n")
    with pytest.raises(FioLogError, match=f"x_clat_hist.2.log, line 3: .*{message}"):
        read_hist_log(path)


def test_a_coarseness_other_than_expected_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "y_clat_hist.1.log"
    path.write_text(_line(500, {3: 1}, coarseness=1) + "\n")
    assert read_hist_log(path)[0].histogram.coarseness == 1
    with pytest.raises(FioLogError, match="line 1: 928 latency bins is coarseness 1, expected 0"):
        read_hist_log(path, coarseness=0)
    with pytest.raises(FioLogError, match="no such histogram log"):
        read_hist_log(tmp_path / "missing.log")


# --------------------------------------------------------------------------- histograms


def test_histogram_percentiles_follow_fio() -> None:
    histogram = LatencyHistogram(0, {10: 98, 200: 1, 300: 1})
    assert histogram.percentiles_ns((50.0, 98.0, 99.0, 99.5, 100.0)) == {
        50.0: 10.0,
        98.0: 10.0,
        99.0: float(bin_value_ns(200)),
        99.5: float(bin_value_ns(300)),
        100.0: float(bin_value_ns(300)),
    }
    assert (histogram.min_ns, histogram.max_ns) == (10, bin_value_ns(300))
    empty = LatencyHistogram()
    assert empty.percentile_ns(50.0) is None and empty.percentiles_ns() == {}
    assert empty.max_ns is None
    with pytest.raises(ValueError, match="coarseness"):
        _ = histogram + LatencyHistogram(1, {})
    with pytest.raises(ValueError, match="negative"):
        LatencyHistogram(0, {1: -1})
    with pytest.raises(ValueError, match="outside"):
        LatencyHistogram(6, {29: 1})


_histograms = st.dictionaries(
    st.integers(min_value=0, max_value=PLAT_NR - 1), st.integers(min_value=0, max_value=10**6),
    max_size=40,
).map(lambda counts: LatencyHistogram(0, counts))  # fmt: skip


@given(_histograms, st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=2))
def test_percentiles_are_monotone(histogram: LatencyHistogram, pcts: list[float]) -> None:
    values = histogram.percentiles_ns(sorted(pcts))
    ordered = [values[p] for p in sorted(pcts) if p in values]
    assert ordered == sorted(ordered)
    if histogram.total:
        assert len(values) == len(set(pcts))
        assert histogram.min_ns is not None and histogram.max_ns is not None
        assert all(histogram.min_ns <= v <= histogram.max_ns for v in ordered)


@given(st.lists(_histograms, max_size=6), st.randoms(use_true_random=False))
def test_merging_is_order_independent(
    histograms: list[LatencyHistogram], rnd: random.Random
) -> None:
    shuffled = list(histograms)
    rnd.shuffle(shuffled)
    merged = merge_histograms(histograms)
    assert merge_histograms(shuffled) == merged
    assert merged.total == sum(h.total for h in histograms)
    pairwise = LatencyHistogram()
    for histogram in reversed(histograms):
        pairwise = histogram + pairwise
    assert pairwise == merged


# --------------------------------------------------------------------------- rounds


def test_a_line_belongs_to_the_round_holding_its_middle() -> None:
    # lines are late by a few ms; job 2 started 4 ms after job 1
    assert [round_of(t, 2000, 1000) for t in (1001, 2001, 2004, 3001, 4003)] == [0, 0, 0, 1, 1]
    assert round_of(1499, 1000, 1000) == 0  # the middle, 999, is in round 0
    assert round_of(1501, 1000, 1000) == 1
    assert round_of(3, 1000, 1000) == 0


def test_rounds_merge_jobs_and_hand_out_complete_rounds_once() -> None:
    rounds = HistRounds((1, 2), round_ms=2000, hist_msec=1000)
    rounds.add([_interval(1, 1001, {100: 10}), _interval(1, 2001, {100: 10})])
    assert rounds.complete() == []  # job 2 has nothing yet
    rounds.add([_interval(2, 1004, {200: 30}), _interval(2, 2004, {200: 10})])
    assert rounds.complete() == []  # nobody is past round 0 yet
    rounds.add([_interval(1, 3002, {300: 1})])
    assert rounds.complete() == []  # job 2 is not
    rounds.add([_interval(2, 3005, {300: 1}), _interval(2, 4006, {300: 5})])
    (first,) = rounds.complete()
    assert (first.index, first.start_s, first.end_s, first.lines) == (0, 0.0, 2.0, 4)
    assert first.ios == 60
    # job 1: 20 I/Os over 2001 ms; job 2: 40 over 2004 ms
    assert first.iops == pytest.approx(20 / 2.001 + 40 / 2.004)
    assert first.histogram == LatencyHistogram(0, {100: 20, 200: 40})
    assert first.percentiles_ns == {p: float(bin_value_ns(200)) for p in DEFAULT_PERCENTILES}
    assert rounds.complete() == []  # handed out once
    # fio exits: job 1's last line is 3002, within log_hist_msec of the round's end 4000
    (second,) = rounds.complete(final=True)
    assert (second.index, second.ios, second.lines) == (1, 7, 3)
    assert second.iops == pytest.approx(1 / 1.001 + 6 / 2.002)
    with pytest.raises(FioLogError, match="already complete"):
        rounds.add([_interval(2, 4100, {1: 1})])


def test_rounds_refuse_time_going_back_and_unknown_jobs() -> None:
    rounds = HistRounds((1,), round_ms=1000, hist_msec=100)
    rounds.add([_interval(1, 500, {1: 1}, line=4)])
    with pytest.raises(FioLogError, match="job 1, line 5: time goes back from 500 to 400"):
        rounds.add([_interval(1, 400, {1: 1}, line=5)])
    with pytest.raises(ValueError, match="job 2"):
        rounds.add([_interval(2, 600, {1: 1})])
    with pytest.raises(ValueError):
        HistRounds((), 1000, 100)


@pytest.mark.parametrize("direction", ["read", "write"])
def test_rounds_of_a_real_run_cover_every_logged_io(direction: str) -> None:
    intervals = [i for n in (1, 2) for i in read_hist_log(_hist_path(RUN_B, n))]
    mine = [i for i in intervals if i.direction == direction]
    rounds = rounds_from_intervals(
        intervals, (1, 2), round_ms=1000, hist_msec=250, direction=direction, coarseness=2
    )
    # 3 s: four lines per job per round; the last round lacks the unlogged last interval
    assert [r.lines for r in rounds] == [8, 8, 6]
    assert sum(r.ios for r in rounds) == sum(i.ios for i in mine)
    fio = parse_fio_output((LOGS / f"{RUN_B}.json").read_text())
    fio_iops = sum(getattr(job, direction).iops for job in fio.jobs)
    for r in rounds:
        assert r.iops == pytest.approx(fio_iops, rel=0.25)
        in_round = [i.histogram for i in mine if round_of(i.time_ms, 1000, 250) == r.index]
        expected = merge_histograms(in_round, 2)
        assert r.histogram == expected
        assert r.percentiles_ns == expected.percentiles_ns(DEFAULT_PERCENTILES)
        assert list(r.percentiles_ns) == list(DEFAULT_PERCENTILES)


# --------------------------------------------------------------------------- following


def test_follower_reads_complete_lines_only_and_matches_the_whole_logs(tmp_path: Path) -> None:
    texts = {n: _hist_path(RUN_A, n).read_bytes() for n in (1, 2)}
    prefix = tmp_path / RUN_A
    follower = HistLogFollower(prefix, (1, 2), round_ms=1000, hist_msec=500)
    assert follower.poll() == []  # fio has not written anything yet
    dest = {n: tmp_path / f"{RUN_A}_clat_hist.{n}.log" for n in (1, 2)}
    # write each file in pieces that end mid-line: a half line must never be parsed (it
    # would have the wrong number of bins and raise)
    cuts = {n: [len(t) // 5, len(t) // 2, len(t) * 4 // 5, len(t)] for n, t in texts.items()}
    got = []
    for step in range(4):
        for n in (1, 2):
            with dest[n].open("ab") as out:
                start = 0 if step == 0 else cuts[n][step - 1]
                out.write(texts[n][start : cuts[n][step]])
        got += follower.poll()
    got += follower.poll(final=True)
    whole = rounds_from_intervals(
        [i for n in (1, 2) for i in read_hist_log(_hist_path(RUN_A, n))], (1, 2), 1000, 500
    )
    assert got == whole
    assert [r.index for r in got] == [0, 1, 2, 3]
    # every line is in a round: the held-back last I/O's line (3999 ms) ends round 3
    assert sum(r.ios for r in got) == 24002


def test_follower_names_the_file_of_a_bad_line(tmp_path: Path) -> None:
    shutil.copy(_hist_path(RUN_A, 1), tmp_path / "r_clat_hist.1.log")
    (tmp_path / "r_clat_hist.2.log").write_text(_line(500, {1: 1}) + "\n1000, 1, 4096, 7\n")
    follower = HistLogFollower(tmp_path / "r", (1, 2), round_ms=1000, hist_msec=500)
    with pytest.raises(FioLogError, match=r"r_clat_hist\.2\.log, line 2: 1 latency bins"):
        follower.poll()
