"""The database run's workspace bookkeeping: state files, what a killed run left, undo,
and the checks before anything is touched (without servers: the real ones are in
tests/integration/test_db_real.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ssdlab.engine import tool
from ssdlab.errors import EnvironmentProblem, ExitCode, UserError
from ssdlab.plan import dbcommands
from ssdlab.plan.db import DbArgs, buffer_bytes, build_options
from ssdlab.run import dbserver, dbworkspace
from ssdlab.run.dbserver import ServerRecord
from ssdlab.run.dbworkspace import DbState
from ssdlab.run.session import boot_id


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SSDLAB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "db"


def _state(tmp_path: Path, token: str, owner: int) -> DbState:
    base = tmp_path / "run" / token
    base.mkdir(parents=True)
    return DbState(token=token, owner_pid=owner, boot_id=boot_id(),
                   base=str(base), workdir=str(tmp_path / "work" / token))


def test_state_round_trips(state_dir: Path, tmp_path: Path) -> None:
    s = _state(tmp_path, "t1", os.getpid())
    s.servers.append(ServerRecord("postgresql", 12345, "/sys/fs/cgroup/memory/x"))
    s.save()
    back = DbState.load(state_dir / "t1.json")
    assert back == s


def test_only_dead_owners_leave_leftovers(state_dir: Path, tmp_path: Path) -> None:
    alive = _state(tmp_path, "alive", os.getpid())  # this test's own process runs ssdlab
    alive.save()
    dead = _state(tmp_path, "dead", 2**22 + 1)  # above pid_max's default: no such process
    dead.save()
    rebooted = _state(tmp_path, "rebooted", os.getpid())
    rebooted.boot_id = "another boot"
    rebooted.save()
    found = {s.token for s in dbworkspace.leftovers()}
    assert {"dead", "rebooted"} <= found


def test_undo_removes_what_the_state_names(state_dir: Path, tmp_path: Path) -> None:
    s = _state(tmp_path, "gone", 2**22 + 1)
    work = Path(s.workdir or "")
    (work / "postgresql" / "data").mkdir(parents=True)
    (work / "postgresql" / "data" / "PG_VERSION").write_text("15")
    s.servers.append(ServerRecord("postgresql", 2**22 + 2))  # no such process: left alone
    s.save()
    said: list[str] = []
    assert dbworkspace.clean_leftovers(said.append) == 1
    assert not work.exists() and not Path(s.base).exists()
    assert not (state_dir / "gone.json").exists()
    assert any("cleaning up database run gone" in line for line in said)


def test_a_pid_reused_by_another_program_is_not_killed() -> None:
    said: list[str] = []
    dbserver.kill_server(os.getpid(), said.append, wait_s=0.1)  # python, not a server
    assert said == []


def test_a_damaged_state_file_is_a_one_line_error(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "bad.json").write_text("{not json")
    with pytest.raises(UserError) as err:
        dbworkspace.leftovers()
    assert "bad.json" in str(err.value) and "\n" not in str(err.value)


def test_unreachable_by() -> None:
    top = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    os.chmod(top, 0o755)
    try:
        _check_unreachable(top)
    finally:
        shutil.rmtree(top)


def _check_unreachable(top: Path) -> None:
    closed = top / "closed"
    closed.mkdir(mode=0o700)
    os.chmod(closed, 0o700)
    root_owned_user = "nobody"
    if not dbserver.user_exists(root_owned_user):
        pytest.skip("no nobody user")
    assert dbserver.unreachable_by(closed / "inner" / "x", root_owned_user) == closed
    os.chmod(closed, 0o711)
    assert dbserver.unreachable_by(closed / "inner" / "x", root_owned_user) is None


def test_missing_programs_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                    ) -> None:
    o = build_options(DbArgs(profile="quick", workloads="pgbench"))
    with pytest.raises(UserError) as err:  # the option names a directory without it
        tool.find_binaries(o, DbArgs(pg_bindir=str(tmp_path)))
    assert str(err.value) == f"--pg-bindir {tmp_path}: no postgres there"
    assert err.value.exit_code == ExitCode.USAGE
    monkeypatch.setattr("ssdlab.engine.tool.glob.glob", lambda _p: [])  # no PostgreSQL installed
    with pytest.raises(EnvironmentProblem) as err:
        tool.find_binaries(o, DbArgs())
    assert "install postgresql" in str(err.value)
    o = build_options(DbArgs(profile="quick", workloads="sysbench-oltp"))
    with pytest.raises(UserError, match="no mariadbd there"):
        tool.find_binaries(o, DbArgs(mariadb_bindir=str(tmp_path)))
    monkeypatch.setattr("ssdlab.engine.tool.shutil.which", lambda *_a, **_k: None)  # none installed
    with pytest.raises(EnvironmentProblem) as err:
        tool.find_binaries(o, DbArgs())
    assert "mariadbd not found" in str(err.value) and "mariadb-server" in str(err.value)
    assert err.value.exit_code == ExitCode.ENVIRONMENT


def test_pg_bindir_picks_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ssdlab.engine.tool.glob.glob", lambda _p: [
        "/usr/lib/postgresql/9/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/13/bin"])
    assert tool.pg_bindir(None) == "/usr/lib/postgresql/15/bin"
    assert tool.pg_bindir("/opt/pg/bin") == "/opt/pg/bin"


def test_memory_limit_bytes() -> None:
    o = build_options(DbArgs(profile="quick"))
    limit = dbcommands.memory_limit_bytes(o, "pgbench", o.sizes)
    assert limit == buffer_bytes(o, "pgbench", o.sizes) + 256 * 2**20
    off = build_options(DbArgs(profile="quick", memory_limit="off"))
    assert dbcommands.memory_limit_bytes(off, "pgbench", off.sizes) is None
    fixed = build_options(DbArgs(profile="quick", memory_limit="1GiB"))
    assert dbcommands.memory_limit_bytes(fixed, "pgbench", fixed.sizes) == 2**30
