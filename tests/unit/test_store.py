"""The results store: round trips, durability under SIGKILL, schema versions, export."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

import ssdlab
from ssdlab.errors import EnvironmentProblem, ExitCode, RunNotFound, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.store import db as store_db
from ssdlab.store import schema
from ssdlab.store.backend import Db, SqliteDb
from ssdlab.store.db import DEFAULT_STORE_ENV, Store, default_store_path
from ssdlab.store.export import (
    CSV_COLUMNS,
    EXPORT_SCHEMA_VERSION,
    run_to_csv_rows,
    run_to_json,
    write_export,
)
from ssdlab.store.records import FioRecord, RoundRecord, RunData, RunHead, TestState
from tests.support.postgres import PgServer
from tests.support.records import doc

SRC_DIR = Path(ssdlab.__file__).resolve().parent.parent


def _fio(
    phase: str = "round", stdout: str = '{"fio version": "fio-3.36"}', rc: int = 0
) -> FioRecord:
    return FioRecord(
        phase=phase,
        job_text="[global]\nioengine=libaio\ndirect=1\n\n[iops]\nrw=randrw\nbs=4k\n",
        command=("fio", "--output-format=json", "job.fio"),
        stdout=stdout,
        stderr="fio: warning",
        returncode=rc,
        started_at=1_700_000_000.0,
        ended_at=1_700_000_060.5,
    )


def _cell(name: str, iops: float) -> dict[str, Any]:
    return {
        "cell": name,
        "block_bytes": 4096,
        "read_pct": 70,
        "pattern": "random",
        "threads": 4,
        "iodepth": 32,
        "iops": iops,
        "bw_bytes_per_s": iops * 4096,
        "lat_mean_us": 120.5,
        "note": "not a metric",
        "flag": True,  # a bool is not a metric either
    }


def _new_run(store: Store, **overrides: Any) -> str:
    args: dict[str, Any] = {
        "suite": "pts-e",
        "profile": "quick",
        "quick": True,
        "target": {"path": "/dev/loop7", "model": "Loop Device", "size_bytes": 1 << 30},
        "host": {"hostname": "lab", "kernel": "6.8"},
        "plan": {"tests": ["iops", "throughput"]},
        "versions": {"ssdlab": "0.1.0", "fio": "fio-3.36"},
        "argv": ["ssdlab", "run", "--quick", "/dev/loop7"],
    }
    args.update(overrides)
    args["plan"] = doc(args["plan"])
    return store.new_run(RunHead(**args))


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new empty store's location: an SQLite file, or a fresh database on the session's
    PostgreSQL test server (tests/support/postgres.py): every test taking it runs on both."""
    if request.param == "sqlite":
        return str(tmp_path / "results.sqlite")
    server: PgServer = request.getfixturevalue("pg")
    return server.new_database()


@pytest.fixture
def store(location: str) -> Iterator[Store]:
    with Store.open(location) as opened:
        yield opened


def _sql(store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Raw SQL on the store's own connection (either backend)."""
    return list(store._conn.execute(sql, params).fetchall())


def _fixed_ids(monkeypatch: pytest.MonkeyPatch, ids: list[str]) -> None:
    queue = iter(ids)
    monkeypatch.setattr(store_db, "_new_run_id", lambda now: next(queue))


# -- round trip ----------------------------------------------------------------------


def _populate(store: Store) -> str:
    run_id = _new_run(store)
    store.set_test(run_id, "throughput", TestState("running", doc()))
    store.add_event(run_id, None, "purge", "blkdiscard ok", {"method": "blkdiscard"})
    store.add_step(run_id, "iops", "precondition", doc({"passes": 2}), _fio("precondition"))
    store.add_step(run_id, "iops", "purge", doc({"method": "none"}), None)
    for n in (1, 2, 3):
        store.add_round(run_id, "iops", RoundRecord(
            n, "ok", {"iops": 1000.0 + n}, [doc(_cell("4k-70", 1000.0 + n))],
            _fio(stdout=f"round {n}"), 100.0 * n, 100.0 * n + 60))
    store.add_event(run_id, "iops", "skipped", "cell 1M-0 skipped", {"cell": "1M-0"})
    store.set_test(run_id, "iops", TestState(
        "steady", doc({"rounds_max": 25}), {"primary": doc({"rule": "snia", "attained": True})},
        doc({
            "cells": [_cell("4k-70", 1003.0)],
            "window_rounds": [1, 2, 3],
            "steady": True,
            "skipped": [{"cell": "1M-0", "reason": "quick"}],
        })))
    store.finish_run(run_id, "complete", "all done")
    return run_id


def test_round_trip(store: Store) -> None:
    run_id = _populate(store)
    run = store.load(run_id)
    assert (run.suite, run.profile, run.quick, run.status, run.message) == (
        "pts-e",
        "quick",
        True,
        "complete",
        "all done",
    )
    assert run.target["size_bytes"] == 1 << 30
    assert (run.target_path, run.target_model) == ("/dev/loop7", "Loop Device")
    assert run.host == {"hostname": "lab", "kernel": "6.8"}
    assert run.plan == {"tests": ["iops", "throughput"]}
    assert run.versions["fio"] == "fio-3.36"
    assert run.argv == ["ssdlab", "run", "--quick", "/dev/loop7"]
    assert run.finished_at is not None and run.finished_at >= run.created_at
    assert not run.read_only
    # tests in the order they were first recorded
    assert [t.name for t in run.tests] == ["throughput", "iops"]
    iops = run.test("iops")
    assert iops.status == "steady"
    assert iops.params == {"rounds_max": 25}
    assert iops.verdicts["primary"]["attained"] is True
    assert iops.result["skipped"] == [{"cell": "1M-0", "reason": "quick"}]
    assert [r.round_no for r in iops.rounds] == [1, 2, 3]
    rnd = iops.rounds[1]
    assert rnd.status == "ok" and rnd.tracking == {"iops": 1002.0}
    assert rnd.cells == [_cell("4k-70", 1002.0)]
    assert (rnd.started_at, rnd.ended_at) == (200.0, 260.0)
    assert rnd.job_text == _fio().job_text
    assert rnd.fio_returncode == 0 and rnd.stderr == "fio: warning"
    assert rnd.command == ("fio", "--output-format=json", "job.fio")
    assert rnd.stdout is None  # not loaded without with_raw
    assert [(s.kind, s.detail) for s in iops.steps] == [
        ("precondition", {"passes": 2}),
        ("purge", {"method": "none"}),
    ]
    assert iops.steps[0].fio is not None and iops.steps[0].fio.phase == "precondition"
    assert iops.steps[1].fio is None
    assert run.steps == iops.steps
    assert [(e.test, e.kind, e.detail) for e in run.events] == [
        (None, "purge", {"method": "blkdiscard"}),
        ("iops", "skipped", {"cell": "1M-0"}),
    ]
    raw = store.load(run_id, with_raw=True)
    assert [r.stdout for r in raw.test("iops").rounds] == ["round 1", "round 2", "round 3"]
    step_fio = raw.test("iops").steps[0].fio
    assert step_fio is not None and step_fio.stdout == '{"fio version": "fio-3.36"}'


def test_list_runs_newest_first(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _populate(store)
    clock = iter([time.time() + 10])
    monkeypatch.setattr("ssdlab.store.db.time.time", lambda: next(clock))
    second = _new_run(store, target={"path": "/dev/nvme0n1"}, quick=False)
    monkeypatch.undo()
    runs = store.list_runs()
    assert [r.run_id for r in runs] == [second, first]
    assert runs[0].status == "running" and runs[0].finished_at is None
    assert runs[0].target_model is None and runs[0].tests == () and not runs[0].quick
    assert runs[1].tests == ("throughput", "iops") and runs[1].status == "complete"


def test_run_id_format(store: Store) -> None:
    run_id = _new_run(store)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_id)
    created = store.load(run_id).created_at
    assert run_id[:15] == time.strftime("%Y%m%d-%H%M%S", time.gmtime(created))


def test_run_id_collision_draws_again(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_ids(
        monkeypatch, ["20240101-000000-aaaa", "20240101-000000-aaaa", "20240101-000000-bbbb"]
    )
    assert _new_run(store) == "20240101-000000-aaaa"
    assert _new_run(store) == "20240101-000000-bbbb"


def test_store_parent_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "results.sqlite"
    with Store.open(path) as store:
        assert store.path.path == path and str(store.path) == str(path)
    assert path.is_file()


def test_default_store_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DEFAULT_STORE_ENV, str(tmp_path / "x.sqlite"))
    assert default_store_path().path == tmp_path / "x.sqlite"
    monkeypatch.delenv(DEFAULT_STORE_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_path().path == tmp_path / "xdg" / "ssdlab" / "results.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".local" / "share" / "ssdlab" / "results.sqlite"
    assert default_store_path().path == expected
    monkeypatch.setenv(DEFAULT_STORE_ENV, "postgresql://lab:secret@db.lab/ssdlab")
    found = default_store_path()
    assert found.is_postgresql and str(found) == "postgresql://lab:***@db.lab/ssdlab"
    monkeypatch.setenv(DEFAULT_STORE_ENV, "mysql://db.lab/ssdlab")
    with pytest.raises(UserError, match=r"^\$SSDLAB_STORE: results store 'mysql://db.lab/"):
        default_store_path()


# -- writes: validation and atomicity -------------------------------------------------


def _round(store: Store, run_id: str, n: int, status: str, iops: float) -> None:
    store.add_round(run_id, "iops", RoundRecord(
        n, status, {"iops": iops}, [doc(_cell("c", iops))], _fio(rc=0 if status == "ok" else 1),
        0.0, 1.0))


def _count(store: Store, table: str) -> int:
    return int(_sql(store, f"SELECT count(*) FROM {table}")[0][0])


def test_failed_round_is_replaced_ok_round_is_not(store: Store) -> None:
    run_id = _new_run(store)
    _round(store, run_id, 1, "ok", 10.0)
    _round(store, run_id, 2, "failed", 0.0)
    _round(store, run_id, 2, "failed", 1.0)  # failed replaces failed
    _round(store, run_id, 2, "ok", 20.0)
    rounds = store.load(run_id).test("iops").rounds
    assert [(r.round_no, r.status, r.tracking["iops"]) for r in rounds] == [
        (1, "ok", 10.0),
        (2, "ok", 20.0),
    ]
    fio_before = _count(store, "fio_invocations")
    with pytest.raises(ValueError, match="already stored"):
        _round(store, run_id, 2, "ok", 99.0)
    with pytest.raises(ValueError, match="already stored"):
        _round(store, run_id, 2, "failed", 99.0)
    assert _count(store, "fio_invocations") == fio_before  # the refused write left nothing
    assert store.load(run_id).test("iops").rounds[1].tracking == {"iops": 20.0}


def test_invalid_writes_are_refused(store: Store) -> None:
    run_id = _new_run(store)
    with pytest.raises(ValueError, match="round status"):
        _round(store, run_id, 1, "great", 1.0)
    with pytest.raises(ValueError, match="run status"):
        store.finish_run(run_id, "done")
    with pytest.raises(TypeError):  # not JSON-able: refused before anything is written
        store.add_round(run_id, "iops", RoundRecord(
            1, "ok", {}, [doc(cast(JsonObject, {"x": object()}))], _fio(), 0.0, 1.0))
    assert _count(store, "fio_invocations") == 0 and _count(store, "rounds") == 0
    with pytest.raises(RunNotFound):
        _round(store, "20990101-000000-0000", 1, "ok", 1.0)
    with pytest.raises(RunNotFound):
        store.load("20990101-000000-0000")
    store.finish_run(run_id, "interrupted", "SIGINT")
    assert store.load(run_id).status == "interrupted"


def test_read_only_runs_refuse_writes(store: Store) -> None:
    run_id = _new_run(store)
    _sql(store, "UPDATE runs SET read_only = 1 WHERE id = ? RETURNING id", (run_id,))
    with pytest.raises(UserError, match="read-only"):
        store.add_event(run_id, None, "warning", "x")
    assert store.list_runs()[0].read_only


# -- durability ------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ssdlab.store.db import Store
    from ssdlab.jsonrecord import Record
    from ssdlab.store.records import FioRecord, RoundRecord, RunHead

    store = Store.open(sys.argv[1])
    run = store.new_run(RunHead("pts-e", "p", False, {"path": "/dev/x"}, {}, Record(), {}, []))
    print(run, flush=True)
    body = "0123456789abcdef" * 20000
    for i in range(1, 100000):
        fio = FioRecord("round", f"[job{i}]\\n", ("fio",), f"{i}:" + body, "", 0, 0.0, 1.0)
        cell = Record.from_json({"cell": "c", "iops": float(i)})
        store.add_round(run, "iops", RoundRecord(
            i, "ok", {"iops": float(i)}, [cell], fio, float(i), i + 0.5))
        print(i, flush=True)
    """
)


def test_sigkill_keeps_committed_rounds(location: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    cmd = [sys.executable, "-c", _CHILD, location]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        run_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while True:
            line = child.stdout.readline()
            assert line, f"child died early: {child.stderr.read()}"
            if line.strip() == "6":
                break
            assert time.monotonic() < deadline, "child too slow"
        os.kill(child.pid, signal.SIGKILL)  # somewhere inside add_round(7) or later
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
    if not location.startswith("postgresql:"):
        with sqlite3.connect(location) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    with Store.open(location) as store:
        run = store.load(run_id, with_raw=True)
    assert run.status == "running"
    rounds = run.test("iops").rounds
    numbers = [r.round_no for r in rounds]
    assert numbers[:6] == [1, 2, 3, 4, 5, 6]
    assert numbers == list(range(1, len(numbers) + 1))  # no holes, no partial round
    body = "0123456789abcdef" * 20000
    for rnd in rounds:
        n = rnd.round_no
        assert rnd.status == "ok" and rnd.tracking == {"iops": float(n)}
        assert rnd.cells == [{"cell": "c", "iops": float(n)}]
        assert rnd.job_text == f"[job{n}]\n" and rnd.stdout == f"{n}:" + body


# -- schema versions and bad files -----------------------------------------------------


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")
    conn.close()
    with pytest.raises(EnvironmentProblem) as info:
        Store.open(path)
    assert info.value.message == (
        f"results store {path} has schema version 7, newer than this ssdlab understands "
        f"({schema.SCHEMA_VERSION}); upgrade ssdlab"
    )
    assert info.value.exit_code == ExitCode.ENVIRONMENT


@pytest.mark.parametrize(
    "content", [b"this is not sqlite\n" * 100, b"SQLite format 3\x00" + b"\xff" * 200]
)
def test_non_database_file_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(EnvironmentProblem, match=re.escape(str(path))) as info:
        Store.open(path)
    assert "\n" not in info.value.message
    assert path.read_bytes() == content  # left alone


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.close()
    with pytest.raises(EnvironmentProblem, match="not an ssdlab results store"):
        Store.open(path)


def test_a_store_seen_half_made_is_judged_again_under_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four processes opening one new store at once: one read its tables made but not yet
    its mark, outside any transaction, and refused it as foreign (a clean-clone flake).
    Such a judgement is made again under the write lock, where the store is whole."""
    with Store.open(tmp_path / "s.sqlite"):
        pass
    judged: list[bool] = []
    real = SqliteDb.check_ours

    def torn_first(self: SqliteDb, version: int) -> None:
        judged.append(self.conn.in_transaction)
        if len(judged) == 1:  # what a torn read outside a transaction concludes
            raise EnvironmentProblem("not an ssdlab results store (torn read)")
        real(self, version)

    monkeypatch.setattr(SqliteDb, "check_ours", torn_first)
    with Store.open(tmp_path / "s.sqlite") as store:
        assert store.list_runs() == []
    assert judged == [False, True]  # the second judgement, in the write transaction, holds
    monkeypatch.setattr(SqliteDb, "check_ours", real)
    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.close()
    with pytest.raises(EnvironmentProblem, match="not an ssdlab results store"):
        Store.open(foreign)  # judged twice, refused twice


def test_directory_as_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="is a directory"):
        Store.open(tmp_path)


def test_migration_list_is_ordered() -> None:
    names = [m.__name__ for m in schema.MIGRATIONS]
    assert names == [f"_migrate_to_{i}" for i in range(1, len(names) + 1)]
    assert len(names) == schema.SCHEMA_VERSION


def test_version_0_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    with sqlite3.connect(path) as conn:  # a real (non-empty file) database with no tables
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    conn.close()
    assert path.stat().st_size > 0
    with Store.open(path) as store:
        assert _new_run(store)
    with sqlite3.connect(path) as conn:
        assert schema.user_version(conn) == schema.SCHEMA_VERSION
        assert conn.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_hand_made_version_1_fixture_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.SCHEMA_V1:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (id, created_at, suite, profile, quick, status, target_path,"
        " target_json, host_json, plan_json, versions_json, argv_json)"
        " VALUES ('20230101-120000-beef', 1672574400.0, 'pts-c', 'full', 0, 'complete',"
        " '/dev/sdz', '{\"path\": \"/dev/sdz\"}', '{}', '{}', '{}', '[\"ssdlab\"]')"
    )
    conn.execute(
        "INSERT INTO tests (run_id, name, status, params_json, verdicts_json, result_json,"
        " updated_at) VALUES ('20230101-120000-beef', 'iops', 'steady', '{}', '{}', '{}', 0)"
    )
    conn.execute(
        "INSERT INTO rounds (run_id, test, round_no, status, tracking_json, cells_json,"
        " started_at, ended_at) VALUES ('20230101-120000-beef', 'iops', 1, 'ok',"
        " '{\"iops\": 5.0}', '[]', 1.0, 2.0)"
    )
    conn.close()
    with Store.open(path) as store:
        assert store.resolve("last") == "20230101-120000-beef"
        run = store.load("20230101-120000-beef")
    assert run.target == {"path": "/dev/sdz"} and run.argv == ["ssdlab"]
    rnd = run.test("iops").rounds[0]
    assert rnd.tracking == {"iops": 5.0} and rnd.job_text is None and rnd.fio_returncode is None


def test_a_version_1_store_migrates_to_sets_and_its_runs_are_in_none(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.SCHEMA_V1:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (id, created_at, suite, profile, quick, status, target_path,"
        " target_json, host_json, plan_json, versions_json, argv_json)"
        " VALUES ('20230101-120000-beef', 1672574400.0, 'pts', 'quick', 1, 'complete',"
        " '/dev/sdz', '{\"path\": \"/dev/sdz\"}', '{}', '{}', '{}', '[\"ssdlab\"]')"
    )
    conn.close()
    with Store.open(path) as store:
        old = store.load("20230101-120000-beef")
        assert old.set_id is None and store.run_sets() == {}
        set_id = store.new_set(suite="pts", argv=["run", "pts"], targets=["/dev/a", "/dev/b"])
        store.set_member = (set_id, 1)
        second = _new_run(store)
        assert store.set_member is None  # one run per place
        store.set_member = (set_id, 0)
        first = _new_run(store)
        third = _new_run(store)  # not in the set
        store.finish_set(set_id, doc({"fio_runs": 7}))
        data = store.load_set(set_id)
        assert data.runs == [(0, first), (1, second)] and data.targets == ["/dev/a", "/dev/b"]
        assert data.detail == {"fio_runs": 7} and data.finished_at is not None
        assert store.run_sets() == {first: set_id, second: set_id}
        assert store.load(first).set_id == set_id and store.load(third).set_id is None
        assert store.expand(set_id[:12]) == [first, second]  # a unique prefix
        assert store.expand(third) == [third] and store.find_set(third) is None
    with sqlite3.connect(path) as check:
        assert schema.user_version(check) == schema.SCHEMA_VERSION == 2
    check.close()


def test_a_set_prefix_must_name_one_set(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as store:
        ids = [store.new_set(suite="pts", argv=[], targets=[]) for _ in range(2)]
        with pytest.raises(UserError, match="matches 2 sets"):
            store.find_set("set-")
        with pytest.raises(RunNotFound, match="no set matches"):
            store.find_set("set-1999")
        assert store.find_set(ids[0]) == ids[0]
        with pytest.raises(RunNotFound, match="recorded no run"):
            store.expand(ids[0])


def test_failed_migration_leaves_store_untouched(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store.open(location) as store:
        run_id = _new_run(store)

    def _migrate_to_next(db: Db) -> None:
        db.ddl("ALTER TABLE runs ADD COLUMN half_done TEXT")
        raise RuntimeError("boom")

    current = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, _migrate_to_next))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    with pytest.raises(RuntimeError, match="boom"):
        Store.open(location)
    monkeypatch.undo()
    with Store.open(location) as store:
        assert store._conn.user_version() == current
        columns = [d[0] for d in store._conn.execute("SELECT * FROM runs LIMIT 0").description]
        assert "half_done" not in columns and "argv_json" in columns
        assert store.load(run_id).run_id == run_id


# -- resolve ----------------------------------------------------------------------------


def test_resolve(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RunNotFound):
        store.resolve("last")
    ids = [f"20240101-00000{i}-{i}{i}aa" for i in range(7)]
    _fixed_ids(monkeypatch, ids)
    for _ in ids:
        _new_run(store)
    assert store.resolve(ids[3]) == ids[3]
    assert store.resolve("20240101-000003") == ids[3]
    assert store.resolve(" 20240101-000004-4 ") == ids[4]
    newest = store.list_runs()[0].run_id
    assert store.resolve("last") == newest == store.resolve("latest")
    with pytest.raises(UserError) as info:
        store.resolve("2024")
    assert not isinstance(info.value, RunNotFound)
    message = info.value.message
    assert "matches 7 runs" in message and message.endswith("give more of the id")
    assert sum(run_id in message for run_id in ids) == 5 and ", ..." in message
    with pytest.raises(RunNotFound) as missing:
        store.resolve("abc")
    assert missing.value.message == (f"no run matches 'abc' in {store.path} (see `ssdlab runs`)")
    assert missing.value.exit_code == ExitCode.NOT_FOUND
    with pytest.raises(RunNotFound):
        store.resolve("")
    with pytest.raises(RunNotFound):
        store.resolve("2024%")  # no LIKE wildcards


# -- raw output --------------------------------------------------------------------------


def test_unicode_and_large_stdout_round_trip_compressed(store: Store) -> None:
    run_id = _new_run(store, target={"path": "/dev/ディスク", "model": "Ünïcødé SSD ✓"})
    line = '{"jobname": "randrw ✓ 日本語", "iops": 12345.678, "lat_ns": [1, 2, 3]}\n'
    stdout = line * (5 * 1024 * 1024 // len(line.encode()) + 1)
    assert len(stdout.encode()) >= 5 * 1024 * 1024
    weird = "undecodable: \udcff\udc80 end"  # surrogateescape'd bytes from fio
    fio = FioRecord(
        "round", "[jöb]\nfilename=/dev/ディスク\n", ("fio", "ü"), stdout, weird, 0, 1.0, 2.0
    )
    store.add_round(run_id, "iops", RoundRecord(1, "ok", {"iops": 1.0}, [], fio, 1.0, 2.0))
    store.add_step(
        run_id,
        "iops",
        "purge",
        doc({"note": "Ωmega"}),
        FioRecord("purge", "", (), weird, "", 0, 0.0, 0.0),
    )
    ((stored, size),) = _sql(
        store, "SELECT length(stdout_z), stdout_bytes FROM fio_invocations WHERE phase = 'round'")
    assert size == len(stdout.encode()) and stored < size // 50
    run = store.load(run_id, with_raw=True)
    rnd = run.test("iops").rounds[0]
    assert rnd.stdout == stdout
    assert rnd.job_text == "[jöb]\nfilename=/dev/ディスク\n" and rnd.command == ("fio", "ü")
    assert rnd.stderr == "undecodable: \ufffd\ufffd end"  # text columns: replaced, not lost
    step_fio = run.test("iops").steps[0].fio
    assert step_fio is not None and step_fio.stdout == weird  # stdout: exact
    assert run.target_model == "Ünïcødé SSD ✓" and run.test("iops").steps[0].detail == {
        "note": "Ωmega"
    }


# -- export -------------------------------------------------------------------------------


def _export_run(store: Store) -> RunData:
    run_id = _populate(store)
    store.set_test(run_id, "throughput", TestState(
        "not_steady", doc(),
        {"primary": doc({
                "rule": "snia",
                "variables": {"bw": {"slope": math.nan, "values": [1.0, math.inf]}},
            })},
        doc({
            "cells": [
                {
                    "cell": "128k-100",
                    "block_bytes": 131072,
                    "read_pct": 100,
                    "pattern": "sequential",
                    "bw_bytes_per_s": math.nan,
                }
            ]
        })))
    return store.load(run_id)


def test_export_json_is_valid_and_loads_back(store: Store) -> None:
    run = _export_run(store)
    out = io.StringIO()
    write_export(run, "json", out)
    doc = json.loads(out.getvalue())  # strict JSON: no NaN tokens
    assert "NaN" not in out.getvalue() and "Infinity" not in out.getvalue()
    assert doc["schema_version"] == EXPORT_SCHEMA_VERSION == 1 and doc["kind"] == "ssdlab-run"
    assert doc == json.loads(json.dumps(run_to_json(run), allow_nan=False))
    assert doc["run"]["id"] == run.run_id and doc["run"]["status"] == "complete"
    created = datetime.fromisoformat(doc["run"]["created_at"])
    assert created.utcoffset() is not None and abs(created.timestamp() - run.created_at) < 0.001
    assert doc["run"]["argv"] == run.argv and doc["target"] == run.target
    assert [t["name"] for t in doc["tests"]] == ["throughput", "iops"]
    thr, iops = doc["tests"]
    assert thr["verdict"]["variables"]["bw"] == {"slope": None, "values": [1.0, None]}
    assert thr["result"]["cells"][0]["bw_bytes_per_s"] is None
    assert iops["verdict"] == {"rule": "snia", "attained": True}
    assert iops["verdicts"] == {"primary": iops["verdict"]}
    assert iops["result"]["window_rounds"] == [1, 2, 3]
    first = iops["rounds"][0]
    assert first["round"] == 1 and first["job_file"] == _fio().job_text
    assert first["cells"] == [_cell("4k-70", 1001.0)] and first["duration_s"] == 60.0
    assert [s["kind"] for s in iops["steps"]] == ["precondition", "purge"]
    assert iops["steps"][0]["fio"]["phase"] == "precondition" and iops["steps"][1]["fio"] is None
    assert [e["kind"] for e in doc["events"]] == ["purge", "skipped"]


def _numeric_metrics(cells: list[dict[str, Any]]) -> int:
    ident = {"cell", "block_bytes", "read_pct", "pattern"}
    return sum(
        1
        for cell in cells
        for k, v in cell.items()
        if k not in ident and isinstance(v, int | float) and not isinstance(v, bool)
    )


def test_csv_rows_one_per_numeric_metric(store: Store) -> None:
    run = _export_run(store)
    rows = run_to_csv_rows(run)
    expected = sum(_numeric_metrics(r.cells) for t in run.tests for r in t.rounds) + sum(
        _numeric_metrics(t.result.get("cells", [])) for t in run.tests
    )
    assert len(rows) == expected == 3 * 5 + 5 + 1
    assert all(tuple(row) == CSV_COLUMNS for row in rows)
    iops_round2 = [r for r in rows if r["test"] == "iops" and r["round"] == 2]
    assert {r["metric"] for r in iops_round2} == {
        "threads",
        "iodepth",
        "iops",
        "bw_bytes_per_s",
        "lat_mean_us",
    }
    one = next(r for r in iops_round2 if r["metric"] == "iops")
    assert one == {
        "run_id": run.run_id,
        "test": "iops",
        "scope": "round",
        "round": 2,
        "cell": "4k-70",
        "block_bytes": 4096,
        "read_pct": 70,
        "pattern": "random",
        "metric": "iops",
        "value": 1002.0,
    }
    nan_row = next(r for r in rows if r["test"] == "throughput")
    assert nan_row["scope"] == "result" and nan_row["round"] == "" and nan_row["value"] is None
    out = io.StringIO()
    write_export(run, "csv", out)
    read_back = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(read_back) == expected and tuple(read_back[0]) == CSV_COLUMNS
    assert next(r for r in read_back if r["test"] == "throughput")["value"] == ""


def test_unknown_export_format(store: Store) -> None:
    run = store.load(_new_run(store))
    with pytest.raises(UserError, match="unknown export format 'xml'"):
        write_export(run, "xml", io.StringIO())


# -- PostgreSQL: its own schema checks, and many writers at once -----------------------


def test_postgresql_store_refuses_newer_schema_and_foreign_databases(pg: PgServer) -> None:
    url = pg.new_database()
    Store.open(url).close()
    name = url.split("/")[3].split("?")[0]
    pg.sql("UPDATE ssdlab_meta SET value = '7' WHERE key = 'schema_version'", name)
    with pytest.raises(EnvironmentProblem) as info:
        Store.open(url)
    shown = f"postgresql://postgres@/{name}?host={pg.sock}"
    assert info.value.message == (
        f"results store {shown} has schema version 7, newer than this ssdlab understands "
        f"({schema.SCHEMA_VERSION}); upgrade ssdlab")
    other = pg.new_database()
    other_name = other.split("/")[3].split("?")[0]
    pg.sql("CREATE TABLE contacts (name TEXT)", other_name)
    with pytest.raises(EnvironmentProblem, match="with other tables, not an ssdlab results"):
        Store.open(other)
    assert pg.sql("SELECT to_regclass('ssdlab_meta')", other_name) == [(None,)]  # untouched


def test_postgresql_store_uses_exact_doubles_and_its_own_ids(pg: PgServer) -> None:
    url = pg.new_database()
    with Store.open(url) as store:
        run_id = _new_run(store)
        store.add_round(run_id, "iops", RoundRecord(
            1, "ok", {"iops": 1.0}, [], _fio(), 1764126000.123456, 1764126060.987654))
        store.add_event(run_id, None, "warning", "a NUL \x00 in fio's text")
        run = store.load(run_id)
        types = dict(_sql(store, "SELECT column_name, data_type FROM information_schema.columns"
                                 " WHERE table_name = 'rounds'"))
    rnd = run.test("iops").rounds[0]
    assert (rnd.started_at, rnd.ended_at) == (1764126000.123456, 1764126060.987654)
    assert types["started_at"] == "double precision" and types["round_no"] == "bigint"
    assert run.events[0].message == "a NUL \ufffd in fio's text"  # both backends alike


def test_a_new_postgresql_store_opened_by_many_at_once_is_migrated_once(pg: PgServer) -> None:
    url = pg.new_database()
    errors: list[BaseException] = []

    def open_and_write() -> None:
        try:
            with Store.open(url) as store:
                _new_run(store)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    with Store.open(url) as store:
        assert len(store.list_runs()) == 6
        assert _sql(store, "SELECT key, value FROM ssdlab_meta ORDER BY key") == [
            ("application", "ssdlab"), ("schema_version", str(schema.SCHEMA_VERSION))]


_WRITER = textwrap.dedent(
    """
    import sys
    from ssdlab.store.db import Store
    from ssdlab.jsonrecord import Record
    from ssdlab.store.records import FioRecord, RoundRecord, RunHead

    with Store.open(sys.argv[1]) as store:
        run = store.new_run(RunHead("pts", "p", True, {"path": sys.argv[2]}, {}, Record(), {},
                                    []))
        for i in range(1, int(sys.argv[3]) + 1):
            fio = FioRecord("round", "[job]\\n", ("fio",), "x" * 5000, "", 0, 0.0, 1.0)
            cell = Record.from_json({"cell": "c", "iops": float(i)})
            store.add_round(run, "iops", RoundRecord(
                i, "ok", {"iops": float(i)}, [cell], fio, float(i), i + 0.5))
            store.add_event(run, "iops", "round", f"round {i}")
        store.finish_run(run, "complete")
    print(run)
    """
)


def test_concurrent_writers_lose_no_round(location: str) -> None:
    """Four processes write runs into one store at once, a round per transaction."""
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    rounds = 40
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, location, f"/dev/t{i}",
                               str(rounds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    with Store.open(location) as store:
        runs = [store.load(out.strip()) for out, _ in outs]
    assert sorted(r.target["path"] for r in runs) == [f"/dev/t{i}" for i in range(4)]
    for run in runs:
        assert run.status == "complete"
        assert [r.round_no for r in run.test("iops").rounds] == list(range(1, rounds + 1))
        assert [e.message for e in run.events] == [f"round {i}" for i in range(1, rounds + 1)]


def test_a_store_opened_read_only_is_never_written(location: str) -> None:
    with pytest.raises(EnvironmentProblem, match=r"unable to open|no results store at .* yet"
                       ) as refused:
        Store.open_readonly(location)  # an empty database is not made a store
    # an empty PostgreSQL database: a store no run has made yet (ssdlab serve shows none)
    assert isinstance(refused.value, schema.StoreNotMade) == location.startswith("postgresql:")
    assert location.startswith("postgresql:") or not Path(location).exists()
    with Store.open(location) as store:
        run_id = _populate(store)
    with Store.open_readonly(location) as ro:
        assert ro.load(run_id).status == "complete" and len(ro.list_runs()) == 1
        with pytest.raises(Exception, match=r"(?i)read.?only"):
            ro.add_event(run_id, None, "warning", "x")
    with Store.open(location) as store:
        assert [e.kind for e in store.load(run_id).events] == ["purge", "skipped"]


def test_an_unreachable_postgresql_store_is_one_line_without_its_password(
    tmp_path: Path,
) -> None:
    url = f"postgresql://lab:s3cret@/ssdlab?host={tmp_path}&connect_timeout=2"
    with pytest.raises(EnvironmentProblem) as info:
        Store.open(url)
    message = info.value.message
    assert message.startswith(f"cannot use results store postgresql://lab:***@/ssdlab?host="
                              f"{tmp_path}&connect_timeout=2: ")
    assert "s3cret" not in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []
