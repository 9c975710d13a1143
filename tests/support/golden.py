"""The golden stores (tests/fixtures/store/record.sh): a run of every suite, recorded by
real fio before the stored documents were typed."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.store.records import RunData

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "store"
#: every suite recorded by record.sh; the RAID matrix (btrfs on emulated SSDs, recorded
#: later: record.sh's note) with its levels' own runs; the database suite (by hand too:
#: record.sh's note), the peak finder (the same)
STORES = ("suites.sqlite", "matrix.sqlite", "db.sqlite", "peak.sqlite")
#: the example suite of docs/adding-a-suite.md (tests/support/example_suite), recorded with
#: it registered by the document's line (record.sh's last step); not in the registry, so
#: not in :data:`STORES`: the tests that read it register it
EXAMPLE_STORE = "example.sqlite"


def load_golden_runs(tmp_path_factory: pytest.TempPathFactory,
                     stores: Sequence[str] = STORES) -> list[RunData]:
    """Every run of the golden ``stores``, read from copies (opening a store of version 1
    migrates it)."""
    runs = []
    for name in stores:
        store_path = tmp_path_factory.mktemp("golden") / name
        shutil.copy(FIXTURES / name, store_path)
        with Store.open(store_path) as store:
            runs += [store.load(summary.run_id) for summary in store.list_runs()]
    return runs
