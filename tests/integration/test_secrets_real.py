"""A store password, for real: runs with real fio on test files write into a PostgreSQL
database whose role must log in with a password given in the ``--store`` URL (in its
user part for one run, as ``?password=`` for a set of two), and the password then
appears nowhere ssdlab keeps or shows anything: not in any table of the database (its
whole dump), not in the JSON or CSV export, the HTML report or the PDF's text, not in
the dashboard's pages, API, live stream or metrics, and not in anything any command
printed (the runs' progress and ends, ``show``, ``runs``, ``export``, ``report``,
``serve``, ``--print-config``, a refused login's error line). The runs did use it: the
role cannot log in without it.

Judged by what is stored and printed, never by time.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import ssdlab
from tests.support.postgres import PgServer

pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.browser]
#: a short PTS IOPS test: two cells of 0.1 s a round, 5 rounds
PTS = ("--size", "64MiB", "--profile", "quick", "--tests", "iops", "--block-sizes", "4",
       "--mixes", "0/100,100/0", "--round-seconds", "0.1", "--max-rounds", "5")
NOTICE = "Note: the --store URL holds a password"


class Seen:
    """Everything the test saw, by where it came from; ``clean`` asserts the password is
    in none of it."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.texts: dict[str, str] = {}

    def add(self, where: str, text: str) -> str:
        self.texts[where] = text
        return text

    def command(self, where: str, *args: str, env: dict[str, str] | None = None,
                code: int = 0) -> subprocess.CompletedProcess[str]:
        done = ssdlab(*args, env=env)
        self.add(f"{where}: stdout", done.stdout)
        self.add(f"{where}: stderr", done.stderr)
        assert done.returncode == code, f"{where}: {done.stderr}{done.stdout[-2000:]}"
        return done

    def clean(self) -> None:
        forms = (self.password, self.password.encode().hex())
        leaks = [where for where, text in self.texts.items() if any(f in text for f in forms)]
        assert leaks == [], f"the password shows in: {leaks}"


def test_a_store_password_is_nowhere_in_what_ssdlab_keeps_or_shows(
    pg: PgServer, tmp_path: Path
) -> None:
    password = "Pw" + secrets.token_hex(8)
    db, role, sock = pg.password_database(password)
    in_user = f"postgresql://{role}:{password}@/{db}?host={sock}"
    in_query = f"postgresql:///{db}?host={sock}&user={role}&password={password}"
    seen = Seen(password)
    env = {"SSDLAB_STORE": in_user}  # the later commands: the password in the environment

    # the runs: one with the password in the URL's user part, a set with ?password=
    one = seen.command("run", "run", "pts", "--target", str(tmp_path / "one.img"), *PTS,
                       "--store", in_user)
    assert NOTICE in one.stderr and "***" in one.stdout
    pair = seen.command("set", "run", "pts", "--target", str(tmp_path / "a.img"), "--target",
                        str(tmp_path / "b.img"), *PTS, "--store", in_query)
    assert NOTICE in pair.stderr
    listed = seen.command("runs", "runs", env=env).stdout
    run_ids = [line.split()[0] for line in listed.splitlines() if line[:2].isdigit()]
    assert len(run_ids) == 3, listed
    set_id = next(w for w in pair.stdout.split() if w.startswith("set-")).rstrip(":,.")

    # the runs were written with it: the role needs its password
    without = seen.command("no password", "runs", "--store", in_user.replace(f":{password}", ""),
                           code=4)
    assert "cannot use results store" in without.stderr
    wrong = seen.command("a wrong password", "runs", "--store",
                         in_user.replace(password, "Wrong" + password[::-1]), code=4)
    assert password[::-1] not in wrong.stderr and "***" in wrong.stderr

    # what the terminal shows of them
    seen.command(f"show {set_id}", "show", set_id, env=env)
    for ref in run_ids:
        seen.command(f"show {ref}", "show", ref, env=env)
        for fmt in ("json", "csv"):
            exported = seen.command(f"export {ref} {fmt}", "export", ref, "--format", fmt,
                                    env=env).stdout
            seen.add(f"the {fmt} export of {ref}", exported)
    show_set = seen.texts[f"show {set_id}: stdout"]
    assert "command: ssdlab run pts" in show_set and "password=***" in show_set
    exported = "".join(seen.texts[f"export {r} json: stdout"] for r in run_ids)
    assert f"{role}:***@" in exported and "password=***" in exported
    seen.command("store info", "store", "info", env=env)
    printed = seen.command("print-config", "run", "pts", "--target", str(tmp_path / "c.img"),
                           "--print-config", "--store", in_user).stdout
    assert f"store = \"postgresql://{role}:***@" in printed
    seen.command("show nothing", "show", "nosuchrun", "--store", in_user, code=5)

    # the report: HTML and the PDF's text
    out = tmp_path / "report"
    seen.command("report", "report", *run_ids, "-o", str(out), env=env)
    html = seen.add("report.html", (out / "report.html").read_text())
    assert "command" in html and f"{role}:***@" in html
    pdf = subprocess.run(["pdftotext", str(out / "report.pdf"), "-"], capture_output=True,
                         text=True, check=True).stdout
    seen.add("report.pdf", pdf)
    assert "***" in pdf

    # the dashboard, given its token on the command line
    token = secrets.token_urlsafe(24)
    with _served(in_user, token) as (url, server):
        pages = ["", "api/runs", "metrics", "api/live/runs",
                 *(f"{p}/{r}" for r in run_ids for p in ("runs", "api/runs", "api/live/runs")),
                 f"runs/{run_ids[0]}/report"]
        for page in pages:
            seen.add(f"dashboard /{page}", _get(url + page, token))
        api = "".join(seen.texts[f"dashboard /api/runs/{r}"] for r in run_ids)
        assert f"{role}:***@" in api and "password=***" in api  # the command lines, masked
    seen.add("serve: stdout", server[0])
    seen.add("serve: stderr", server[1])
    assert token not in server[0] + server[1] and "Note: --token" in server[1]

    # every table of the database, and the database whole
    dump = subprocess.run([str(pg.bindir / "pg_dump"), "-h", sock, "-U", "postgres", db],
                          user="postgres", capture_output=True, text=True, check=True).stdout
    seen.add("pg_dump", dump)
    assert all(r in dump for r in run_ids) and set_id in dump
    for table in _tables(pg, db):
        rows = pg.sql(f"SELECT t::text FROM {table} t", db)
        seen.add(f"table {table}", "\n".join(str(r[0]) for r in rows))
    assert seen.texts["table runs"].count("***") >= 3

    seen.clean()


@contextlib.contextmanager
def _served(store: str, token: str) -> Iterator[tuple[str, list[str]]]:
    """``ssdlab serve`` on a free port: its URL, and (filled once it stopped) its standard
    output and error."""
    proc = subprocess.Popen([sys.executable, "-m", "ssdlab", "serve", "--port", "0",
                             "--store", store, "--token", token], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SSDLAB_STORE": ""})
    output = ["", ""]
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert " at http://" in first, first + (proc.stderr.read() if proc.stderr else "")
        output[0] = first
        yield first.split(" at ", 1)[1].split(" ", 1)[0], output
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        output[0] += out
        output[1] += err


def _get(url: str, token: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        if "live" not in url:
            return str(response.read().decode())
        lines: list[str] = []  # a stream: up to its first event's data
        while not lines or not lines[-1].startswith("data:"):
            line = response.readline().decode()
            assert line, "the stream ended before its first event"
            lines.append(line)
        return "".join(lines)


def _tables(pg: PgServer, db: str) -> list[str]:
    rows = pg.sql("SELECT table_name FROM information_schema.tables WHERE table_schema ="
                  " 'public' AND table_type = 'BASE TABLE'", db)
    names = sorted(str(r[0]) for r in rows)
    assert {"runs", "sets", "events", "tests", "rounds"} <= set(names), names
    return names
