"""The sysbench and pgbench parsers on real recorded outputs (tests/fixtures/db/SOURCES.md)
and on generated ones: every figure is checked against a computation of its own (sums
over intervals, the histogram expanded to a list, sorted lists of the logged latencies),
and whatever the text holds, the parsers return a result or raise DbOutputError with a
one-line message, and nothing else."""

from __future__ import annotations

import gzip
import math
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssdlab.engine.dboutput import DbOutputError, output_error
from ssdlab.engine.pgbench import (
    LatencyCounts,
    PgbenchRun,
    parse_pgbench,
    read_transaction_logs,
)
from ssdlab.engine.sysbench import (
    HISTOGRAM_BUCKETS,
    HISTOGRAM_MAX_MS,
    HISTOGRAM_MIN_MS,
    SysbenchRun,
    histogram_bucket_ms,
    histogram_percentile,
    parse_sysbench,
)
from ssdlab.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "db"
SYSBENCH = ["oltp_read_write", "oltp_read_only", "oltp_write_only"]
SYSBENCH_ERRORS = {
    "error_socket": "FATAL: unable to connect to MySQL server on socket",
    "error_dropped_table": "doesn't exist",
}
PGBENCH = {
    "tpcb_like": "<builtin: TPC-B (sort of)>",
    "select_only": "<builtin: select only>",
    "simple_update": "<builtin: simple update>",
    "tpcb_like_rate": "<builtin: TPC-B (sort of)>",
    "tpcb_like_serializable": "<builtin: TPC-B (sort of)>",
}
PGBENCH_SAMPLED = {"select_only": 0.02}  # --sampling-rate of the recorded run
PGBENCH_ERRORS = {  # and custom_vacuum_ignored: errors pgbench says it ignores
    "error_connect": "pgbench: error: connection to server on socket",
    "error_aborted": "aborted in command 0 query 0",
}
PGBENCH_SECONDS = 2  # -T
SYSBENCH_SECONDS = 3  # --time

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sysbench_text(name: str) -> str:
    return (FIXTURES / f"sysbench_{name}.txt").read_text()


def pgbench_texts(name: str) -> tuple[str, str]:
    return (FIXTURES / f"pgbench_{name}.out").read_text(), (
        FIXTURES / f"pgbench_{name}.err").read_text()


def pgbench_logs(name: str) -> list[Path]:
    return sorted(FIXTURES.glob(f"pgbench_{name}.txlog.*.gz"))


def raw_latencies_us(paths: Sequence[Path]) -> tuple[list[int], Counter[str], Counter[int]]:
    """The logs read naively: latencies, the other outcomes, completions per second."""
    latencies: list[int] = []
    others: Counter[str] = Counter()
    seconds: Counter[int] = Counter()
    for path in paths:
        with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
            for line in handle:
                fields = line.split()
                if fields[2].isdigit():
                    latencies.append(int(fields[2]))
                    seconds[int(fields[4])] += 1
                else:
                    others[fields[2]] += 1
    return latencies, others, seconds


def nearest_rank(values: Sequence[int], pct: float) -> int:
    """The nearest-rank percentile of ``values`` by sorting and indexing."""
    ordered = sorted(values)
    rank = math.ceil(Fraction(str(pct)) * len(ordered) / 100)
    return ordered[max(rank, 1) - 1]


def assert_one_line_error(call: Callable[[], object], *parts: str) -> DbOutputError:
    with pytest.raises(DbOutputError) as info:
        call()
    message = info.value.message
    assert message.strip() and len(message.splitlines()) == 1, message
    for part in parts:
        assert part in message, message
    return info.value


# --------------------------------------------------------------------------- sysbench


@pytest.fixture(params=SYSBENCH)
def sysbench(request: pytest.FixtureRequest) -> tuple[str, SysbenchRun]:
    text = sysbench_text(request.param)
    return text, parse_sysbench(text)


def test_sysbench_fixture_parses(sysbench: tuple[str, SysbenchRun]) -> None:
    _, run = sysbench
    assert run.version == "1.0.20"
    assert run.threads == 4
    assert [i.t_s for i in run.intervals] == [1.0, 2.0, 3.0]
    assert all(i.threads == 4 and i.latency_pct == 99.0 for i in run.intervals)
    assert run.transactions == run.events > 0
    assert run.queries == run.reads + run.writes + run.other
    assert run.ignored_errors == run.reconnects == 0
    assert run.latency_pct == 99.0
    assert run.latency_min_ms <= run.latency_avg_ms <= run.latency_pct_ms <= run.latency_max_ms


def test_sysbench_query_kinds() -> None:
    read_only = parse_sysbench(sysbench_text("oltp_read_only"))
    write_only = parse_sysbench(sysbench_text("oltp_write_only"))
    read_write = parse_sysbench(sysbench_text("oltp_read_write"))
    assert read_only.writes == 0 and read_only.reads > 0
    assert write_only.reads == 0 and write_only.writes > 0
    assert read_write.reads > 0 and read_write.writes > 0
    # oltp_read_write: 14 reads, 4 writes, BEGIN and COMMIT per transaction
    assert read_write.reads == 14 * read_write.transactions
    assert read_write.writes == 4 * read_write.transactions
    assert read_write.other == 2 * read_write.transactions


def test_sysbench_intervals_add_up_to_the_totals(sysbench: tuple[str, SysbenchRun]) -> None:
    _, run = sysbench
    # each interval is 1 s: its rates are its counts; the run goes on a few ms after
    # the last report, and each interval's length is only about 1 s
    assert sum(i.tps for i in run.intervals) == pytest.approx(run.transactions, rel=0.03)
    assert sum(i.qps for i in run.intervals) == pytest.approx(run.queries, rel=0.03)
    for kind, total in (("reads", run.reads), ("writes", run.writes), ("other", run.other)):
        assert sum(getattr(i, f"{kind}_per_s") for i in run.intervals) == pytest.approx(
            total, rel=0.03, abs=0.01)
    assert run.tps == pytest.approx(run.transactions / run.total_time_s, rel=0.01)
    assert run.qps == pytest.approx(run.queries / run.total_time_s, rel=0.01)
    # sysbench waits for the events under way at --time: at most its slowest event more
    assert SYSBENCH_SECONDS <= run.total_time_s <= (
        SYSBENCH_SECONDS + run.latency_max_ms / 1000 + 0.05)
    # every thread is busy the whole time: the summed latency is threads x time
    assert run.latency_sum_ms == pytest.approx(run.threads * run.total_time_s * 1000, rel=0.02)
    assert run.latency_avg_ms == pytest.approx(run.latency_sum_ms / run.events, abs=0.006)


def test_sysbench_histogram_holds_every_event(sysbench: tuple[str, SysbenchRun]) -> None:
    text, run = sysbench
    assert sum(count for _, count in run.histogram) == run.events
    printed = re.findall(r"^ *(\d+\.\d{3}) \|", text, re.MULTILINE)
    assert [f"{value:.3f}" for value, _ in run.histogram] == printed
    # each printed value is a bucket of sysbench's grid, to the last printed digit
    assert [f"{histogram_bucket_ms(value):.3f}" for value, _ in run.histogram] == printed
    # the buckets hold the extremes: within half a bucket (about 0.9 %) and rounding
    half_bucket = math.log(HISTOGRAM_MAX_MS / HISTOGRAM_MIN_MS) / (HISTOGRAM_BUCKETS - 1) / 2
    first, last = run.histogram[0][0], run.histogram[-1][0]
    assert abs(math.log(first / run.latency_min_ms)) <= half_bucket + 0.005 / run.latency_min_ms
    assert abs(math.log(last / run.latency_max_ms)) <= half_bucket + 0.005 / run.latency_max_ms
    mean = sum(v * n for v, n in run.histogram) / run.events
    assert mean == pytest.approx(run.latency_avg_ms, rel=2 * half_bucket)


def test_sysbench_p99_from_the_histogram_is_sysbench_own(
        sysbench: tuple[str, SysbenchRun]) -> None:
    text, run = sysbench
    printed = re.search(r"99th percentile: +(\d+\.\d\d)$", text, re.MULTILINE)
    assert printed is not None
    p99 = histogram_percentile(run.histogram, 99)
    assert run.latency_p99_ms == p99 == run.histogram_pct_ms(99)
    assert f"{histogram_bucket_ms(p99):.2f}" == printed.group(1)  # exactly sysbench's
    assert abs(p99 - run.latency_pct_ms) <= 0.0051  # 3 decimals against 2
    assert run.latency_p95_ms == histogram_percentile(run.histogram, 95) <= p99


@pytest.mark.parametrize("pct", [0.5, 1, 25, 50, 90, 95, 99, 99.9, 100])
def test_sysbench_percentile_is_the_rounded_rank_of_the_expanded_histogram(
        sysbench: tuple[str, SysbenchRun], pct: float) -> None:
    _, run = sysbench
    expanded = sorted(v for v, n in run.histogram for _ in range(n))
    rank = int(len(expanded) * pct / 100 + 0.5)  # sysbench rounds half up
    expected = expanded[rank - 1] if rank > 0 else HISTOGRAM_MIN_MS
    assert histogram_percentile(run.histogram, pct) == expected


def test_sysbench_percentile_rounds_the_rank_half_up() -> None:
    # 160 events: p99 is event 158.4, which sysbench rounds to the 158th (nearest
    # rank would take the 159th)
    histogram = [(2.0, 2), (1.0, 158)]  # order does not matter
    assert histogram_percentile(histogram, 99) == 1.0
    # 150 events: 148.5 rounds up to the 149th
    assert histogram_percentile([(1.0, 148), (2.0, 1), (3.0, 1)], 99) == 2.0
    # fewer than half an event: sysbench's first bucket, 0.001 ms, empty or not
    assert histogram_percentile([(5.0, 10)], 4.9) == HISTOGRAM_MIN_MS
    assert histogram_percentile([(5.0, 10)], 5) == 5.0
    assert histogram_percentile([(5.0, 10)], 100) == 5.0


@pytest.mark.parametrize("histogram, pct", [
    ([(1.0, 1)], -1), ([(1.0, 1)], 100.5), ([(1.0, 1)], math.nan), ([], 50),
    ([(1.0, 0)], 50), ([(1.0, 3), (2.0, -1)], 50),
])  # fmt: skip
def test_sysbench_percentile_refuses(histogram: list[tuple[float, int]], pct: float) -> None:
    with pytest.raises(ValueError):
        histogram_percentile(histogram, pct)


def test_sysbench_bucket_grid() -> None:
    assert histogram_bucket_ms(HISTOGRAM_MIN_MS) == pytest.approx(HISTOGRAM_MIN_MS)
    assert histogram_bucket_ms(HISTOGRAM_MAX_MS) == pytest.approx(HISTOGRAM_MAX_MS)
    assert histogram_bucket_ms(1e-9) == histogram_bucket_ms(HISTOGRAM_MIN_MS)  # clamped
    assert histogram_bucket_ms(1e9) == histogram_bucket_ms(HISTOGRAM_MAX_MS)
    assert histogram_bucket_ms(15.545) == pytest.approx(15.545, abs=0.0005)
    with pytest.raises(ValueError):
        histogram_bucket_ms(0.0)


@pytest.mark.parametrize("name", sorted(SYSBENCH_ERRORS))
def test_sysbench_error_fixture(name: str) -> None:
    error = assert_one_line_error(
        lambda: parse_sysbench(sysbench_text(name)), "sysbench failed: FATAL: ",
        SYSBENCH_ERRORS[name])
    assert isinstance(error, UserError)


def test_sysbench_error_anywhere_wins() -> None:
    text = sysbench_text("oltp_read_write")
    for line in ("FATAL: Thread initialization failed!", "ALERT: attempt to use an already "
                 "closed connection"):
        assert_one_line_error(partial(parse_sysbench, text + line + "\n"), line)


def sysbench_cuts(text: str) -> list[int]:
    """Where to cut ``text``: every 53rd character, and all around each line end."""
    ends = [m.start() for m in re.finditer("\n", text)]
    near = {p + d for p in ends for d in (-2, -1, 0, 1)}
    end = text.index("\n", text.index("execution time (avg/stddev):"))
    return sorted({*range(0, end, 53), *(p for p in near if 0 <= p <= end)})


@pytest.mark.parametrize("name", SYSBENCH)
def test_sysbench_truncated_output_is_refused(name: str) -> None:
    text = sysbench_text(name)
    for cut in sysbench_cuts(text):
        assert_one_line_error(partial(parse_sysbench, text[:cut]), "sysbench output: ")


@pytest.mark.parametrize("old, new, part", [
    ("tps: ", "tps: x", "not an OLTP interval"),
    ("reconn/s: 0.00\n", "reconn/s: \n", "not an OLTP interval"),
    ("    transactions:", "    transaction:", "'transactions:'"),
    ("        read:  ", "        reads: ", "'read:'"),
    ("Latency histogram", "Latency histogran", "'Latency histogram"),
    ("       value  ---", "       valeu  ---", "no 'value ... count' header"),
    ("99th percentile:", "99nd percentile:", "'Nth percentile:'"),
    ("General statistics:", "General statistic:", "'General statistics:'"),
    ("sysbench 1.0.20", "sysbnch 1.0.20", "banner"),
    ("Number of threads: 4", "Number of threads: four", "'Number of threads:'"),
])  # fmt: skip
def test_sysbench_garbled_output_is_refused(old: str, new: str, part: str) -> None:
    text = sysbench_text("oltp_read_write")
    assert old in text
    assert_one_line_error(lambda: parse_sysbench(text.replace(old, new, 1)), part)


def test_sysbench_inconsistent_counts_are_refused() -> None:
    text = sysbench_text("oltp_read_only")
    bucket = re.search(r"^ *\d+\.\d{3} \|\** +\d+\n", text, re.MULTILINE)
    assert bucket is not None
    without_bucket = text[:bucket.start()] + text[bucket.end():]
    assert_one_line_error(lambda: parse_sysbench(without_bucket), "histogram holds")
    total = re.search(r"total: +(\d+)", text)
    assert total is not None
    wrong_total = text.replace(total.group(0), total.group(0) + "1")
    assert_one_line_error(lambda: parse_sysbench(wrong_total), "queries in total")
    events = re.search(r"total number of events: +(\d+)", text)
    assert events is not None
    wrong_events = text.replace(events.group(0), events.group(0) + "0")
    assert_one_line_error(lambda: parse_sysbench(wrong_events), "transactions but")
    assert_one_line_error(lambda: parse_sysbench(text + text), "the output of one run only")


def test_sysbench_lua_report_and_rate_lines_are_read() -> None:
    # sysbench.report_default prints "err/s" without its colon; --rate adds a queue line
    text = sysbench_text("oltp_read_write")
    first = re.search(r"^\[ 1s \].*$", text, re.MULTILINE)
    assert first is not None
    variant = first.group(0).replace("err/s:", "err/s") + (
        "\n[ 1s ] queue length: 0, concurrency: 3")
    run = parse_sysbench(text.replace(first.group(0), variant))
    assert run.intervals == parse_sysbench(text).intervals


def check_sysbench(text: str) -> None:
    """The only outcomes: a SysbenchRun, or DbOutputError with a one-line message."""
    try:
        run = parse_sysbench(text)
    except DbOutputError as exc:
        assert exc.message.strip() and len(exc.message.splitlines()) == 1, exc.message
        return
    assert isinstance(run, SysbenchRun)
    assert sum(n for _, n in run.histogram) == run.events


SYSBENCH_TOKENS = [
    "\n", " ", "[ 1s ] ", "thds: 4 ", "tps: 1.5 ", "FATAL: x", "0", "9" * 30, ".", "|",
    "*", "Latency histogram (values are in milliseconds)\n",
    "       value  ------------- distribution ------------- count\n", "SQL statistics:\n",
    "General statistics:\n", "Latency (ms):\n", "Threads fairness:\n", "    read: ",
    "    total: ", "    transactions: ", " (1.0 per sec.)", "99th percentile: ",
]


@FUZZ
@given(st.text(max_size=300) | st.lists(st.sampled_from(SYSBENCH_TOKENS), max_size=60).map(
    "".join))
def test_sysbench_never_crashes_on_garbage(text: str) -> None:
    check_sysbench(text)


@FUZZ
@given(st.data())
def test_sysbench_never_crashes_on_damaged_fixtures(data: st.DataObject) -> None:
    text = sysbench_text(data.draw(st.sampled_from(SYSBENCH)))
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 40)))
        text = text[:start] + data.draw(st.text(max_size=12)) + text[end:]
    check_sysbench(text)


# --------------------------------------------------------------------------- pgbench


@pytest.fixture(params=sorted(PGBENCH))
def pgbench(request: pytest.FixtureRequest) -> tuple[str, PgbenchRun]:
    return request.param, parse_pgbench(*pgbench_texts(request.param))


def test_pgbench_fixture_parses(pgbench: tuple[str, PgbenchRun]) -> None:
    name, run = pgbench
    assert run.version.startswith("15.")
    assert run.transaction_type == PGBENCH[name]
    assert (run.scale, run.query_mode, run.clients, run.threads) == (2, "simple", 4, 2)
    assert run.duration_s == PGBENCH_SECONDS
    assert run.transactions > 0
    assert run.latency_stddev_ms is not None and run.latency_stddev_ms > 0
    assert run.initial_connection_ms is not None and run.initial_connection_ms > 0
    assert run.tps == pytest.approx(run.transactions / run.duration_s, rel=0.02)


def test_pgbench_measured_time_is_what_its_tps_was_taken_over(
        pgbench: tuple[str, PgbenchRun]) -> None:
    """On a loaded host pgbench's tps is taken over less (or more) than ``-T``: the
    stored seconds are its own, so tps x seconds gives back the transactions."""
    name, run = pgbench
    assert run.measured_s * run.tps == pytest.approx(run.transactions)
    assert run.measured_s == pytest.approx(run.duration_s, rel=0.01)  # fixtures: a quiet host
    stdout, stderr = pgbench_texts(name)
    slower = re.sub(r"^tps = [0-9.]+", f"tps = {run.transactions / 2.7:.6f}", stdout,
                    flags=re.MULTILINE)
    loaded = parse_pgbench(slower, stderr)
    assert loaded.duration_s == PGBENCH_SECONDS and loaded.measured_s == pytest.approx(2.7)


def test_pgbench_intervals_match_the_seconds_and_the_totals(
        pgbench: tuple[str, PgbenchRun]) -> None:
    _, run = pgbench
    # pgbench can end before its last report: -T 2 -P 1 gives 1 or 2 progress lines
    assert [i.t_s for i in run.intervals] in ([1.0], [1.0, 2.0])
    assert all(i.latency_avg_ms > 0 and i.latency_stddev_ms > 0 for i in run.intervals)
    if len(run.intervals) == PGBENCH_SECONDS:
        assert sum(i.tps for i in run.intervals) == pytest.approx(run.transactions, rel=0.03)
        assert sum(i.failed for i in run.intervals) == pytest.approx(run.failed, rel=0.03)
    assert sum(i.failed for i in run.intervals) <= run.failed


def test_pgbench_rate_and_retry_fields() -> None:
    rate = parse_pgbench(*pgbench_texts("tpcb_like_rate"))
    assert rate.skipped > 0 and rate.lag_avg_ms is not None and rate.lag_avg_ms > 0
    assert all(i.lag_ms is not None and i.skipped is not None for i in rate.intervals)
    assert sum(i.skipped or 0 for i in rate.intervals) <= rate.skipped
    serializable = parse_pgbench(*pgbench_texts("tpcb_like_serializable"))
    assert serializable.failed > 0 and serializable.retried > 0
    assert all(i.retried is not None and i.retries is not None and i.failed > 0
               for i in serializable.intervals)
    assert sum(i.retried or 0 for i in serializable.intervals) <= serializable.retried
    plain = parse_pgbench(*pgbench_texts("tpcb_like"))
    assert (plain.skipped, plain.retried, plain.failed, plain.lag_avg_ms) == (0, 0, 0, None)
    assert all(i.lag_ms is None and i.skipped is None and i.retried is None
               for i in plain.intervals)


@pytest.mark.parametrize("name", sorted(PGBENCH))
def test_pgbench_logs_count_every_transaction(name: str) -> None:
    run = parse_pgbench(*pgbench_texts(name))
    counts = read_transaction_logs(pgbench_logs(name))
    latencies, others, _ = raw_latencies_us(pgbench_logs(name))
    assert counts.count == len(latencies)
    assert counts.failed == sum(n for k, n in others.items() if k != "skipped")
    assert counts.skipped == others["skipped"]
    if name in PGBENCH_SAMPLED:
        expected = run.transactions * PGBENCH_SAMPLED[name]
        assert abs(counts.count - expected) < 5 * math.sqrt(expected)  # binomial, 5 sigma
        return
    assert counts.count == run.transactions
    assert counts.failed == run.failed
    assert counts.skipped == run.skipped
    # the log's latencies are whole us, the summary's average 3 decimals of a ms
    assert counts.mean_us == pytest.approx(run.latency_avg_ms * 1000, abs=1.0)


def test_pgbench_log_failure_kinds() -> None:
    counts = read_transaction_logs(pgbench_logs("tpcb_like_serializable"))
    assert counts.failures_by_kind == {"serialization": counts.failed}
    assert read_transaction_logs(pgbench_logs("tpcb_like")).failures_by_kind == {}


@pytest.mark.parametrize("name", sorted(PGBENCH))
def test_pgbench_log_percentiles_are_sorted_list_nearest_rank(name: str) -> None:
    counts = read_transaction_logs(pgbench_logs(name))
    latencies, _, seconds = raw_latencies_us(pgbench_logs(name))
    for pct in (0, 0.1, 1, 10, 50, 90, 95, 99, 99.9, 99.99, 100):
        assert counts.percentile_us(pct) == nearest_rank(latencies, pct), pct
    for pct in (50, 95, 99):  # numpy's definition of the same
        assert counts.percentile_us(pct) == np.percentile(latencies, pct, method="inverted_cdf")
    assert counts.min_us == min(latencies)
    assert counts.max_us == max(latencies)
    assert counts.mean_us == pytest.approx(statistics.fmean(latencies), rel=1e-12)
    assert sum(counts.per_second()) == counts.count
    first = min(seconds)
    assert counts.per_second() == [seconds[first + i] for i in range(max(seconds) - first + 1)]
    assert len(counts.per_second()) in (PGBENCH_SECONDS, PGBENCH_SECONDS + 1)


def test_pgbench_per_second_from_a_start() -> None:
    counts = read_transaction_logs(pgbench_logs("tpcb_like"))
    first = min(counts.completions_per_s)
    assert counts.per_second(first - 2)[:2] == [0, 0]
    assert counts.per_second(first - 2)[2:] == counts.per_second()
    assert counts.per_second(first + 1) == counts.per_second()[1:]


def write_log(path: Path, lines: Sequence[str]) -> Path:
    text = "".join(f"{line}\n" for line in lines)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def generated_log(rng: random.Random, size: int, extras: int) -> list[str]:
    """Lines as pgbench writes them: latencies, failures, skips, 0-2 extra fields."""
    lines = []
    start = 1_795_000_000
    for n in range(size):
        outcome = rng.choices(
            ["ok", "skipped", "failed", "serialization", "deadlock"], [90, 3, 3, 2, 2])[0]
        latency = str(int(rng.lognormvariate(7, 1))) if outcome == "ok" else outcome
        end_us = start * 1_000_000 + n * 997 + rng.randrange(500)
        extra = "".join(f" {rng.randrange(5000)}" for _ in range(extras))
        lines.append(f"{n % 8} {n // 8 + 1} {latency} 0 {end_us // 10**6} "
                     f"{end_us % 10**6}{extra}")
    return lines


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("extras", [0, 1, 2])
def test_pgbench_generated_logs(tmp_path: Path, suffix: str, extras: int) -> None:
    rng = random.Random(17 + extras)
    lines = generated_log(rng, 20_000, extras)
    paths = [write_log(tmp_path / f"tx.{i}{suffix}", lines[i::3]) for i in range(3)]
    counts = read_transaction_logs(paths)
    latencies = [int(f.split()[2]) for f in lines if f.split()[2].isdigit()]
    words = Counter(f.split()[2] for f in lines if not f.split()[2].isdigit())
    assert counts.count == len(latencies)
    assert counts.skipped == words["skipped"]
    assert counts.failed == words["failed"] + words["serialization"] + words["deadlock"]
    assert dict(counts.failures_by_kind) == {k: n for k, n in words.items() if k != "skipped"}
    array = np.array(latencies)
    for pct in (0, 1, 33.3, 50, 90, 99, 99.9, 100):
        assert counts.percentile_us(pct) == nearest_rank(latencies, pct)
    for pct in (50, 90, 99):
        assert counts.percentile_us(pct) == np.percentile(array, pct, method="inverted_cdf")
    assert counts.mean_us == pytest.approx(float(array.mean()), rel=1e-12)
    assert (counts.min_us, counts.max_us) == (min(latencies), max(latencies))
    assert sum(counts.per_second()) == len(latencies)


def test_pgbench_percentile_reads_the_decimal() -> None:
    counts = LatencyCounts(counts_us={v: 1 for v in range(1, 1001)}, completions_per_s={})
    assert counts.percentile_us(99.9) == 999  # not 1000: 99.9 is 999/1000
    assert counts.percentile_us(0.1) == 1
    assert counts.percentile_us(0) == 1
    assert counts.percentile_us(50) == 500
    assert counts.percentile_us(50.05) == 501


@FUZZ
@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=300),
       st.floats(0, 100, allow_nan=False))
def test_pgbench_percentile_property(values: list[int], pct: float) -> None:
    counts = LatencyCounts(counts_us=Counter(values), completions_per_s={})
    value = counts.percentile_us(pct)
    assert value == nearest_rank(values, pct)
    # the definition: enough at or below it, not enough below it
    needed = Fraction(repr(pct)) * len(values) / 100
    assert sum(v <= value for v in values) >= needed
    assert sum(v < value for v in values) < max(needed, Fraction(1))


def test_pgbench_empty_counts_refuse() -> None:
    counts = LatencyCounts(counts_us={}, completions_per_s={}, failed=3)
    assert counts.count == 0 and counts.per_second() == []
    for call in (lambda: counts.mean_us, lambda: counts.min_us, lambda: counts.max_us,
                 lambda: counts.percentile_us(50)):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        LatencyCounts(counts_us={1: 1}, completions_per_s={}).percentile_us(101)


@pytest.mark.parametrize("line", [
    "0 1 123 0 1795656250", "0 1 123 0 1795656250 12 3 4 5", "0 1 12.5 0 1795656250 1",
    "0 1 aborted 0 1795656250 1", "0 1 123 0 1795656250 1234567", "0 1 -3 0 1795656250 1",
    "", "0  1 123 0 1795656250 1", "0 1 123 0 1795656250 1 x", "0 1 ١٢٣ 0 1795656250 1",
])  # fmt: skip
def test_pgbench_bad_log_lines_are_refused(tmp_path: Path, line: str) -> None:
    path = write_log(tmp_path / "tx.1", ["0 1 100 0 1795656250 5", line])
    assert_one_line_error(lambda: read_transaction_logs([path]), f"{path}:2 ")


def test_pgbench_cut_and_unreadable_logs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tx.1"
    path.write_text("0 1 100 0 1795656250 5\n0 2 1")
    assert_one_line_error(lambda: read_transaction_logs([path]), f"{path}:2 ")
    gz = tmp_path / "tx.2.gz"
    gz.write_bytes(gzip.compress(b"0 1 100 0 1795656250 5\n" * 1000)[:-20])
    assert_one_line_error(lambda: read_transaction_logs([gz]), "cannot read", str(gz))
    assert_one_line_error(lambda: read_transaction_logs([tmp_path / "none"]), "cannot read")
    binary = tmp_path / "tx.3"
    binary.write_bytes(b"0 1 100 0 1795656250 5\n\xff\xfe\n")
    assert_one_line_error(lambda: read_transaction_logs([binary]), f"{binary}:2 ")


@pytest.mark.parametrize("name", sorted(PGBENCH_ERRORS))
def test_pgbench_error_fixture(name: str) -> None:
    assert_one_line_error(lambda: parse_pgbench(*pgbench_texts(name)), "pgbench: error: ",
                          PGBENCH_ERRORS[name])


def test_pgbench_ignored_vacuum_errors_are_not_errors() -> None:
    stdout, stderr = pgbench_texts("custom_vacuum_ignored")
    assert "pgbench: error: ERROR:  relation" in stderr
    run = parse_pgbench(stdout, stderr)
    assert run.transaction_type.endswith("/select1.sql") and run.scale == 1
    assert run.transactions > 0 and len(run.intervals) in (1, 2)
    # without pgbench's word that it goes on, the first error is the run's
    kept = stderr.replace("pgbench: detail: (ignoring this error and continuing anyway)\n", "")
    assert_one_line_error(lambda: parse_pgbench(stdout, kept), "pgbench: error: ERROR: relation",
                          "pgbench_branches")
    last = stderr.rindex("pgbench: detail:")
    assert_one_line_error(lambda: parse_pgbench(stdout, stderr[:last]), "pgbench_history")


@pytest.mark.parametrize("stderr_line, part", [
    ("pgbench: fatal: could not connect", "pgbench: fatal: could not connect"),
    ("client 3 aborted in command 4 of script 0", "pgbench: client 3 aborted"),
    ("Run was aborted; the above results are incomplete.", "pgbench: Run was aborted"),
])  # fmt: skip
def test_pgbench_older_error_forms(stderr_line: str, part: str) -> None:
    stdout, stderr = pgbench_texts("tpcb_like")
    assert_one_line_error(lambda: parse_pgbench(stdout, stderr + stderr_line + "\n"), part)


def test_pgbench_truncated_output_is_refused() -> None:
    stdout, stderr = pgbench_texts("tpcb_like_rate")
    for cut in range(len(stdout)):  # the last line end too
        assert_one_line_error(partial(parse_pgbench, stdout[:cut], stderr), "pgbench output: ")
    last = stderr.rindex("progress:")
    for cut in range(last + len("progress:"), len(stderr)):
        assert_one_line_error(partial(parse_pgbench, stdout, stderr[:cut]), "progress line")


@pytest.mark.parametrize("old, new, part", [
    ("tps, lat", "tps lat", "progress line"),
    ("0 failed", "zero failed", "progress line"),
    ("scaling factor: 2", "scaling factor: two", "'scaling factor:'"),
    ("duration: 2 s", "number of transactions per client: 10", "-T"),
    ("latency average =", "latency avg =", "'latency average ='"),
    ("pgbench (15", "pgbnch (15", "banner"),
])  # fmt: skip
def test_pgbench_garbled_output_is_refused(old: str, new: str, part: str) -> None:
    stdout, stderr = pgbench_texts("tpcb_like")
    assert old in stdout + stderr
    assert_one_line_error(
        lambda: parse_pgbench(stdout.replace(old, new), stderr.replace(old, new)), part)


@pytest.mark.parametrize("line, expected", [
    ("progress: 3.0 s, 0.0 tps, lat -nan ms stddev -nan",
     (3.0, 0.0, math.nan, math.nan, 0, None, None, None, None)),
    ("progress: 1.0 s, 10.0 tps, lat 1.500 ms stddev nan, lag 0.100 ms",
     (1.0, 10.0, 1.5, math.nan, 0, 0.1, None, None, None)),
    ("progress: 1.0 s, 10.0 tps, lat 1.500 ms stddev 0.2, 1 failed, lag 0.1 ms, 4 skipped, "
     "2 retried, 3 retries", (1.0, 10.0, 1.5, 0.2, 1, 0.1, 4, 2, 3)),
    ("progress: 1795656250.123 s, inf tps, lat 0.000 ms stddev 0.000, 0 failed",
     (1795656250.123, math.inf, 0.0, 0.0, 0, None, None, None, None)),
])  # fmt: skip
def test_pgbench_progress_variants(line: str, expected: tuple[object, ...]) -> None:
    stdout, _ = pgbench_texts("tpcb_like")
    (interval,) = parse_pgbench(stdout, line + "\n").intervals
    got = (interval.t_s, interval.tps, interval.latency_avg_ms, interval.latency_stddev_ms,
           interval.failed, interval.lag_ms, interval.skipped, interval.retried,
           interval.retries)
    assert [str(v) for v in got] == [str(v) for v in expected]


def test_pgbench_optional_summary_lines() -> None:
    stdout, stderr = pgbench_texts("tpcb_like")
    stdout = re.sub(r"^latency stddev.*\n", "", stdout, flags=re.MULTILINE)
    stdout = stdout.replace("(without initial connection time)",
                            "(including reconnection times)")
    stdout = stdout.replace("initial connection time", "average connection time")
    run = parse_pgbench(stdout, stderr)
    assert run.latency_stddev_ms is None and run.initial_connection_ms is None
    assert run.tps > 0


def check_pgbench(stdout: str, stderr: str) -> None:
    """The only outcomes: a PgbenchRun, or DbOutputError with a one-line message."""
    try:
        run = parse_pgbench(stdout, stderr)
    except DbOutputError as exc:
        assert exc.message.strip() and len(exc.message.splitlines()) == 1, exc.message
        return
    assert isinstance(run, PgbenchRun)


PGBENCH_TOKENS = [
    "\n", " ", "progress: ", "1.0 s, ", "5.0 tps, ", "lat 1.0 ms stddev 0.1", ", 0 failed",
    "nan", "-nan", "9" * 30, "pgbench (15.18)\n", "transaction type: x\n", "tps = 1.0 ",
    "(without initial connection time)", "scaling factor: 1\n", "duration: 2 s\n",
    "latency average = 1.0 ms\n", "pgbench: error: x", "client 1 aborted",
]


@FUZZ
@given(st.text(max_size=200) | st.lists(st.sampled_from(PGBENCH_TOKENS), max_size=50).map(
    "".join), st.text(max_size=100) | st.lists(st.sampled_from(PGBENCH_TOKENS),
                                                max_size=30).map("".join))
def test_pgbench_never_crashes_on_garbage(stdout: str, stderr: str) -> None:
    check_pgbench(stdout, stderr)


@FUZZ
@given(st.data())
def test_pgbench_never_crashes_on_damaged_fixtures(data: st.DataObject) -> None:
    stdout, stderr = pgbench_texts(data.draw(st.sampled_from(sorted(PGBENCH))))
    texts = [stdout, stderr]
    for _ in range(data.draw(st.integers(1, 4))):
        which = data.draw(st.integers(0, 1))
        text = texts[which]
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 30)))
        texts[which] = text[:start] + data.draw(st.text(max_size=10)) + text[end:]
    check_pgbench(texts[0], texts[1])


LOG_TOKENS = [" ", "\n", "0", "1", "17", "9" * 25, "skipped", "failed", "serialization",
              "-", ".", "x", "\t", "\r", "1795656250"]


@FUZZ
@given(st.binary(max_size=200) | st.lists(st.sampled_from(LOG_TOKENS), max_size=60).map(
    lambda parts: "".join(parts).encode()))
def test_pgbench_log_reader_never_crashes_on_garbage(tmp_path_factory: pytest.TempPathFactory,
                                                     content: bytes) -> None:
    path = tmp_path_factory.mktemp("log") / "tx.0"
    path.write_bytes(content)
    try:
        counts = read_transaction_logs([path])
    except DbOutputError as exc:
        assert exc.message.strip() and len(exc.message.splitlines()) == 1, exc.message
        return
    assert counts.count + counts.failed + counts.skipped == content.count(b"\n") + (
        not content.endswith(b"\n") and len(content) > 0)


def test_error_messages_are_one_line() -> None:
    error = output_error("pgbench", "first\nsecond\t third")
    assert error.message == "pgbench output: first second third"
    assert DbOutputError("a\n\nb").message == "a b"
