"""A run an integration test made, checked as the golden stores are: every stored
document of it reads as the record its suite declares and writes back byte for byte
(tests/unit/test_store_records_golden.py's check)."""

from __future__ import annotations

from pathlib import Path

from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.suites import find
from tests.unit.test_store_records_golden import check_suite_documents


def check_declared(run: RunData) -> None:
    """Every document of ``run`` is its suite's declared record."""
    suite = find(run.suite)
    assert suite is not None, f"{run.suite} is not registered"
    check_suite_documents(run, suite.spec)


def check_stored(store: Path | str, run_id: str) -> RunData:
    """The run ``run_id`` of ``store``, checked (see :func:`check_declared`)."""
    with Store.open_readonly(store) as opened:
        run = opened.load(run_id)
    check_declared(run)
    return run
