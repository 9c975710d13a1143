"""The database suite's report side: its pages (figures, the review's published figures
labelled as other hardware, the fits-in-memory warning, timelines, settings), ``ssdlab
show`` lines, what ``ssdlab run db`` prints at the end, the comparison overlay, and the
review's published database figures shipped as package data."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.db import PGBENCH, SPEC, SYSBENCH
from ssdlab.plan.db_records import DatasetRecord, DbResult, SecondPoint
from ssdlab.reference.db_published import (
    SQLSERVER_TPCC,
    SYSBENCH_OLTP,
    load_db_published,
    parse_db_published,
    published_match,
)
from ssdlab.reference.published import COLUMNS, PublishedRows, read_published
from ssdlab.report.build import render
from ssdlab.report.db_pages import PAGES, db_overlay, downsample
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, RunHead, TestState
from tests.support.records import doc

MIB = 2**20
GIB = 2**30
RW = "sysbench-oltp_read_write"
RO = "sysbench-oltp_read_only"
TPCB = "pgbench-tpcb-like"
SELECT = "pgbench-select-only"
FITS_WARNING = ("the sysbench-oltp dataset (9.5 MiB) fits in its buffer and the page cache "
                "within its memory limit (264 MiB): the results measure memory more than "
                "the drive")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "store.sqlite") as s:
        yield s


def dataset(*, fits: bool = False, workload: str = SYSBENCH) -> DatasetRecord:
    if workload == PGBENCH:
        return DatasetRecord(shape="scale 200 (20,000,000 accounts, about 2.98 GiB)",
                             pgbench_scale=200, estimated_bytes=3_200_000_000,
                             bytes=3_126_000_000, buffer_bytes=305 * MIB, buffer_ratio=0.1023,
                             memory_limit_bytes=561 * MIB, memory_bytes=561 * MIB,
                             fits_in_memory=False, direct_io=False)
    if fits:
        return DatasetRecord(shape="4 tables x 25,000 rows (about 22.9 MiB)", tables=4,
                             table_rows=25_000, estimated_bytes=24_000_000,
                             bytes=9_961_472, buffer_bytes=8 * MIB, buffer_ratio=0.8421,
                             memory_limit_bytes=264 * MIB, memory_bytes=264 * MIB,
                             fits_in_memory=True, direct_io=True)
    return DatasetRecord(shape="16 tables x 1,000,000 rows (about 3.58 GiB)", tables=16,
                         table_rows=1_000_000, estimated_bytes=3_840_000_000,
                         bytes=4_102_029_312, buffer_bytes=366 * MIB, buffer_ratio=0.0936,
                         memory_limit_bytes=622 * MIB, memory_bytes=366 * MIB,
                         fits_in_memory=False, direct_io=True)


def series(tps: float, latency: float, seconds: int = 60) -> list[SecondPoint]:
    return [SecondPoint(t_s=float(t), tps=tps * (1 + 0.05 * ((t % 7) - 3) / 3),
                        latency_ms=latency * (1 + 0.1 * ((t % 5) - 2) / 2),
                        errors_per_s=1.0 if t == 30 else 0.0)
            for t in range(1, seconds + 1)]


def sysbench(mode: str = "oltp_read_write", *, tps: float = 2345.6, fits: bool = False,
             threads: int = 32) -> dict[str, Any]:
    return DbResult(
        workload=SYSBENCH, mode=mode, server="MariaDB 10.11.6", tool="sysbench 1.0.20",
        threads=threads, warmup_seconds=120.0, seconds=60.0012, transactions=int(tps * 60),
        tps=tps, qps=tps * 20, errors=1, latency_avg_ms=13.64, latency_p95_ms=21.89,
        latency_p99_ms=28.67, latency_max_ms=187.2,
        latency_source="sysbench's own latency histogram (--histogram)",
        series=series(tps, 21.0), series_latency="the interval's 95th percentile",
        dataset=dataset(fits=fits),
        settings={"innodb_buffer_pool_size": "383778816", "innodb_flush_method": "O_DIRECT",
                  "innodb_flush_log_at_trx_commit": "1"},
        warning=FITS_WARNING if fits else None,
        message=f"{tps:,.1f} TPS, latency avg 13.64 ms, p95 21.89 ms, p99 28.67 ms "
                f"({threads} threads, 60 s)",
    ).to_json()


def pgbench(mode: str = "tpcb-like", tps: float = 4321.0) -> dict[str, Any]:
    return DbResult(
        workload=PGBENCH, mode=mode, server="PostgreSQL 16.4", tool="pgbench 16.4",
        threads=32, warmup_seconds=120.0, seconds=60.0, transactions=int(tps * 60), tps=tps,
        errors=0, latency_avg_ms=7.41, latency_p95_ms=14.2, latency_p99_ms=22.5,
        latency_max_ms=310.4, latency_source="pgbench's per-transaction log (-l)",
        series=series(tps, 7.4, 3600), series_latency="the interval's mean",
        dataset=dataset(workload=PGBENCH), settings={"shared_buffers": "39040"},
        message=f"{tps:,.1f} TPS, latency avg 7.41 ms, p95 14.20 ms, p99 22.50 ms "
                "(32 threads, 60 s)",
    ).to_json()


def stored(store: Store, tests: dict[str, tuple[str, dict[str, Any]]], *,
           labels: dict[str, str] | None = None, model: str = "Micron_9400_MTFDKCC7T6TGH",
           quick: bool = False) -> RunData:
    """A db run with ``tests`` (name -> (status, result)), as the run module stores one."""
    store.run_labels = dict(labels or {})
    run_id = store.new_run(RunHead(
        "db", "quick" if quick else "default", quick,
        {"path": "/dev/nvme0n1", "kind": "block", "model": model,
                                   "capacity_bytes": 7_681_501_126_656},
        {"hostname": "lab"}, doc({"options": {"threads": 32}}), {"ssdlab": "test"},
        ["ssdlab", "run", "db"]))
    for name, (status, result) in tests.items():
        workload = SYSBENCH if name.startswith("sysbench") else PGBENCH
        store.set_test(run_id, name, TestState(
            status,
            doc({"workload": workload, "mode": name.split("-", 1)[1],
                               "threads": 32, "warmup_seconds": 120.0, "seconds": 60.0}),
            {}, doc(result)))
    failed = [n for n, (status, _) in tests.items() if status == "failed"]
    store.finish_run(run_id, "complete", f"{len(failed)} test(s) failed" if failed else "")
    return store.load(run_id)


def balanced(text: str) -> str:
    for tag in ("section", "svg", "table", "figure", "div"):
        assert text.count(f"<{tag}") == text.count(f"</{tag}>"), tag
    return text


def section(text: str, anchor: str) -> str:
    """The HTML of one page, its apostrophes unescaped (for reading the checks)."""
    return text.split(f'id="{anchor}"', 1)[1].split("<section", 1)[0].replace("&#x27;", "'")


# ------------------------------------------------------------------------ the pages


def test_every_db_test_has_pages_and_show_lines() -> None:
    for name in SPEC.results:
        assert PAGES.pages_of(name) is not None and PAGES.show_of(name) is not None
    assert PAGES.overlay is db_overlay


def test_a_test_page_shows_the_set_up_figures_published_bars_and_timelines(
    store: Store,
) -> None:
    run = stored(store, {RW: ("complete", sysbench())})
    text, _ = render([run])
    page = section(balanced(text), "run0-t0")
    for fragment in (
        "Database: sysbench-oltp_read_write on MariaDB 10.11.6", "2,345.6 TPS, latency avg",
        "sysbench 1.0.20", "2:00 (120 s) warm-up", "16 tables x 1,000,000 rows",
        "3.82 GiB (4,102.0 MB) after loading; estimated 3.58 GiB (3,840.0 MB), 1.07x",
        "buffer pool (InnoDB)", "366 MiB (383.8 MB), 0.0936 of the dataset",
        "622 MiB (652.2 MB), a memory cgroup", "no: the dataset is larger",
        "yes: the server's data files bypass the page cache (O_DIRECT)",
        "changed nothing: the dataset as planned",
        "46,912.0", "13.64", "21.89", "28.67", "187.20",  # QPS and latency table (ms)
        "Percentiles from sysbench's own latency histogram",
        "Beside the review's published figures", "The same kind of test",
        "published, other hardware", "Micron 9400 PRO", "Percona XtraDB 5.5.30",
        "100 tables x 10,000,000 rows", "24 GB buffer pool", "capacity not stated",
        "TPS per interval", "Latency per interval: the interval's 95th percentile",
        "Errors per second", "average 2,346 TPS",
    ):
        assert fragment in page, fragment
    # this run and the review's figures in the bars: TPS, average and p99 latency
    for tip in ("average TPS: this run: 2,346 TPS",
                "average TPS: published, other hardware: 11,615 TPS",
                "average: published, other hardware: 11.0 ms",
                "p99: published, other hardware: 19.8 ms", "p99: this run: 28.7 ms"):
        assert f'data-tip="{tip}"' in page, tip
    assert "WARNING" not in page
    # the review cited as a reader can find it, not by a file of the project's
    assert "from the review Micron 9400 PRO and MAX NVMe SSDs: a review in Chinese, " \
        "StorageReview." in page and ".txt" not in page
    # Little's law: the review's 11,615 TPS at 11.02 ms are 128 in flight for 32 threads
    assert "give 128 for the 32 threads stated (4.0x)" in page
    assert "summed over about 4 of them" in page
    settings = section(text, "run0-t0-settings")
    assert "innodb_flush_log_at_trx_commit" in settings and "server settings" in settings


def test_other_mixes_and_pgbench_show_the_review_as_context_only(store: Store) -> None:
    run = stored(store, {RO: ("complete", sysbench("oltp_read_only", tps=9000.0)),
                         TPCB: ("complete", pgbench()),
                         SELECT: ("complete", pgbench("select-only", 30000.0))})
    text, _ = render([run])
    read_only, tpcb, select = (section(text, f"run0-t{n}") for n in range(3))
    for page in (read_only, tpcb):
        assert "context only, not comparable" in page and "pub-tps" not in page
        assert "published, other hardware: Micron 9400 PRO" in page
    assert "this test is oltp_read_only, a different mix" in read_only
    assert "a different benchmark" in tpcb and "TPC-C-like" in tpcb and "12,650.1" in tpcb
    assert "SQL Server 2014" in tpcb and "15,000 virtual users" in tpcb
    assert "published" not in select and "shared_buffers" in select
    # pgbench has no QPS; its hour of seconds is drawn as 600 points of 6 s each
    assert "QPS: sysbench only" in tpcb
    assert "Each point is the mean of 6 consecutive intervals" in tpcb
    assert "Latency per interval: the interval's mean" in tpcb


def test_the_warning_shows_when_the_dataset_fits_in_memory(store: Store, tmp_path: Path
                                                           ) -> None:
    run = stored(store, {RW: ("complete", sysbench(fits=True))}, quick=True)
    text, _ = render([run])
    page = section(text, "run0-t0")
    assert f"WARNING: {FITS_WARNING}" in page
    assert "YES: the results measure memory more than the drive" in page
    assert "This run used the quick profile" in page
    show = PAGES.show_of(RW)
    assert show is not None
    assert f"  WARNING: {FITS_WARNING}" in show(run, run.test(RW))
    assert f"    WARNING: {FITS_WARNING}" in PAGES.outcome(run, tmp_path).lines


def test_show_lines_give_the_figures_dataset_and_buffer(store: Store) -> None:
    run = stored(store, {RW: ("complete", sysbench()), TPCB: ("complete", pgbench())})
    show = PAGES.show_of(RW)
    assert show is not None
    lines = show(run, run.test(RW))
    assert lines[0] == ("  verdict: 2,345.6 TPS, latency avg 13.64 ms, p95 21.89 ms, p99 "
                        "28.67 ms (32 threads, 60 s)")
    assert lines[1] == ("  MariaDB 10.11.6, sysbench 1.0.20; 32 threads; 2:00 warm-up, "
                        "60.0 s measured")
    assert re.split(r"\s+", lines[2].strip()) == ["TPS", "QPS", "avg", "ms", "p95", "ms",
                                                  "p99", "ms", "max", "ms", "errors"]
    assert re.split(r"\s+", lines[4].strip()) == ["2,345.6", "46,912.0", "13.64", "21.89",
                                                  "28.67", "187.20", "1"]
    assert lines[5] == ("  dataset 16 tables x 1,000,000 rows (about 3.58 GiB): 3.82 GiB on "
                        "disk (estimated 3.58 GiB); buffer pool (InnoDB) 366 MiB (0.0936 of "
                        "it); fits in memory: no")
    assert len(lines) == 6
    pg = show(run, run.test(TPCB))
    assert "shared_buffers 305 MiB" in pg[-1] and pg[4].split()[1] == "-"  # no QPS


def test_outcome_names_each_test_and_the_failed_ones(store: Store, tmp_path: Path) -> None:
    run = stored(store, {RW: ("complete", sysbench()),
                         TPCB: ("failed", DbResult.partial(
                             error="pgbench exited with status 1: connection refused"
                         ).to_json())})
    ended = PAGES.outcome(run, tmp_path)
    assert ended.lines[0].startswith(f"run {run.run_id} complete, 1 test(s) failed")
    assert ended.lines[1].startswith(f"  {RW}: 2,345.6 TPS")
    assert ended.lines[2] == (f"  {TPCB}: FAILED: pgbench exited with status 1: "
                              "connection refused")
    assert ended.lines[3].startswith(f"  see them: ssdlab show {run.run_id}")
    assert ended.failure == f"test(s) failed: {TPCB} (see `ssdlab show {run.run_id}`)"
    good = stored(store, {RW: ("complete", sysbench())})
    assert PAGES.outcome(good, tmp_path).failure is None


def test_failed_and_partial_results_render_without_figures(store: Store, tmp_path: Path
                                                           ) -> None:
    run = stored(store, {RW: ("running", {}),
                         TPCB: ("failed", {"error": "the postgresql server stopped"})})
    text, _ = render([run])
    running, failed = section(balanced(text), "run0-t0"), section(text, "run0-t1")
    assert "INCOMPLETE: the run never finished this test" in running
    assert "FAILED: the postgresql server stopped" in failed
    for page in (running, failed):
        assert "not measured (the test has no result)" in page and "<svg" not in page
    assert "run0-t0-settings" not in text
    show = PAGES.show_of(RW)
    assert show is not None
    assert show(run, run.test(RW)) == ["  verdict: running"]
    assert show(run, run.test(TPCB)) == ["  verdict: FAILED: the postgresql server stopped"]
    assert PAGES.outcome(run, tmp_path).failure is not None
    assert db_overlay([run, run], ["a", "b"]) == ""


# ------------------------------------------------------------------------ across runs


def test_the_overlay_sets_runs_side_by_side_by_their_labels(store: Store) -> None:
    a = stored(store, {RW: ("complete", sysbench()), TPCB: ("complete", pgbench())},
               labels={"op": "0"})
    b = stored(store, {RW: ("complete", sysbench(tps=3100.0, threads=16))},
               labels={"op": "28"})
    c = stored(store, {RW: ("failed", {"error": "sysbench exited"}),
                       TPCB: ("complete", pgbench(tps=5000.0))}, labels={"op": "50"})
    html = db_overlay([a, b, c], ["drive [op=0]", "drive [op=28]", "drive [op=50]"])
    rw = html.split(f"<h4>{RW}</h4>", 1)[1].split("<h4>", 1)[0]
    tpcb = html.split(f"<h4>{TPCB}</h4>", 1)[1]
    assert "average TPS: drive [op=0]: 2,346 TPS" in rw
    assert "average TPS: drive [op=28]: 3,100 TPS" in rw and "p99: drive [op=28]: 28.7 ms" in rw
    assert "drive [op=50]" not in rw  # its test failed: left out of the chart
    assert "drive [op=28]" not in tpcb and "average TPS: drive [op=50]: 5,000 TPS" in tpcb
    assert "The runs differ in: threads (32, 16)" in rw
    assert "differ" not in tpcb
    text, _ = render([a, b])
    charts = section(balanced(text), "compare-charts")
    assert "<h3>Databases</h3>" in charts and "[op=0]" in charts and "[op=28]" in charts
    assert f'id="cmp-db-{RW}-tps"' in charts and f'id="cmp-db-{TPCB}-tps"' not in charts


def test_a_single_run_or_other_suites_give_no_overlay(store: Store) -> None:
    a = stored(store, {RW: ("complete", sysbench())})
    assert db_overlay([a], ["a"]) == ""


# ------------------------------------------------------------------------ timelines


def test_long_series_are_averaged_to_at_most_600_points() -> None:
    points = [SecondPoint(t_s=float(t), tps=float(t), latency_ms=2.0) for t in range(1, 3601)]
    short, step = downsample(points)
    assert step == 6 and len(short) == 600
    assert short[0].t_s == 6.0 and short[0].tps == pytest.approx(3.5)
    assert downsample(points[:600]) == (points[:600], 1)
    assert downsample([]) == ([], 1)


# ------------------------------------------------------------------------ published figures


def test_the_review_s_database_figures_are_shipped_as_published() -> None:
    found = {p.benchmark: p for p in load_db_published()}
    sb, sql = found[SYSBENCH_OLTP], found[SQLSERVER_TPCC]
    assert (sb.tps, sb.latency_avg_ms, sb.latency_p99_ms, sb.threads) == (
        11615, 11.02, 19.77, 32)
    assert (sql.tps, sql.latency_avg_ms, sql.latency_p99_ms, sql.threads) == (
        12650.1, 2.5, None, None)
    for p in (sb, sql):
        assert p.device == "Micron 9400 PRO" and p.source == "003_f015207b6d3e99c1.txt"
        assert "capacity not stated" in p.setup
    assert "Percona XtraDB 5.5.30-rel30.1" in sb.setup and "24 GB buffer pool" in sb.setup
    assert "2 h preconditioning then 1 h measured" in sb.setup
    assert "333 GB database (1,500 scale), 15,000 virtual users" in sql.setup
    assert sb.in_flight == pytest.approx(128.0, abs=0.1)


def test_import_published_accepts_the_packaged_file() -> None:
    data = resources.files("ssdlab.reference").joinpath("data/published-db.csv")
    with resources.as_file(data) as path:
        (run,) = read_published(Path(path))
    assert run.device == "Micron 9400 PRO" and len(run.rows) == 5
    (test,) = run.tests
    assert test.name == "published"
    assert isinstance(test.result, PublishedRows)
    assert [(r.test, r.metric, r.value) for r in test.result.rows][:3] == [
        ("sysbench_oltp", "tps", 11615), ("sysbench_oltp", "latency_avg_ms", 11.02),
        ("sysbench_oltp", "latency_p99_ms", 19.77)]


HEADER = ",".join(COLUMNS)


@pytest.mark.parametrize(("rows", "needle"), [
    (["doc,D,100,tpcc,,,,,,tps,5,"], "line 2: test 'tpcc' is not one of"),
    (["doc,D,100,sysbench_oltp,,,,,,qps,5,"], "line 2: metric 'qps' is not one of"),
    (["doc,D,100,sysbench_oltp,,,,,,tps,0,"], "line 2: tps 0 must be > 0"),
    (["doc,D,100,sysbench_oltp,,,,,,tps,5,", "doc,D,100,sysbench_oltp,,,,,,tps,6,"],
     "line 3: tps of sysbench_oltp for 'D' is given twice"),
    (["doc,D,100,sysbench_oltp,,,,,,latency_avg_ms,5,"], "sysbench_oltp for 'D' has no tps"),
    (["doc,D,100,sysbench_oltp,,,,,,tps,x,"], "line 2: value 'x' is not a number"),
])
def test_bad_database_figures_are_refused_in_one_line(rows: list[str], needle: str) -> None:
    with pytest.raises(UserError) as info:
        parse_db_published("\n".join([HEADER, *rows]) + "\n", "db.csv")
    assert needle in info.value.message and "\n" not in info.value.message


def test_which_published_figure_a_test_is_shown_with() -> None:
    same = published_match(SYSBENCH, "oltp_read_write")
    assert same is not None and same.same_kind and same.published.benchmark == SYSBENCH_OLTP
    for workload, mode, benchmark in ((SYSBENCH, "oltp_write_only", SYSBENCH_OLTP),
                                      (PGBENCH, "tpcb-like", SQLSERVER_TPCC)):
        context = published_match(workload, mode)
        assert context is not None and not context.same_kind
        assert context.published.benchmark == benchmark and "Context only" in context.how
    assert published_match(PGBENCH, "select-only") is None
    assert published_match(PGBENCH, "simple-update") is None
    assert published_match(SYSBENCH, "oltp_read_write", published=()) is None
