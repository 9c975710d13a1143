"""``ssdlab serve``: the bind check, the token gate (a real uvicorn on a free port, driven
with urllib), the endpoints, the data read-outs and Ctrl-C."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.steady import SNIA_RULE, check_window
from ssdlab.errors import RunNotFound, UserError
from ssdlab.serve import auth, data
from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunHead
from ssdlab.suites import find
from tests.support import servestore as ss
from tests.support.cli import killed_at_exit, one_line_error, ssdlab_in_process
from tests.support.postgres import PgServer
from tests.support.records import doc

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

TOKEN = "s3cret-token-of-the-lab"
ROOT = Path(__file__).resolve().parents[2]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = urllib.request.build_opener(_NoRedirect)


def get(url: str, headers: dict[str, str] | None = None,
        ) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with OPENER.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    path = tmp_path / "results.sqlite"
    with Store.open(path) as opened:
        run_id = ss.new_running_run(opened)
        for n in range(1, 7):
            ss.add_round(opened, run_id, n)
    yield path, run_id


@pytest.fixture
def gated(store: tuple[Path, str]) -> Iterator[str]:
    from ssdlab.serve.app import running
    with running(store[0], TOKEN) as url:
        yield url


PATHS = ["", "runs/x", "api/runs", "api/runs/last", "api/live/runs", "metrics",
         "assets/uPlot.iife.min.js", "assets/run.js", "runs/last/report", "no/such/page"]


@pytest.mark.parametrize("path", PATHS)
def test_without_the_token_a_request_gets_401_and_nothing_else(gated: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-of-the-lab"},
                    {"Authorization": f"Basic {TOKEN}"},
                    {"Cookie": f"{auth.COOKIE}={TOKEN}"},  # the token itself is no cookie
                    {"Cookie": "garbage;;=\x7f"}):
        status, got, body = get(gated + path, headers)
        assert status == 401, (path, headers)
        assert body == b"unauthorized\n"
        assert got["content-type"].startswith("text/plain")
        assert not {k.lower() for k in got} - {"content-type", "content-length",
                                               "www-authenticate", "date", "server",
                                               "connection"}


def test_a_wrong_token_in_the_address_gets_401(gated: str) -> None:
    status, headers, body = get(gated + "?token=nope")
    assert (status, body) == (401, b"unauthorized\n")
    assert "set-cookie" not in {k.lower() for k in headers}


def test_the_bearer_token_opens_everything(gated: str, store: tuple[Path, str]) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, _, body = get(gated + "api/runs", bearer)
    assert status == 200 and json.loads(body)["runs"][0]["id"] == store[1]
    assert get(gated + "metrics", bearer)[0] == 200
    assert get(gated + "assets/uPlot.iife.min.js", bearer)[0] == 200


def test_the_token_once_in_the_address_sets_a_cookie(gated: str, store: tuple[Path, str]) -> None:
    status, headers, _ = get(gated + f"runs/{store[1]}?token={TOKEN}&x=1")
    assert status == 303
    assert headers["location"] == f"{store[1]}?x=1"  # relative: /runs/RUN?x=1
    assert get(gated + f"?token={TOKEN}")[1]["location"] == "./"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    value = cookie.split(";", 1)[0]
    status, _, body = get(gated + f"runs/{store[1]}", {"Cookie": value})
    assert status == 200 and b"run.js" in body


def test_on_loopback_without_a_token_only_local_names_are_answered(
        store: tuple[Path, str]) -> None:
    from ssdlab.serve.app import running
    with running(store[0]) as url:
        assert get(url + "api/runs")[0] == 200
        assert get(url + "api/runs", {"Host": "localhost:1234"})[0] == 200
        status, _, body = get(url + "api/runs", {"Host": "attacker.example"})
        assert status == 403 and b"runs" not in body


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "lab.example"])
def test_a_non_loopback_bind_without_a_token_is_refused(tmp_path: Path, host: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(auth.TOKEN_ENV, raising=False)
    result = ssdlab_in_process("serve", "--host", host, "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2
    assert "token" in one_line_error(result)
    assert result.stdout == ""
    assert not (tmp_path / "s.sqlite").exists()


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    result = ssdlab_in_process("serve", "--host", "0.0.0.0", "--token", "short",
                               "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2 and "16 characters" in one_line_error(result)


def test_serve_starts_before_any_store_and_shows_runs_once_one_is_made(
        tmp_path: Path) -> None:
    """A lab starts its dashboard first, as a service: no store yet is an empty list (the
    server never makes the store), and the runs show as soon as a run makes it."""
    path = tmp_path / "later" / "results.sqlite"  # not even its directory yet
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "ssdlab", "serve", "--port", "0",
                             "--store", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    with killed_at_exit(proc):
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].split(" ", 1)[0]
        assert proc.stdout.readline().strip() == (
            f"no results store at {path} yet: the dashboard shows its runs as soon as a "
            "run makes it")
        status, _, body = get(url + "api/runs")
        assert status == 200 and json.loads(body)["total"] == 0
        assert get(url)[0] == 200
        status, _, body = get(url + "metrics")
        assert status == 200 and b"ssdlab_runs_running 0.0\n" in body
        status, _, body = get(url + "api/runs/20260101")
        assert status == 404 and b"no results store" in body
        assert not path.exists() and not path.parent.exists()  # nothing made
        path.parent.mkdir()
        with Store.open(path) as opened:
            run_id = ss.new_running_run(opened)
        status, _, body = get(url + "api/runs")
        assert status == 200 and [r["id"] for r in json.loads(body)["runs"]] == [run_id]
        assert get(url + f"api/runs/{run_id}")[0] == 200
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_without_the_serve_extra_one_line_says_what_to_install(
        store: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    result = ssdlab_in_process("serve", "--store", str(store[0]))
    assert result.returncode == 4
    assert "pip install 'ssdlab[serve]'" in one_line_error(result)


def test_loopback_names() -> None:
    assert all(auth.is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]",
                                             "localhost"))
    assert not any(auth.is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "", "lab"))


def test_ctrl_c_stops_the_server_with_a_stream_open(store: tuple[Path, str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "ssdlab", "serve", "--port", "0",
                             "--store", str(store[0])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    with killed_at_exit(proc):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        opened = threading.Event()

        def listen() -> None:
            with contextlib.suppress(OSError, http.client.HTTPException), \
                    urllib.request.urlopen(url + "api/live/runs", timeout=60) as stream:
                stream.readline()
                opened.set()
                stream.read()

        threading.Thread(target=listen, daemon=True).start()
        assert opened.wait(30)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopped" in out and "Traceback" not in err


def test_pages_data_and_report(store: tuple[Path, str]) -> None:
    from ssdlab.serve.app import running
    path, run_id = store
    with running(path) as url:
        status, headers, body = get(url)
        assert status == 200 and b"runs.js" in body
        assert "default-src 'self'" in headers["content-security-policy"]
        view = json.loads(get(url + f"api/runs/{run_id[:12]}")[2])
        assert view["run"]["id"] == run_id and view["current"]["round"] == 6
        assert get(url + "api/runs/nope")[0] == 404
        status, _, body = get(url + f"runs/{run_id}/report")
        assert status == 409 and b"still running" in body
        with Store.open(path) as opened:
            opened.finish_run(run_id, "complete")
        status, headers, body = get(url + f"runs/{run_id}/report")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert run_id.encode() in body
        status, headers, body = get(url + "metrics")
        assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert b"ssdlab_runs_running 0.0\n" in body


# -- the data read-outs ------------------------------------------------------------------


def test_open_store_readonly_never_creates_a_store(tmp_path: Path) -> None:
    """No store yet reads as a store without runs, and is not made."""
    with data.open_store_readonly(tmp_path / "none.sqlite") as opened:
        assert opened.list_runs() == []
        with pytest.raises(RunNotFound, match=r"no results store at .* yet"):
            opened.resolve("last")
        assert data.runs_list(opened.list_runs(), {})["total"] == 0
    assert not (tmp_path / "none.sqlite").exists()


def test_an_empty_sqlite_file_is_a_store_not_made_yet(tmp_path: Path) -> None:
    """A run creates the file, then its tables: in between it is a store without runs."""
    path = tmp_path / "results.sqlite"
    path.touch()
    with data.open_store_readonly(path) as opened:
        assert opened.list_runs() == []
    assert path.stat().st_size == 0  # still not written


def test_an_sqlite_file_of_another_program_is_still_refused(tmp_path: Path) -> None:
    import sqlite3
    path = tmp_path / "other.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(UserError, match="not an ssdlab results store"):
        data.open_store_readonly(path)


def test_the_runs_list_filters(tmp_path: Path) -> None:
    path = tmp_path / "many.sqlite"
    ss.many_runs(path, 24)
    with data.open_store_readonly(path) as opened:
        runs = opened.list_runs()
    everything = data.runs_list(runs, {})
    assert everything["total"] == len(everything["runs"]) == 24
    assert everything["choices"]["suite"] == ["curves", "presets", "pts", "saturation"]
    pts = data.runs_list(runs, {"suite": "pts", "status": "complete", "model": "model 1"})
    assert pts["runs"] and all(r["suite"] == "pts" and r["status"] == "complete"
                               and "Model 1" in r["model"] for r in pts["runs"])
    assert data.runs_list(runs, {"target": "NVME3"})["runs"][0]["target"] == "/dev/nvme3n1"
    assert data.runs_list(runs, {"unknown": "x"})["total"] == 24


def test_the_run_view_of_a_running_run(store: tuple[Path, str]) -> None:
    path, run_id = store
    with Store.open(path) as opened:
        opened.add_event(run_id, ss.TEST, data.MEMBERS_KIND, "members", {
            "round": 6, "members": [{"name": "nvme0n1", "seconds": 2.0, "read_bytes": 1e9,
                                     "write_bytes": 1e9, "busy_ms": 1000}]})
        opened.add_event(run_id, ss.TEST, data.HOST_ROUND_KIND, "hosts", {
            "round": 6, "hosts": {"h1": {"tracking": {ss.VARIABLE: 5.0}, "cells": []}}})
        run = data.load_run(opened, run_id)
    view = data.run_view(run, now=run.tests[0].rounds[-1].ended_at)
    assert view["current"] == {"test": ss.TEST, "round": 6, "phase": "round", "max_rounds": 25}
    assert view["rounds_stored"] == 6 and view["report"] is None
    # what a quick run of its suite is, in the suite's words (the page shows it after QUICK)
    suite = find(view["run"]["suite"])
    assert suite is not None and view["run"]["quick_text"] == suite.spec.quick_text
    assert view["eta"]["later_tests"] == ["throughput"] and view["eta"]["low_s"] == 0
    assert view["eta"]["high_s"] == pytest.approx(19 * (run.tests[0].rounds[-1].ended_at
                                                       - run.tests[0].rounds[0].ended_at) / 5)
    (test,) = view["tests"]
    (variable,) = test["tracking"]
    assert variable["rounds"] == [1, 2, 3, 4, 5, 6]
    check = check_window(ss.VARIABLE, [ss.round_iops(n) for n in range(2, 7)], 2, SNIA_RULE)
    assert variable["window"]["first"] == 2 and variable["window"]["last"] == 6
    assert variable["window"]["data_excursion_pct"] == pytest.approx(check.data_excursion_pct)
    assert variable["window"]["passed"] == check.passed
    assert test["rule"]["max_slope_excursion"] == 0.1
    assert test["members"] == [{"name": "nvme0n1", "rounds": [6], "mb_per_s": [1000.0],
                                "busy_pct": [50.0]}]
    assert test["hosts"] == {"variable": ss.VARIABLE,
                             "hosts": [{"name": "h1", "rounds": [6], "values": [5.0]}]}
    json.loads(data.to_json(view))  # plain JSON


def test_the_fingerprint_follows_every_stored_round(store: tuple[Path, str]) -> None:
    path, run_id = store
    with Store.open(path) as opened:
        before = data.run_fingerprint(data.load_run(opened, run_id))
        ss.add_round(opened, run_id, 7)
        after = data.run_fingerprint(data.load_run(opened, run_id))
        listed = data.list_fingerprint(opened.list_runs())
        opened.finish_run(run_id, "complete")
        assert data.list_fingerprint(opened.list_runs()) != listed
    assert before != after


def test_an_eta_is_unknown_where_the_plan_does_not_say(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as opened:
        run_id = opened.new_run(RunHead("presets", "x", False, {}, {}, doc(), {}, []))
        opened.add_round(run_id, "t", RoundRecord(1, "ok", {}, [], None, 1.0, 2.0))
        view = data.run_view(opened.load(run_id))
    assert view["eta"]["text"].startswith("ETA unknown")
    assert view["tests"][0]["tracking"] == []


def test_the_vendored_files_are_those_recorded() -> None:
    import hashlib
    import re

    from ssdlab.serve.app import ASSETS
    sources = (ASSETS / "SOURCES").read_text()
    recorded = dict(re.findall(r"(\S+)\s+<- \S+\n\s+sha256 ([0-9a-f]{64})", sources))
    assert set(recorded) == {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"}
    for name, digest in recorded.items():
        assert hashlib.sha256((ASSETS / name).read_bytes()).hexdigest() == digest, name


def test_an_empty_postgresql_database_is_an_empty_list_until_a_run_makes_the_store(
        pg: PgServer) -> None:
    from ssdlab.serve.app import running
    url = pg.new_database()
    with running(url) as base:
        status, _, body = get(base + "api/runs")
        assert status == 200 and json.loads(body)["total"] == 0
        assert get(base + "metrics")[0] == 200
        with Store.open(url) as opened:
            run_id = ss.new_running_run(opened)
        status, _, body = get(base + "api/runs")
        assert status == 200 and [r["id"] for r in json.loads(body)["runs"]] == [run_id]


def test_the_dashboard_and_metrics_of_a_postgresql_store(pg: PgServer) -> None:
    """Any store: the same pages, API and metrics from a lab's PostgreSQL, read-only."""
    from ssdlab.serve.app import running
    url = pg.new_database()
    with Store.open(url) as opened:
        run_id = ss.new_running_run(opened)
        for n in range(1, 4):
            ss.add_round(opened, run_id, n)
    with running(url) as base:
        status, _, body = get(base + "api/runs")
        assert status == 200 and run_id.encode() in body
        status, _, body = get(base + f"api/runs/{run_id}")
        assert status == 200 and json.loads(body)["rounds_stored"] == 3
        status, _, body = get(base + "metrics")
        assert status == 200 and f'ssdlab_round_number{{run="{run_id}"'.encode() in body
    with Store.open(url) as opened:  # nothing was written: the run is as it was
        assert [r.round_no for r in opened.load(run_id).tests[0].rounds] == [1, 2, 3]
        assert opened.load(run_id).status == "running"
