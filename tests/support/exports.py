"""Every run of a store as its JSON export: what "the same runs" means across stores."""

from __future__ import annotations

import io
from pathlib import Path

from ssdlab.store.db import Store
from ssdlab.store.export import write_export
from ssdlab.suites import result_json


def exports(location: str | Path) -> dict[str, str]:
    """Every run's JSON export (``ssdlab export RUN``, with its raw fio output), by run id."""
    out = {}
    with Store.open(location) as store:
        for summary in store.list_runs():
            buf = io.StringIO()
            write_export(store.load(summary.run_id, with_raw=True), "json", buf, result_json)
            out[summary.run_id] = buf.getvalue()
    return out
