"""Secrets are masked in one place (store/masking.py), and every path a command line, a
plan or a message takes into the store or onto the screen goes through it: the store's
writes and reads, ``store merge``, ``--print-config``, the error line. The whole path with
a real PostgreSQL password and real fio: tests/integration/test_secrets_real.py."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ssdlab.store.db import Store
from ssdlab.store.masking import (
    MASK,
    has_password,
    is_secret_option,
    mask_argv,
    mask_json,
    mask_json_text,
    mask_text,
    redact,
)
from ssdlab.store.merge import merge
from ssdlab.store.records import RunHead
from tests.support.cli import ssdlab_in_process
from tests.support.records import doc

PW = "s3cr3tPw"


@pytest.mark.parametrize(("text", "masked"), [
    (f"postgresql://lab:{PW}@db.lab/ssdlab", "postgresql://lab:***@db.lab/ssdlab"),
    (f"postgres://lab:{PW}@db:5433/x?sslmode=require", "postgres://lab:***@db:5433/x?sslmode=require"),
    (f"postgresql://lab:p@{PW}@db/x", "postgresql://lab:***@db/x"),  # an unencoded @
    (f"postgresql:///x?host=/run/pg&password={PW}", "postgresql:///x?host=/run/pg&password=***"),
    (f"postgresql:///x?sslpassword={PW}&passfile=/p", "postgresql:///x?sslpassword=***&passfile=***"),
    (f"postgresql:lab:{PW}@db/x", "postgresql:lab:***@db/x"),  # refused, but shown masked
    (f"nbd://user:{PW}@10.0.0.5:10809/ssd", "nbd://user:***@10.0.0.5:10809/ssd"),
    (f"cannot use results store postgresql://u:{PW}@/x?host=/s: refused",
     "cannot use results store postgresql://u:***@/x?host=/s: refused"),
    (f"host=/s password='{PW} x' user=lab", "host=/s password=*** user=lab"),
    (f"http://127.0.0.1:8421/?token={PW}", "http://127.0.0.1:8421/?token=***"),
])
def test_text_is_masked(text: str, masked: str) -> None:
    assert mask_text(text) == masked and PW not in masked


@pytest.mark.parametrize("text", [
    "postgresql://lab@db.lab/ssdlab?x=1", "postgresql://db.lab:5432/ssdlab",
    "nbd://10.0.0.5:10809/ssd", "/dev/nvme0n1", "node1:/dev/nvme0n1", "user@node1:/dev/sdb",
    "give an access token (--token or $SSDLAB_SERVE_TOKEN)", "run:2.sqlite", "",
])
def test_text_without_a_secret_is_left_alone(text: str) -> None:
    assert mask_text(text) == text and redact(text) == text


def test_redact_is_the_stores_display_and_the_same_mask() -> None:
    url = f"postgres://lab:{PW}@db:5433/x?password={PW}"
    assert redact(url) == mask_text(url) == "postgres://lab:***@db:5433/x?password=***"
    assert has_password(url) and not has_password("postgresql://lab@db/x")


def test_a_command_line_is_masked_word_by_word() -> None:
    argv = ["serve", "--token", PW, "--api-key=" + PW, "--store", f"postgresql://u:{PW}@h/d",
            "--suite-options", f"--profile quick --db-password {PW}", "--passes", "3",
            "--keep-target", "--label", f"password={PW}"]
    assert mask_argv(argv) == [
        "serve", "--token", MASK, "--api-key=***", "--store", "postgresql://u:***@h/d",
        "--suite-options", "--profile quick --db-password ***", "--passes", "3",
        "--keep-target", "--label", "password=***"]


@pytest.mark.parametrize(("flag", "secret"), [
    ("--token", True), ("--password", True), ("--api-key", True), ("--db_passwd", True),
    ("--passes", False), ("--keep-target", False), ("--store", False), ("--target", False),
])
def test_which_options_hold_secrets(flag: str, secret: bool) -> None:
    assert is_secret_option(flag) is secret


def test_stored_values_are_masked_where_a_secret_can_be() -> None:
    plan = {"args": {"store": f"postgresql://u:{PW}@h/d", "api_key": PW, "max_rounds": 5,
                     "mixes": ["100/0", "0/100"], "ratio": math.nan},
            "suite_argv": ["--profile", "quick", "--token", PW],
            # the database suite's workspace id is named token: an id, not a secret
            "workspace": {"token": "20261126-015322-2f7d8a", "client_password": PW}}
    masked = mask_json(plan)
    assert PW not in json.dumps(masked)
    assert masked["args"]["store"] == "postgresql://u:***@h/d"
    assert masked["args"]["api_key"] == MASK and masked["args"]["max_rounds"] == 5
    assert masked["args"]["mixes"] == ["100/0", "0/100"] and math.isnan(masked["args"]["ratio"])
    assert masked["suite_argv"] == ["--profile", "quick", "--token", MASK]
    assert masked["workspace"] == {"token": "20261126-015322-2f7d8a", "client_password": MASK}


def test_a_json_column_without_a_secret_keeps_its_very_text() -> None:
    text = '{"a": [1, 2.50, NaN], "b":"x"}'
    assert mask_json_text(text) is text
    assert PW not in (mask_json_text(json.dumps({"a": f"postgresql://u:{PW}@h/d"})) or "")


# -- the store ------------------------------------------------------------------------------


def _run(store: Store, argv: list[str], **over: Any) -> str:
    args: dict[str, Any] = {
        "suite": "pts", "profile": "quick", "quick": True,
        "target": {"path": "/dev/loop7", "network": {"client_command": ["x", "--password",
                                                                        PW]}},
        "host": {"hostname": "lab"},
        "plan": {"args": {"store": f"postgresql://u:{PW}@h/d"}},
        "versions": {"ssdlab": "0.1.0", "fio": "fio-3.33"}, "argv": argv}
    args.update(over)
    args["plan"] = doc(args["plan"])
    return store.new_run(RunHead(**args))


def _every_byte(path: Path) -> bytes:
    data = path.read_bytes()
    for extra in (path.with_name(path.name + "-wal"),):
        if extra.exists():
            data += extra.read_bytes()
    return data


def test_nothing_the_store_writes_holds_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    argv = ["run", "pts", "--store", f"postgresql://u:{PW}@h/d"]
    with Store.open(path) as store:
        run_id = _run(store, argv)
        store.add_event(run_id, None, "warning", f"store postgresql://u:{PW}@h/d slow",
                        {"url": f"x?password={PW}"})
        store.reopen_run(run_id, argv)
        store.finish_run(run_id, "failed", f"lost postgresql://u:{PW}@h/d")
        set_id = store.new_set(suite="pts", argv=argv, targets=["/a", "/b"])
        store.finish_set(set_id, doc({"errors": [f"postgresql://u:{PW}@h/d"]}))
        run = store.load(run_id)
        assert run.argv == ["run", "pts", "--store", "postgresql://u:***@h/d"]
        assert store.load_set(set_id).argv == run.argv
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert PW.encode() not in _every_byte(path)


def _old_run(path: Path) -> str:
    """A run as ssdlab stored it before it masked anything: the password in the clear."""
    with Store.open(path) as store:
        run_id = _run(store, ["run"])
        set_id = store.new_set(suite="pts", argv=["run"], targets=["/a"])
    clear = json.dumps(["run", "pts", "--store", f"postgresql://u:{PW}@h/d"])
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE runs SET argv_json = ?, plan_json = ? WHERE id = ?",
                     (clear, json.dumps({"store": f"postgresql://u:{PW}@h/d"}), run_id))
        conn.execute("UPDATE sets SET argv_json = ? WHERE id = ?", (clear, set_id))
        conn.execute("INSERT INTO events (run_id, test, kind, message, detail_json, created_at)"
                     " VALUES (?, NULL, 'resumed', 'resumed', ?, 0)",
                     (run_id, json.dumps({"argv": json.loads(clear)})))
    conn.close()
    return run_id


def test_a_run_stored_before_masking_is_read_masked(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    run_id = _old_run(path)
    assert PW.encode() in path.read_bytes() + _every_byte(path)
    for args in (["show", run_id], ["export", run_id, "--format", "json"],
                 ["export", run_id, "--format", "csv"], ["runs"], ["show", "set-"]):
        done = ssdlab_in_process(*args, "--store", str(path))
        assert done.returncode == 0, done.stderr
        assert PW not in done.stdout + done.stderr, args
    exported = ssdlab_in_process("export", run_id, "--format", "json", "--store", str(path))
    assert "postgresql://u:***@h/d" in exported.stdout


def test_merge_copies_no_secret_and_knows_the_masked_copy_for_the_same_run(
    tmp_path: Path
) -> None:
    source, dest = tmp_path / "old.sqlite", tmp_path / "dest.sqlite"
    run_id = _old_run(source)
    with Store.open(source) as src, Store.open(dest) as dst:
        first = merge(src, dst)
        again = merge(src, dst)
    assert first.copied == [run_id] and len(first.sets_copied) == 1
    assert again.same == [run_id] and not again.conflicts and not again.set_conflicts
    conn = sqlite3.connect(dest)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert PW.encode() not in _every_byte(dest)


# -- the command line -------------------------------------------------------------------------


def test_an_error_line_never_shows_a_password(tmp_path: Path) -> None:
    done = ssdlab_in_process("runs", "--store", f"postgresql:u:{PW}@h/d")
    assert done.returncode == 2 and PW not in done.stderr and "u:***@" in done.stderr


def test_a_password_on_the_command_line_gets_one_notice_after_the_command(
    tmp_path: Path
) -> None:
    url = f"postgresql://u:{PW}@/d?host={tmp_path}"
    done = ssdlab_in_process("run", "pts", "--target", str(tmp_path / "t.img"), "--size",
                             "64MiB", "--profile", "quick", "--dry-run", "--store", url)
    assert done.returncode == 0, done.stderr
    notes = done.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("Note: the --store URL holds a password")
    assert "~/.pgpass" in notes[0] and PW not in done.stdout + done.stderr
    refused = ssdlab_in_process("runs", "--store", url)  # a refusal stays one line
    assert refused.returncode == 4 and len(refused.stderr.strip().splitlines()) == 1
    quiet = ssdlab_in_process("run", "pts", "--target", str(tmp_path / "t.img"), "--size",
                              "64MiB", "--profile", "quick", "--dry-run", "--store",
                              f"postgresql://u@/d?host={tmp_path}")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_print_config_shows_no_secret(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[pts]\nstore = "postgresql://lab:{PW}@db/x?sslpassword={PW}"\n')
    done = ssdlab_in_process("run", "pts", "--target", str(tmp_path / "t.img"), "--config",
                             str(config), "--print-config")
    assert done.returncode == 0, done.stderr
    assert PW not in done.stdout + done.stderr
    assert 'store = "postgresql://lab:***@db/x?sslpassword=***"' in done.stdout
    assert "# store: its secret is shown as ***" in done.stdout


def test_a_config_files_secret_in_a_refusal_is_masked(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[pts]\nstore = "mysql://lab:{PW}@db/x"\n')
    done = ssdlab_in_process("run", "pts", "--target", str(tmp_path / "t.img"), "--config",
                             str(config), "--dry-run")
    assert done.returncode == 2 and "lab:***@db" in done.stderr
    assert PW not in done.stdout + done.stderr
