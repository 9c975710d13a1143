"""Published review results: parsing, validation, grouping, mapping, and the store's side."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from ssdlab.errors import RunNotFound, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.reference.published import (
    COLUMNS,
    ReferenceRun,
    import_published,
    import_runs,
    parse_rows,
    read_published,
)
from ssdlab.store.db import Store
from ssdlab.store.records import FioRecord, ReferenceTest, RoundRecord, RunHead, TestState
from tests.support.records import doc

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "published-results.csv"
HEADER = ",".join(COLUMNS)
IOPS_ROW = "doc.txt,Drive A,3840,pts_iops,4,100,16,8,100,iops,1000,steady"
CELL_KEYS = {"cell", "block_bytes", "read_pct", "pattern", "threads", "iodepth"}


def _runs() -> dict[str, ReferenceRun]:
    return {run.device: run for run in read_published(FIXTURE)}


def _test(run: ReferenceRun, name: str) -> dict[str, Any]:
    for test in run.tests:
        if test.name == name:
            return {"params": test.params.to_json(), "result": test.result.to_json()}
    raise KeyError(name)


def _cell(run: ReferenceRun, test: str, block_bytes: int, read_pct: int) -> dict[str, Any]:
    cells = _test(run, test)["result"]["cells"]
    found = [c for c in cells if (c["block_bytes"], c["read_pct"]) == (block_bytes, read_pct)]
    assert len(found) == 1
    return dict(found[0])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "results.sqlite") as opened:
        yield opened


# -- the real file -----------------------------------------------------------------


def test_the_fixture_is_grouped_into_one_run_per_source_and_device() -> None:
    runs = read_published(FIXTURE)
    assert [(r.device, len(r.rows)) for r in runs] == [
        ("Toshiba CD5", 49),
        ("Toshiba CM5-R", 49),
        ("WD Ultrastar DC SN640", 56),
        ("Micron 7450 PRO x4 (NAS ZFS)", 12),
        ("Samsung 850 EVO 1TB (used; single drive)", 4),
        ("4x Samsung 850 EVO RAID0 256K stripe (any of 5 controllers)", 1),
    ]
    data_lines = len(FIXTURE.read_text().splitlines()) - 1
    assert sum(len(r.rows) for r in runs) == data_lines == 171


def test_iops_cells_of_the_three_reviewed_drives() -> None:
    runs = _runs()
    for device in ("Toshiba CD5", "Toshiba CM5-R", "WD Ultrastar DC SN640"):
        cells = _test(runs[device], "iops")["result"]["cells"]
        assert len(cells) == 49, device
        assert {c["block_bytes"] for c in cells} == {
            k * 1024 for k in (4, 8, 16, 32, 64, 128, 1024)
        }
        assert {c["read_pct"] for c in cells} == {0, 5, 35, 50, 65, 95, 100}
        assert all(set(c) == CELL_KEYS | {"iops"} for c in cells)
    cm5 = _cell(runs["Toshiba CM5-R"], "iops", 4096, 100)
    assert cm5 == {
        "cell": "iops_bs4096_r100",
        "block_bytes": 4096,
        "read_pct": 100,
        "pattern": "random",
        "threads": 16,
        "iodepth": 8,
        "iops": 752167.0,
    }
    assert _cell(runs["Toshiba CM5-R"], "iops", 4096, 0)["iops"] == 311008
    assert _cell(runs["Toshiba CD5"], "iops", 1024 * 1024, 50)["iops"] == 1718
    sn640 = _cell(runs["WD Ultrastar DC SN640"], "iops", 8192, 95)
    assert (sn640["iops"], sn640["threads"], sn640["iodepth"]) == (315200, 24, 32)
    params = _test(runs["WD Ultrastar DC SN640"], "iops")["params"]
    assert params["title"] == "IOPS"
    assert (params["threads"], params["iodepth"], params["active_range_pct"]) == (24, 32, 75)
    assert _test(runs["Toshiba CD5"], "iops")["result"]["steady"] is True
    assert _test(runs["Toshiba CD5"], "iops")["result"]["published"] is True


def test_throughput_write_saturation_and_other_rows_of_the_sn640() -> None:
    run = _runs()["WD Ultrastar DC SN640"]
    assert [t.name for t in run.tests] == [
        "iops",
        "throughput-128k",
        "throughput-1024k",
        "write-saturation",
        "published",
    ]
    read = _cell(run, "throughput-128k", 128 * 1024, 100)
    assert read["cell"] == "throughput-128k_bs131072_r100"
    assert read["pattern"] == "sequential"
    assert read["bw_bytes_per_s"] == 2819.75 * 2**20  # MiB/s in the file
    assert set(read) == CELL_KEYS | {"bw_bytes_per_s"}
    assert _cell(run, "throughput-1024k", 1024 * 1024, 0)["bw_bytes_per_s"] == 1817.68 * 2**20
    assert _test(run, "throughput-1024k")["params"]["title"] == "Throughput 1024 KiB"
    saturation = _test(run, "write-saturation")
    assert saturation["result"] == {"published": True, "iops_fob": 215000, "iops_steady": 63000}
    assert saturation["params"]["block_bytes"] == 4096
    assert saturation["params"]["read_pct"] == 0
    assert _test(run, "published")["result"]["rows"] == [
        {
            "test": "pts_latency_vs_iops",
            "metric": "p99_9_write_latency_ms_max",
            "value": 1.0,
            "block_kib": None,
            "read_pct": 0,
            "threads": None,
            "queue_depth": None,
            "active_range_pct": 100.0,
            "notes": "99.9th percentile write latency stays under 1 ms",
        }
    ]


def test_rows_no_test_holds_are_kept_whole() -> None:
    nas = _runs()["Micron 7450 PRO x4 (NAS ZFS)"]
    assert [t.name for t in nas.tests] == ["published"]
    rows = _test(nas, "published")["result"]["rows"]
    assert len(rows) == 12
    assert rows[0]["metric"] == "seq_read_gbps" and rows[0]["value"] == 6.81
    assert [r["notes"] for r in rows if r["metric"] == "iops_avg"] == [
        "RAID10 4 drives OP 30% 4K random",
        "RAID10 4 drives OP 0% 4K random",
    ]
    raid = _runs()["4x Samsung 850 EVO RAID0 256K stripe (any of 5 controllers)"]
    (row,) = _test(raid, "published")["result"]["rows"]
    assert (row["test"], row["block_kib"], row["read_pct"], row["value"]) == (
        "iometer",
        256.0,
        100,
        1600.0,
    )


def test_target_and_plan_of_a_reference_run() -> None:
    run = _runs()["Toshiba CM5-R"]
    assert run.target() == {
        "path": "published:001_7e2a2261cc4b3893.txt",
        "kind": "reference",
        "model": "Toshiba CM5-R",
        "capacity_bytes": 7_680_000_000_000,
        "device_class": "reference",
    }
    plan = run.plan("published-results.csv")
    assert plan.source_file == "published-results.csv"
    assert plan.source_document == "001_7e2a2261cc4b3893.txt"
    assert plan.imported_rows == 49
    assert len(plan.content_sha256) == 64


# -- validation ----------------------------------------------------------------------


def _write(tmp_path: Path, *lines: str, name: str = "published.csv") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _error(path: Path) -> str:
    with pytest.raises(UserError) as caught:
        read_published(path)
    message = caught.value.message
    assert "\n" not in message and "\r" not in message
    return message


def _with(column: str, value: str, row: str = IOPS_ROW) -> str:
    fields = row.split(",")
    fields[COLUMNS.index(column)] = value
    return ",".join(fields)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_with("read_pct", "x"), "read_pct 'x' is not a number 0-100"),
        (_with("read_pct", "150"), "read_pct '150' is not a number 0-100"),
        (_with("read_pct", "-5"), "read_pct '-5' is not a number 0-100"),
        (_with("read_pct", "12.5"), "read_pct '12.5' is not a whole number 0-100"),
        (_with("capacity_gb", ""), "capacity_gb '' is empty"),
        (_with("capacity_gb", "-1"), "capacity_gb '-1' is not a number > 0"),
        (_with("source", " "), "source '' is empty"),
        (_with("device", ""), "device '' is empty"),
        (_with("value", "lots"), "value 'lots' is not a number"),
        (_with("value", "nan"), "value 'nan' is not a number"),
        (_with("value", "inf"), "value 'inf' is not a number"),
        (_with("value", ""), "value '' is empty"),
        (_with("threads", "0"), "threads '0' is not a whole number >= 1"),
        (_with("queue_depth", "1.5"), "queue_depth '1.5' is not a whole number >= 1"),
        (_with("block_kib", "four"), "block_kib 'four' is not a number"),
        (_with("block_kib", "0"), "block_kib '0' is not a number > 0"),
        (_with("block_kib", "0.0001"), "block_kib '0.0001' is not a whole number of bytes"),
        (_with("active_range_pct", "0"), "active_range_pct '0' is not a number > 0 and <= 100"),
        (_with("metric", "iops/s"), "metric 'iops/s' is not a name"),
        (_with("test", "pts iops"), "test 'pts iops' is not a name"),
        (_with("metric", "lat_us"), "metric 'lat_us' for pts_iops must be 'iops'"),
        (_with("value", "-3"), "value -3 for iops must be >= 0"),
        (_with("block_kib", ""), "pts_iops needs block_kib and read_pct"),
        (_with("read_pct", ""), "pts_iops needs block_kib and read_pct"),
        (
            _with("read_pct", "50", _with("test", "pts_throughput", _with("metric", "bw_mibps"))),
            "read_pct 50 for pts_throughput must be 100 or 0",
        ),
        (
            _with("block_kib", "0.5", _with("test", "pts_throughput", _with("metric", "bw_mibps"))),
            "block_kib 0.5 for pts_throughput must be whole",
        ),
        (
            _with("metric", "iops", _with("test", "pts_write_saturation")),
            "metric 'iops' for pts_write_saturation must be 'iops_fob' or 'iops_steady'",
        ),
        ("doc.txt,Drive A,3840", "3 fields, expected 12"),
        (IOPS_ROW + ",extra", "13 fields, expected 12"),
        (_with("value", '"12\n34"'), "value '12\\n34' is not a number"),
        (_with("read_pct", "x" * 100), "read_pct '" + "x" * 37 + "...' is not a number 0-100"),
    ],
)
def test_every_bad_value_is_one_line_naming_file_line_and_value(
    tmp_path: Path, row: str, message: str
) -> None:
    good = _with("block_kib", "8")
    path = _write(tmp_path, HEADER, good, row)
    assert _error(path).startswith(f"published.csv line 3: {message}")


def test_group_level_errors_name_both_lines(tmp_path: Path) -> None:
    duplicate = _write(tmp_path, HEADER, IOPS_ROW, _with("block_kib", "8"), IOPS_ROW)
    assert _error(duplicate) == (
        "published.csv line 4: pts_iops 4 KiB read_pct 100 for 'Drive A' is already on line 2"
    )
    capacity = _write(tmp_path, HEADER, IOPS_ROW, _with("capacity_gb", "1920.5"))
    assert _error(capacity) == (
        "published.csv line 3: capacity_gb 1920.5 for 'Drive A' differs from 3840 on line 2"
    )
    saturation = _with("metric", "iops_fob", _with("test", "pts_write_saturation"))
    twice = _write(tmp_path, HEADER, saturation, saturation)
    assert _error(twice) == "published.csv line 3: iops_fob for 'Drive A' is given twice"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "published.csv is empty; expected the header source,device,capacity_gb,"),
        (HEADER.encode() + b"\n", "published.csv has a header but no rows"),
        (HEADER.encode() + b"\n\n\n", "published.csv has a header but no rows"),
        (
            HEADER.replace("capacity_gb", "capacity").encode() + b"\n" + IOPS_ROW.encode(),
            "published.csv line 1: column 3 is 'capacity', expected 'capacity_gb' "
            "(the header must be source,device,capacity_gb,",
        ),
        (
            (HEADER + ",extra\n" + IOPS_ROW).encode(),
            "published.csv line 1: 13 columns, expected 12 (the header must be source,",
        ),
        (
            HEADER.rsplit(",", 1)[0].encode() + b"\n",
            "published.csv line 1: 11 columns, expected 12",
        ),
        (
            (HEADER + "\n" + IOPS_ROW + "\n").encode() + b"doc.txt,Dr\xffve,1,x,,,,,,m,1,\n",
            "published.csv line 3: not UTF-8 text",
        ),
        (
            (HEADER + "\ndoc.txt,Drive A,1,x,,,,,,m,1," + "y" * 200_000 + "\n").encode(),
            "published.csv line 2: not valid CSV (field larger than field limit",
        ),
    ],
)
def test_empty_file_and_wrong_header(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "published.csv"
    path.write_bytes(content)
    assert _error(path).startswith(message)


def test_missing_file(tmp_path: Path) -> None:
    assert (
        _error(tmp_path / "nope.csv")
        == f"cannot read {tmp_path / 'nope.csv'}: No such file or directory"
    )


def test_bom_crlf_spaces_blank_lines_and_quoted_notes_are_accepted(tmp_path: Path) -> None:
    text = (
        "\ufeff"
        + HEADER
        + "\r\n"
        + IOPS_ROW.replace(",", " , ")
        + "\r\n\r\n"
        + 'doc.txt,Drive A,3840,nas_profile,,,,,,iops,5,"a note, with a comma\nand a line"\r\n'
    )
    path = tmp_path / "published.csv"
    path.write_bytes(text.encode())
    (run,) = read_published(path)
    assert _cell(run, "iops", 4096, 100)["iops"] == 1000
    (row,) = _test(run, "published")["result"]["rows"]
    assert row["notes"] == "a note, with a comma\nand a line"
    assert row["active_range_pct"] is None


def test_content_hash_is_of_the_figures_not_the_order_or_the_file_name(tmp_path: Path) -> None:
    other = _with("block_kib", "8")
    first = read_published(_write(tmp_path, HEADER, IOPS_ROW, other, name="a.csv"))[0]
    swapped = read_published(_write(tmp_path, HEADER, other, IOPS_ROW, name="b.csv"))[0]
    changed = read_published(_write(tmp_path, HEADER, IOPS_ROW, _with("value", "7", other)))[0]
    assert first.content_sha256 == swapped.content_sha256
    assert first.content_sha256 != changed.content_sha256


def test_parse_rows_keeps_line_numbers() -> None:
    rows = parse_rows(HEADER + "\n\n" + IOPS_ROW + "\n", "x.csv")
    assert [(r.line, r.block_bytes, r.read_pct, r.value) for r in rows] == [(3, 4096, 100, 1000)]


# -- into the store ------------------------------------------------------------------


def test_import_stores_read_only_reference_runs(store: Store) -> None:
    outcomes = import_published(store, FIXTURE, ["import", "published", str(FIXTURE)])
    assert [o.created for o in outcomes] == [True] * 6
    summaries = {s.run_id: s for s in store.list_runs()}
    assert set(summaries) == {o.run_id for o in outcomes}
    assert all(s.read_only and s.suite == "published" for s in summaries.values())
    cm5 = next(o for o in outcomes if o.run.device == "Toshiba CM5-R")
    run = store.load(cm5.run_id)
    assert (run.suite, run.profile, run.quick, run.status) == (
        "published",
        "reference",
        False,
        "reference",
    )
    assert run.read_only and run.finished_at is not None
    assert (run.target_path, run.target_model) == (
        "published:001_7e2a2261cc4b3893.txt",
        "Toshiba CM5-R",
    )
    assert run.host == {} and run.versions["ssdlab"]
    assert run.argv == ["import", "published", str(FIXTURE)]
    assert run.plan["imported_rows"] == 49 and run.plan["source_file"] == FIXTURE.name
    (test,) = run.tests
    assert (test.name, test.status, test.verdicts, test.rounds) == ("iops", "published", {}, [])
    cell = next(c for c in test.result["cells"] if c["cell"] == "iops_bs4096_r100")
    assert cell["iops"] == 752167


def test_importing_the_same_figures_again_writes_nothing(store: Store) -> None:
    first = import_published(store, FIXTURE, [])
    before = store.list_runs()
    again = import_published(store, FIXTURE, [])
    assert [(o.run_id, o.created) for o in again] == [(o.run_id, False) for o in first]
    assert store.list_runs() == before


def test_only_new_groups_are_imported(store: Store, tmp_path: Path) -> None:
    (drive_a,) = import_published(store, _write(tmp_path, HEADER, IOPS_ROW, name="a.csv"), [])
    drive_b = IOPS_ROW.replace("Drive A", "Drive B")
    both = import_published(store, _write(tmp_path, HEADER, IOPS_ROW, drive_b, name="b.csv"), [])
    assert [(o.run.device, o.created) for o in both] == [("Drive A", False), ("Drive B", True)]
    assert both[0].run_id == drive_a.run_id
    assert len(store.list_runs()) == 2


def test_a_bad_file_writes_nothing(store: Store, tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER, IOPS_ROW, _with("read_pct", "x"))
    with pytest.raises(UserError):
        import_published(store, path, [])
    assert store.list_runs() == []


def test_import_runs_takes_parsed_runs(store: Store) -> None:
    runs = read_published(FIXTURE)[:1]
    (outcome,) = import_runs(store, runs, "given.csv", ["x"])
    assert store.load(outcome.run_id).plan["source_file"] == "given.csv"


# -- Store.import_reference_run and find_reference_run --------------------------------


def _reference(store: Store, tests: list[tuple[Any, str, JsonObject, JsonObject, JsonObject]],
               plan: JsonObject | None = None) -> str:
    """A reference run of ``tests``: (name, status, params, verdicts, result) each."""
    head = RunHead("published", "reference", False,
                   {"path": "published:doc", "model": "Drive A", "kind": "reference"}, {},
                   doc(plan if plan is not None else {"content_sha256": "abc"}),
                   {"ssdlab": "0.1.0"}, ["import"])
    return store.import_reference_run(head, [
        ReferenceTest(name, TestState(status, doc(params),
                                      {k: doc(cast(JsonObject, v)) for k, v in verdicts.items()},
                                      doc(result)))
        for name, status, params, verdicts, result in tests], status="reference")


def test_import_reference_run_writes_the_run_and_its_tests(store: Store) -> None:
    run_id = _reference(
        store,
        [
            ("iops", "published", {"title": "IOPS"}, {}, {"cells": [{"iops": 1.5}]}),
            ("published", "published", {}, {"v": {"n": 1}}, {"rows": [{"value": float("nan")}]}),
        ],
    )
    run = store.load(run_id)
    assert run.read_only and run.status == "reference" and not run.quick
    assert run.finished_at == run.created_at
    assert (run.target_path, run.target_model) == ("published:doc", "Drive A")
    assert [(t.name, t.status) for t in run.tests] == [
        ("iops", "published"),
        ("published", "published"),
    ]
    assert run.tests[0].result == {"cells": [{"iops": 1.5}]}
    assert run.tests[1].verdicts == {"v": {"n": 1}}
    assert store.resolve(run_id[:15]) == run_id
    with pytest.raises(RunNotFound, match="no measured runs"):
        store.resolve("last")  # reference runs are never "last"


def test_a_failed_import_leaves_nothing(store: Store) -> None:
    with pytest.raises(sqlite3.IntegrityError):  # NOT NULL name: fails inside the transaction
        _reference(store, [("iops", "published", {}, {}, {}), (None, "published", {}, {}, {})])
    assert store.list_runs() == []
    with pytest.raises(ValueError, match="unique"):
        _reference(store, [("iops", "published", {}, {}, {})] * 2)
    assert store.list_runs() == []


def test_every_write_to_a_reference_run_is_refused(store: Store) -> None:
    run_id = _reference(store, [("iops", "published", {}, {}, {"cells": []})])
    fio = FioRecord("round", "[job]\n", ("fio",), "{}", "", 0, 1.0, 2.0)
    writes: list[Callable[[], object]] = [
        lambda: store.add_event(run_id, None, "warning", "no"),
        lambda: store.add_step(run_id, "iops", "purge", doc(), fio),
        lambda: store.add_round(run_id, "iops", RoundRecord(1, "ok", {}, [], fio, 1.0, 2.0)),
        lambda: store.set_test(run_id, "iops", TestState("steady", doc())),
        lambda: store.finish_run(run_id, "complete"),
    ]
    before = store.load(run_id)
    for write in writes:
        with pytest.raises(UserError, match=f"run {run_id} is a read-only reference run"):
            write()
    assert store.load(run_id) == before


def test_find_reference_run(store: Store) -> None:
    assert store.find_reference_run("abc") is None
    store.new_run(RunHead(
        "pts", "quick", True, {"path": "/dev/x"}, {},
        doc({"content_sha256": "abc", "x": float("nan")}), {}, []))
    assert store.find_reference_run("abc") is None
    run_id = _reference(store, [], plan={"content_sha256": "abc"})
    _reference(store, [], plan={"content_sha256": "def"})
    assert store.find_reference_run("abc") == run_id
    assert store.find_reference_run("ab") is None
