"""The database suite's plan: options, the dataset fitted to the target, the commands."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.plan import db
from ssdlab.plan import dbcommands as cmd
from ssdlab.plan.db import MIB, PGBENCH, SYSBENCH, DbArgs, build_options, fit

GIB = 1024 * MIB


def test_defaults_are_the_reviews() -> None:
    o = build_options(DbArgs())
    assert (o.sizes.tables, o.sizes.table_rows, o.threads) == (100, 10_000_000, 32)
    assert (o.warmup_seconds, o.seconds) == (7200.0, 3600.0)
    assert o.workloads == (SYSBENCH, PGBENCH)
    assert [t for t, _, _ in o.tests()] == ["sysbench-oltp_read_write", "pgbench-tpcb-like"]
    # a tenth of the dataset, as the review's 24 GB buffer pool of about 240 GB
    pool = db.buffer_bytes(o, SYSBENCH, o.sizes)
    assert pool / o.sizes.dataset_bytes(SYSBENCH) == pytest.approx(0.1, rel=0.01)
    # pgbench's default dataset is about the sysbench one
    ratio = o.sizes.dataset_bytes(PGBENCH) / o.sizes.dataset_bytes(SYSBENCH)
    assert 0.8 < ratio < 1.25
    assert not o.quick


def test_quick_profile_and_explicit_values_win() -> None:
    o = build_options(DbArgs(profile="quick", threads=8, tables=2))
    assert o.quick and o.threads == 8 and o.sizes.tables == 2
    assert o.sizes.table_rows == db.PROFILE_DEFAULTS["quick"]["table_rows"]


@pytest.mark.parametrize(("args", "words"), [
    (DbArgs(workloads="sysbench-oltp,mysql"), "--workloads 'mysql'"),
    (DbArgs(workloads=" , "), "--workloads is empty"),
    (DbArgs(sysbench_tests="oltp_insert"), "--sysbench-tests 'oltp_insert'"),
    (DbArgs(pgbench_modes="tpcc"), "--pgbench-modes 'tpcc'"),
    (DbArgs(threads=0), "--threads 0"),
    (DbArgs(table_rows=-1), "--table-rows -1"),
    (DbArgs(seconds=0), "--seconds 0"),
    (DbArgs(warmup_seconds=-1), "--warmup-seconds -1"),
    (DbArgs(buffer_fraction=0), "--buffer-fraction 0"),
    (DbArgs(memory_limit="lots"), "--memory-limit 'lots'"),
    (DbArgs(memory_limit="1MiB"), "below 64MiB"),
    (DbArgs(fs="zfs"), "--fs 'zfs'"),
    (DbArgs(server_options=("innodb_flush_log_at_trx_commit=2",)), "SERVER:KEY=VALUE"),
    (DbArgs(server_options=("oracle:x=1",)), "SERVER:KEY=VALUE"),
    (DbArgs(server_options=("postgresql:fsync",)), "SERVER:KEY=VALUE"),
    (DbArgs(server_options=("postgresql:a;b=1",)), "not a setting name"),
    (DbArgs(server_options=("postgresql:a=x'y",)), "quote"),
])
def test_bad_options_are_one_line_errors(args: DbArgs, words: str) -> None:
    with pytest.raises(UserError) as err:
        build_options(args)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_server_options_win_and_are_kept_per_server() -> None:
    o = build_options(DbArgs(profile="quick", server_options=(
        "mariadb:innodb-flush-log-at-trx-commit=2,postgresql:synchronous_commit=off",)))
    f = fit(o, GIB, "x")
    maria = cmd.mariadb_settings(o, f.sizes, f.fs_bytes)
    pg = cmd.postgres_settings(o, f.sizes, f.fs_bytes)
    assert maria["innodb_flush_log_at_trx_commit"] == "2"
    assert pg["synchronous_commit"] == "off" and pg["fsync"] == "on"
    plain = build_options(DbArgs(profile="quick"))
    assert cmd.mariadb_settings(plain, f.sizes, f.fs_bytes)["innodb_flush_log_at_trx_commit"] == "1"
    assert cmd.mariadb_settings(plain, f.sizes, f.fs_bytes)["innodb_flush_method"] == "O_DIRECT"


def test_a_dataset_that_does_not_fit_is_refused_unless_scaled() -> None:
    o = build_options(DbArgs())  # about 240 GB
    with pytest.raises(UserError) as err:
        fit(o, 10 * GIB, "/dev/x's file system")
    text = str(err.value)
    assert "--scale" in text and "100 tables x 10,000,000 rows" in text and "\n" not in text
    scaled = fit(dataclasses.replace(o, scale=True), 10 * GIB, "x")
    assert scaled.scaled is not None and "--scale" in scaled.scaled
    for workload in o.workloads:
        need = db.needed_bytes(workload, scaled.sizes, scaled.fs_bytes)
        assert need <= 10 * GIB
        # and not needlessly small: within a few per cent of the room there is
        assert need > 10 * GIB * 0.9
    assert scaled.sizes.tables == 100  # fewer rows per table first


def test_scale_shrinks_only_what_does_not_fit() -> None:
    o = build_options(DbArgs(profile="quick", scale=True))
    fitted = fit(o, GIB, "x")
    assert fitted.sizes == o.sizes and fitted.scaled is None


def test_a_target_too_small_for_any_server() -> None:
    o = build_options(DbArgs(profile="quick", scale=True))
    with pytest.raises(UserError, match="too small"):
        fit(o, 40 * MIB, "x")


def test_logs_are_sized_to_small_file_systems() -> None:
    assert db.log_bytes(SYSBENCH, 100 * GIB) == 96 * MIB  # InnoDB's default
    assert db.log_bytes(PGBENCH, 100 * GIB) == 1024 * MIB  # max_wal_size's default
    assert db.log_bytes(SYSBENCH, 256 * MIB) == 16 * MIB
    assert db.log_bytes(PGBENCH, 256 * MIB) == 32 * MIB


def test_commands_listen_on_private_sockets_only() -> None:
    o = build_options(DbArgs(profile="quick"))
    f = fit(o, GIB, "x")
    lay = cmd.Layout(Path("/run/ssdlab-db/T"), Path("/run/ssdlab-db/T/mnt"))
    b = cmd.Binaries()
    maria = cmd.mariadb_start(b, lay, cmd.mariadb_settings(o, f.sizes, f.fs_bytes))
    assert "--no-defaults" in maria and "--skip-networking" in maria
    assert f"--socket={lay.mariadb_socket()}" in maria
    pg = cmd.postgres_start(b, lay, {**cmd.postgres_settings(o, f.sizes, f.fs_bytes),
                                     "listen_addresses": "*"})
    # the user cannot open a TCP port: the private socket settings come last and win
    assert sum(a.startswith("listen_addresses=") for a in pg) == 1
    pairs = dict(a.split("=", 1) for a in pg if "=" in a)
    assert pairs["listen_addresses"] == ""
    assert pairs["unix_socket_directories"] == str(lay.sock_dir("postgresql"))


def test_tool_commands() -> None:
    o = build_options(DbArgs(profile="quick"))
    lay = cmd.Layout(Path("/r/T"), Path("/r/T/mnt"))
    b = cmd.Binaries()
    run = cmd.sysbench_run(b, lay, "oltp_write_only", o.sizes, 4, 10, measured=True)
    assert run[:2] == ["sysbench", "oltp_write_only"] and run[-1] == "run"
    assert "--histogram=on" in run and "--percentile=99" in run and "--time=10" in run
    warm = cmd.sysbench_run(b, lay, "oltp_write_only", o.sizes, 4, 5, measured=False)
    assert "--histogram=on" not in warm
    pg = cmd.pgbench_run(b, lay, "simple-update", 4, 10, Path("/r/T/log/tx"))
    assert "-N" in pg and "-l" in pg and "--log-prefix=/r/T/log/tx" in pg
    assert pg[-1] == cmd.PGBENCH_DB
    assert "-S" in cmd.pgbench_run(b, lay, "select-only", 4, 10, None)
    assert cmd.shown(["a b", "c"]) == "'a b' c"
