"""``ssdlab store merge``: the golden stores (real runs of every suite) into SQLite and into
a real PostgreSQL server, twice; newer copies, conflicts, sets, dry runs, refusals."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ssdlab.cli.main import main
from ssdlab.errors import ExitCode
from ssdlab.store.db import Store
from ssdlab.store.merge import merge
from ssdlab.store.records import RoundRecord, RunHead
from tests.support.exports import exports
from tests.support.postgres import PgServer
from tests.support.records import doc

FIXTURES = Path(__file__).parent.parent / "fixtures" / "store"
GOLDEN = ("suites.sqlite", "matrix.sqlite", "db.sqlite")


@pytest.fixture(params=["sqlite", "postgresql"])
def dest(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "lab.sqlite")
    server: PgServer = request.getfixturevalue("pg")
    return server.new_database()


def _golden_copies(tmp_path: Path, names: tuple[str, ...] = GOLDEN) -> list[Path]:
    copies = []
    for name in names:
        copy = tmp_path / f"src-{name}"
        shutil.copy(FIXTURES / name, copy)
        copies.append(copy)
    return copies


def test_merging_the_golden_stores_twice_adds_nothing_the_second_time(
    dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = _golden_copies(tmp_path)
    before: dict[str, str] = {}
    for source in sources:
        before |= exports(source)
    raw = {s: s.read_bytes() for s in sources}
    assert main(["store", "merge", *map(str, sources), "--store", dest]) == 0
    first = capsys.readouterr().out
    copied = [int(m) for m in re.findall(r": (\d+) run\(s\) copied, 0 already there", first)]
    assert len(copied) == len(sources) and sum(copied) == len(before)
    after = exports(dest)
    assert after == before  # every run, and every run's export byte for byte
    for run_id, text in after.items():
        golden = FIXTURES / f"{run_id}.json"
        if golden.exists():
            assert text == golden.read_text(encoding="utf-8"), run_id
    assert main(["store", "merge", *map(str, sources), "--store", dest]) == 0
    second = capsys.readouterr().out
    for source in sources:
        assert f"{source}: 0 run(s) copied, " in second
    assert "updated" not in second and "conflict" not in second
    assert exports(dest) == before
    assert {s: s.read_bytes() for s in sources} == raw  # the sources are only read
    with Store.open(dest) as store:
        sets = store.run_sets()
    with Store.open(sources[0]) as store:
        assert sets == store.run_sets()  # the sets' runs came along


def _run(store: Store, path: str = "/dev/x") -> str:
    return store.new_run(RunHead(
        "pts", "quick", True, {"path": path}, {"hostname": "laptop"}, doc(), {}, ["run"]))


def _round(store: Store, run_id: str, n: int, moment: float) -> None:
    store.add_round(run_id, "iops", RoundRecord(
        n, "ok", {"iops": float(n)}, [doc({"cell": "c", "iops": float(n)})], None, moment,
        moment + 1))


def test_a_newer_copy_replaces_an_older_one_and_never_the_other_way(
    dest: str, tmp_path: Path
) -> None:
    laptop = tmp_path / "laptop.sqlite"
    with Store.open(laptop) as src:
        run_id = _run(src)
        _round(src, run_id, 1, 1e9)
        with Store.open(dest) as dst:
            first = merge(src, dst)  # copied while still running
            assert first.copied == [run_id]
            _round(src, run_id, 2, 2e9)
            src.finish_run(run_id, "complete")
            assert merge(src, dst, dry_run=True).updated == [run_id]
            assert len(dst.load(run_id).test("iops").rounds) == 1  # a dry run wrote nothing
            assert merge(src, dst).updated == [run_id]
            copy = dst.load(run_id)
            assert copy.status == "complete" and len(copy.test("iops").rounds) == 2
            assert merge(src, dst).same == [run_id]
            dst.reopen_run(run_id, ["resume"])  # resumed in the lab: newer there
            _round(dst, run_id, 3, 3e9)
            outcome = merge(src, dst)
            assert outcome.kept == [run_id] and outcome.updated == []
            assert len(dst.load(run_id).test("iops").rounds) == 3


def test_a_different_run_with_the_same_id_is_a_conflict_not_copied(
    dest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from ssdlab.store import db as store_db
    monkeypatch.setattr(store_db, "_new_run_id", lambda now: "20261126-101010-abcd")
    laptop = tmp_path / "laptop.sqlite"
    with Store.open(laptop) as src:
        _run(src, "/dev/laptop")
    with Store.open(dest) as dst:
        _run(dst, "/dev/lab")
    code = main(["store", "merge", str(laptop), "--store", dest])
    err = capsys.readouterr().err
    assert code == ExitCode.FAILURE
    assert err.startswith("Error: 1 not copied: a different run or set with the same id is "
                          "already in ") and "run 20261126-101010-abcd from " in err
    assert len(err.strip().splitlines()) == 1
    with Store.open(dest) as dst:
        assert dst.load("20261126-101010-abcd").target["path"] == "/dev/lab"


def test_merge_refusals_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    (source,) = _golden_copies(tmp_path, ("db.sqlite",))
    lab = tmp_path / "lab.sqlite"
    assert main(["store", "merge", str(source), "--store", str(source)]) == ExitCode.USAGE
    assert "is the destination store itself" in capsys.readouterr().err
    assert main(["store", "merge", str(tmp_path / "nope.sqlite"), "--store", str(lab)]) \
        == ExitCode.NOT_FOUND
    assert main(["store", "merge", "mysql://h/db", "--store", str(lab)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not mysql:" in err
    assert main(["store", "merge", str(source), "--store", str(lab), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN: ") and "run(s) would be copied" in out
    assert not lab.exists()


def test_store_info(dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (source,) = _golden_copies(tmp_path, ("db.sqlite",))
    assert main(["store", "merge", str(source), "--store", dest]) == 0
    capsys.readouterr()
    assert main(["store", "info", "--store", dest]) == 0
    out = capsys.readouterr().out
    kind = "PostgreSQL" if dest.startswith("postgresql:") else "SQLite"
    assert f"database:       {kind}\n" in out and "schema version: 2\n" in out
    with Store.open(source) as store:
        count = len(store.list_runs())
    assert f"runs:           {count} (0 running)\n" in out
