"""The example suite of docs/adding-a-suite.md, registered with one line, works everywhere
a suite is reached: run (real fio on a test file), dry run, --print-config, show, export,
report, and its typed result reads back.

The suite's three modules are tests/support/example_suite/{plan,run,pages}.py; the test
adds the one registry line the document shows (tests/support/example_suite's ``LINE``),
here, instead of in src/ssdlab/suites.py. tests/unit/test_example_suite.py checks it without
fio, and that the document shows the line and the modules as they are.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ssdlab import suites
from ssdlab.cli.main import main
from tests.support import example_suite
from tests.support.example_suite import plan as example

pytestmark = [pytest.mark.fio]


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suites, "SUITES", example_suite.registered())  # the doc's line


def _ssdlab(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_one_registry_line_makes_a_working_suite(registered: None, shm_dir: Path) -> None:
    target, store = str(shm_dir / "t.img"), str(shm_dir / "s.sqlite")
    common = ("--target", target, "--size", "64MiB", "--store", store)
    code, out, err = _ssdlab("run", "example-read", *common, "--read-size", "16MiB",
                             "--dry-run")
    assert (code, err) == (0, "") and "read 16 MiB sequentially" in out and "[global]" in out
    code, out, err = _ssdlab("run", "example-read", "--target", target, "--qd", "4",
                             "--print-config")
    assert code == 0 and "[example-read]" in out and "qd = 4" in out

    code, out, err = _ssdlab("run", "example-read", *common, "--read-size", "16MiB")
    assert (code, err) == (0, ""), out
    assert "complete; results in" in out

    code, shown, err = _ssdlab("show", "last", "--store", store)
    assert code == 0 and "== Example read [complete]" in shown and "MB/s" in shown
    code, exported, err = _ssdlab("export", "last", "--store", store)
    (test,) = json.loads(exported)["tests"]
    result = example.ReadResult.from_json(test["result"])
    assert result.read_bytes == 16 << 20 and result.bw_bytes_per_s > 0
    assert test["rounds"][0]["cells"][0]["block_bytes"] == example.BLOCK_BYTES
    code, out, err = _ssdlab("report", "last", "--store", store, "-o",
                             str(shm_dir / "report"), "--no-pdf")
    assert code == 0, err
    html = (shm_dir / "report" / "report.html").read_text(encoding="utf-8")
    assert "Example read" in html and "mean latency (us)" in html
