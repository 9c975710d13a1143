"""Where a store is: ``--store``/``$SSDLAB_STORE`` as an SQLite path or a PostgreSQL URL;
anything else is one line and nothing made (``--store postgresql://x/y`` once made a
directory ``postgresql:`` in the working directory)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ssdlab.cli.main import main
from ssdlab.errors import ExitCode, UserError
from ssdlab.store.location import StoreLocation, redact
from tests.support.postgres import PgServer


@pytest.mark.parametrize(("text", "kind", "where"), [
    ("results.sqlite", "sqlite", "results.sqlite"),
    ("/srv/lab/r.sqlite", "sqlite", "/srv/lab/r.sqlite"),
    ("sqlite:///srv/lab/r.sqlite", "sqlite", "/srv/lab/r.sqlite"),
    ("sqlite:r.sqlite", "sqlite", "r.sqlite"),
    ("run:2.sqlite", "sqlite", "run:2.sqlite"),  # a colon in a file name
    ("C:/x.sqlite", "sqlite", "C:/x.sqlite"),
    ("postgresql://lab@db.lab/ssdlab", "postgresql", "postgresql://lab@db.lab/ssdlab"),
    ("postgres://lab:pw@db.lab:5433/ssdlab?sslmode=require", "postgresql",
     "postgres://lab:***@db.lab:5433/ssdlab?sslmode=require"),
    ("postgresql:///ssdlab?host=/run/pg&password=pw", "postgresql",
     "postgresql:///ssdlab?host=/run/pg&password=***"),
])
def test_locations(text: str, kind: str, where: str) -> None:
    location = StoreLocation.parse(text)
    assert location.kind == kind and str(location) == where
    assert "pw" not in str(location).replace("pw=", "")


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert StoreLocation.parse("~/r.sqlite").path == tmp_path / "r.sqlite"


@pytest.mark.parametrize(("text", "why"), [
    ("", "is empty"),
    ("mysql://db.lab/ssdlab", "not mysql:"),
    ("https://lab/results", "not https:"),
    ("postgresql:ssdlab", "is not a PostgreSQL URL"),
    ("sqlite:", "names no file"),
    ("mongodb://u:secret@h/db", "u:***@h"),
])
def test_refused_locations(text: str, why: str) -> None:
    with pytest.raises(UserError, match=re.escape(why)) as info:
        StoreLocation.parse(text)
    assert "\n" not in info.value.message and "secret" not in info.value.message


def test_redact_leaves_urls_without_secrets_alone() -> None:
    assert redact("postgresql://lab@h/db?x=1") == "postgresql://lab@h/db?x=1"


def _nothing_made(where: Path) -> None:
    assert sorted(p.name for p in where.iterdir()) == []


def test_an_unusable_store_is_one_line_and_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path.parent / f"{tmp_path.name}-t.img"
    for argv, code, words in [
        (["runs", "--store", "mysql://db.lab/x"], ExitCode.USAGE, "not mysql:"),
        (["run", "pts", "--target", str(target), "--size", "64MiB", "--profile", "quick",
          "--store", "mysql://db.lab/x", "--dry-run"], ExitCode.USAGE, "not mysql:"),
        (["runs", "--store", f"postgresql://u:pw@/x?host={tmp_path}&connect_timeout=2"],
         ExitCode.ENVIRONMENT, "cannot use results store postgresql://u:***@/x?host="),
    ]:
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1 and ":pw@" not in err
        _nothing_made(tmp_path)
    assert not target.exists()
    monkeypatch.setenv("SSDLAB_STORE", "ftp://x/y")
    assert main(["runs"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("Error: $SSDLAB_STORE: results store 'ftp://x/y'")
    _nothing_made(tmp_path)


def test_a_bad_store_in_a_config_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path.parent / f"{tmp_path.name}-run.json"
    config.write_text(json.dumps({"store": "redis://cache/0"}))
    code = main(["run", "slc-probe", "--target", "t.img", "--config", str(config),
                 "--dry-run"])
    assert code == ExitCode.USAGE
    assert "not redis:" in capsys.readouterr().err
    _nothing_made(tmp_path)


def test_runs_on_a_postgresql_store(pg: PgServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = pg.new_database()
    assert main(["runs", "--store", url]) == 0
    assert capsys.readouterr().out == f"no runs yet in {url}\n"
