"""A run an integration test made, checked as the golden stores are: every stored
document of it reads as the record its suite declares and writes back byte for byte
(tests/unit/test_store_records_golden.py's check)."""

from __future__ import annotations

import sqlite3
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


def ok_rounds(store: Path) -> list[int]:
    """The numbers of the completed rounds in ``store`` while a run writes it ([] before
    the store or its tables exist)."""
    if not store.exists():
        return []
    with sqlite3.connect(store) as db:
        try:
            rows = db.execute("SELECT round_no FROM rounds WHERE status = 'ok' "
                              "ORDER BY round_no").fetchall()
        except sqlite3.Error:
            return []
    return [int(r[0]) for r in rows]
