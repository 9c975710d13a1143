"""Records as a run builds them, for the tests that check stored documents."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan.results import FioCell, StoredPlan, TestParams


def fresh(value: Any) -> Any:
    """``value`` as a run builds it: its records made again from their field values, so
    that nothing of a document they were read from is remembered (its keys, their order,
    the keys the record does not know), also in lists, tuples, dicts and flat() groups."""
    if isinstance(value, Record):
        return type(value)(**{f.name: fresh(getattr(value, f.name))
                              for f in dataclasses.fields(value) if f.init})
    if isinstance(value, list | tuple):
        return type(value)(fresh(v) for v in value)
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Doc(Record):
    """A document a test stores as it is: a record of no fields of its own, so that every
    key is kept, in its order (for the tests that care only what the store keeps)."""


def doc(document: JsonObject | None = None) -> Doc:
    """``document`` (none: ``{}``) as a record that writes it back exactly."""
    return Doc.from_json({} if document is None else document, "a test's document")


# -- a suite's records, as the tests of the store's typed API declare them ------------------


@dataclass(frozen=True)
class ExamplePlan(StoredPlan):
    args: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExampleParams(TestParams):
    block_bytes: int = 0


@dataclass(frozen=True)
class ExampleCell(FioCell):
    written_bytes: int = 0
