"""The results store: every run, test, round, step and fio invocation, in one SQLite file
(the embedded default) or a PostgreSQL database a lab shares (:mod:`.location`,
:mod:`.backend`).

:class:`~ssdlab.store.db.Store` writes each round in its own durable transaction as it
finishes (WAL journal, ``synchronous=FULL``), so a run killed at any point keeps every
round committed before the kill. The schema is versioned with ``PRAGMA user_version``
and migrated forward on open (:mod:`ssdlab.store.schema`); a store written by a newer
ssdlab is refused. :mod:`ssdlab.store.export` turns a loaded run into JSON or CSV.
The store keeps the documents handed to it (:class:`ssdlab.jsonrecord.Record` s, written
as their JSON, or JSON objects) and gives them back as stored, with typed views
(:mod:`.records`); it never imports fio, engine, plan or report code. The formats are
documented in docs/results-format.md.
"""

from ssdlab.store.db import DEFAULT_STORE_ENV, Store, default_store_path
from ssdlab.store.location import StoreLocation, default_store_location
from ssdlab.store.records import (
    EventData,
    FioRecord,
    RoundData,
    RunData,
    RunSummary,
    StepData,
    TestData,
)

__all__ = [
    "DEFAULT_STORE_ENV",
    "EventData",
    "FioRecord",
    "RoundData",
    "RunData",
    "RunSummary",
    "StepData",
    "Store",
    "StoreLocation",
    "TestData",
    "default_store_location",
    "default_store_path",
]
