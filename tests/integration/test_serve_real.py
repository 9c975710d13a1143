"""``ssdlab serve`` beside a real run: a short quick PTS with real fio writes a store on a
file target while Chromium shows the run's page; every round stored shows on the page.

The run: the IOPS test of the quick profile cut to two 4 KiB cells (100/0, 0/100) of 1 s,
at most 6 rounds, no purge or preconditioning: about 15-20 s. How soon a round shows is
printed (``-rA`` shows it), not judged here: noise on a shared machine could cross any
tight limit; bench/serve_speed.py measures it. The test waits up to 30 s per round.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from tests.support import servestore
from tests.support.browser import Browser, Page, require_chromium

pytestmark = [pytest.mark.browser]
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[2]
WAIT_PER_ROUND_S = 30.0
RUN = ("--size", "64MiB", "--profile", "quick", "--tests", "iops", "--block-sizes", "4",
       "--mixes", "100/0,0/100", "--round-seconds", "1", "--max-rounds", "6",
       "--purge", "none", "--no-precondition")


def _ssdlab(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ssdlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def _process(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _until(what: str, done: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s", pytrace=False)
        time.sleep(0.05)


def _stored(store: Path) -> tuple[str, int]:
    """The only run's status and how many rounds it has stored."""
    with Store.open(store) as opened:
        (summary,) = opened.list_runs()
        run = opened.load(summary.run_id)
    return run.status, sum(len(t.rounds) for t in run.tests)


def _shown(page: Page) -> int:
    return int(page.evaluate("document.body.dataset.rounds"))


@pytest.mark.fio
def test_every_stored_round_shows_on_the_live_page(tmp_path: Path) -> None:
    require_chromium()
    store = tmp_path / "results.sqlite"
    run = _ssdlab("run", "pts", "--target", str(tmp_path / "t.img"), *RUN, "--store",
                  str(store))
    with _process(run):
        _until("the run records itself", lambda: store.exists() and _has_run(store), 60)
        with _process(_ssdlab("serve", "--port", "0", "--store", str(store))) as server:
            assert server.stdout is not None
            url = server.stdout.readline().split(" at ", 1)[1].split(" ", 1)[0]
            run_id = _run_id(store)
            with Browser() as browser, browser.open_url(f"{url}runs/{run_id}") as page:
                delays = _follow(page, store)
                out, err = run.communicate(timeout=120)
                assert run.returncode == 0, err + out[-2000:]
                status, total = _stored(store)
                _until("the page shows the run complete", lambda: page.evaluate(
                    "document.body.dataset.status") == "complete", WAIT_PER_ROUND_S)
                assert _shown(page) == total >= 5
                assert page.evaluate("!!document.getElementById('report')")
                assert page.evaluate("document.querySelectorAll('canvas').length") >= 1
                assert page.console_errors() == []
                # offline: every script, style and chart library from the server itself
                requested = page.requested_urls()
                assert any(u.endswith("/assets/uPlot.iife.min.js") for u in requested)
                assert all(u.startswith(url) or u.startswith("data:") for u in requested)
            with urllib.request.urlopen(f"{url}runs/{run_id}/report", timeout=60) as report:
                assert run_id in report.read().decode()
    print(f"live delays (s, from when the test saw each round stored): "
          f"{[round(d, 2) for d in delays]}")
    assert status == "complete" and len(delays) >= 1


@pytest.mark.fio
def test_a_dashboard_started_before_any_store_shows_the_first_run(tmp_path: Path) -> None:
    """A lab starts its dashboard first, as a service: the store (not even its directory)
    does not exist yet. The runs page shows an empty list, the server makes nothing, and
    the run made afterwards (real fio, the short run above) appears on the open page."""
    require_chromium()
    store = tmp_path / "lab" / "results.sqlite"
    with _process(_ssdlab("serve", "--port", "0", "--store", str(store))) as server:
        assert server.stdout is not None
        url = server.stdout.readline().split(" at ", 1)[1].split(" ", 1)[0]
        assert server.stdout.readline().startswith(f"no results store at {store} yet")
        with Browser() as browser, browser.open_url(url) as page:
            _until("the empty list", lambda: page.evaluate(
                "document.body.dataset.runs") == "0", WAIT_PER_ROUND_S)
            assert page.evaluate("document.getElementById('count').textContent") == \
                "no runs yet in this store"
            assert not store.parent.exists()  # the server made nothing
            run = _ssdlab("run", "pts", "--target", str(tmp_path / "t.img"), *RUN,
                          "--store", str(store))
            with _process(run):
                _until("the store made", store.exists, 60)
                made = time.monotonic()
                _until("the run on the open runs page", lambda: page.evaluate(
                    "document.body.dataset.runs") == "1", 60 + WAIT_PER_ROUND_S)
                shown_s = time.monotonic() - made
                out, err = run.communicate(timeout=120)
                assert run.returncode == 0, err + out[-2000:]
            run_id = _run_id(store)
            _until("the run complete on the page", lambda: page.evaluate(
                "document.querySelector('#runs tbody tr td.st').textContent") == "complete",
                WAIT_PER_ROUND_S)
            assert page.evaluate("document.querySelector('#runs tbody tr a').textContent") \
                == run_id
            assert page.console_errors() == []
    print(f"the run showed on the page {shown_s:.2f} s after the store file appeared")


def _has_run(store: Path) -> bool:
    with Store.open(store) as opened:
        return len(opened.list_runs()) == 1


def _run_id(store: Path) -> str:
    with Store.open(store) as opened:
        return opened.list_runs()[0].run_id


def _at_least(page: Page, rounds: int) -> bool:
    return _shown(page) >= rounds


def _follow(page: Page, store: Path) -> list[float]:
    """Watch the store while the run runs; each time it holds more rounds, wait for the
    page to show them. The observed delays (from when this noticed the round)."""
    _until("the page draws the run", lambda: _shown(page) >= 0, WAIT_PER_ROUND_S)
    delays = []
    while True:
        status, stored = _stored(store)
        if stored > _shown(page):
            seen = time.monotonic()
            _until(f"the page shows round {stored}", functools.partial(_at_least, page, stored),
                   WAIT_PER_ROUND_S)
            delays.append(time.monotonic() - seen)
        if status != "running":
            return delays
        time.sleep(0.1)


def test_the_runs_page_filters(tmp_path: Path) -> None:
    """No fio: 24 stored runs; the filters narrow the table, the address keeps them, and
    a run's row opens its page."""
    from ssdlab.serve.app import running

    require_chromium()
    store = tmp_path / "results.sqlite"
    servestore.many_runs(store, 24)
    with running(store) as url, Browser() as browser:
        with browser.open_url(url) as page:
            _until("the table", lambda: page.evaluate("document.body.dataset.runs") == "24",
                   WAIT_PER_ROUND_S)
            page.evaluate("""(() => { const s = document.querySelector('select[name=suite]');
                s.value = 'pts'; s.dispatchEvent(new Event('change', {bubbles: true})); })()""")
            _until("the filtered table", lambda: page.evaluate(
                "document.body.dataset.runs") == "6", WAIT_PER_ROUND_S)
            assert page.evaluate("location.search") == "?suite=pts"
            suites = page.evaluate("[...document.querySelectorAll('#runs tbody tr')]"
                                   ".map(r => r.cells[1].textContent)")
            assert suites == ["pts"] * 6
            assert page.console_errors() == []
        with browser.open_url(url + "?suite=pts&status=failed") as page:
            _until("the table", lambda: page.evaluate("document.body.dataset.runs") == "0",
                   WAIT_PER_ROUND_S)
            assert page.evaluate("document.querySelector('select[name=status]').value") \
                == "failed"
            assert page.console_errors() == []


def test_a_browser_opened_with_the_token_follows_a_run_live(tmp_path: Path) -> None:
    """No fio: a gated dashboard opened once with ``?token=``; the page, its scripts and
    its live stream then work through the cookie, and a new round shows."""
    from ssdlab.serve.app import running

    require_chromium()
    store = tmp_path / "results.sqlite"
    with Store.open(store) as opened:
        run_id = servestore.new_running_run(opened)
        servestore.add_round(opened, run_id, 1)
    token = "a-token-for-the-browser-test"
    with running(store, token) as url, Browser() as browser, \
            browser.open_url(f"{url}runs/{run_id}?token={token}") as page:
        _until("the run drawn", lambda: _shown(page) == 1, WAIT_PER_ROUND_S)
        assert page.evaluate("location.search") == ""
        with Store.open(store) as opened:
            servestore.add_round(opened, run_id, 2)
        _until("the new round", lambda: _shown(page) == 2, WAIT_PER_ROUND_S)
        assert page.evaluate("document.getElementById('live').textContent") == "live"
        assert page.console_errors() == []
