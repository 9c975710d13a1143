"""Typed records of stored JSON: exact in both directions, strict about types."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import pytest

from ssdlab.jsonrecord import JsonObject, JsonValue, Record, StoredDataError, flat, key


@dataclass(frozen=True)
class Cliff(Record):
    at_bytes: float
    ratio: float = 1.0


@dataclass(frozen=True)
class Pass(Record):
    pass_no: int = key("pass")
    cliffs: list[Cliff] = field(default_factory=list)
    message: str | None = None


@dataclass(frozen=True)
class Result(Record):
    OMIT_NONE = frozenset({"error"})

    passes: list[Pass] = field(default_factory=list)
    truth: dict[str, float | None] = field(default_factory=dict)
    extra: Any = None
    error: str | None = None


def _text(value: object) -> str:
    return json.dumps(value)


def test_a_built_record_writes_its_fields_in_order_and_omits_unset_optional_keys() -> None:
    result = Result([Pass(1, [Cliff(3, 0.5)])], {"a": None})
    assert _text(result.to_json()) == _text({
        "passes": [{"pass": 1, "cliffs": [{"at_bytes": 3, "ratio": 0.5}], "message": None}],
        "truth": {"a": None}, "extra": None})
    assert "error" in replace(result, error="boom").to_json()


def test_a_read_record_writes_back_exactly_the_document_it_was_read_from() -> None:
    stored = {"error": "x", "future": [1, 2], "passes": [{"cliffs": [], "pass": 2}]}
    record = Result.from_json(stored)
    assert record.error == "x" and record.passes[0].pass_no == 2
    assert _text(record.to_json()) == _text(stored)  # order, unknown keys, absent keys kept
    assert Result.from_json({}).to_json() == {}
    # a copy the program changes is written as built (every field)
    assert list(replace(record, error=None).to_json()) == ["passes", "truth", "extra"]


def test_a_partial_record_writes_only_what_it_was_given() -> None:
    failed = Result.partial(error="fio failed")
    assert failed.to_json() == {"error": "fio failed"} and failed.passes == []
    assert Result.partial().to_json() == {}  # a running test


def test_numbers_stay_as_stored() -> None:
    record = Cliff.from_json({"at_bytes": 3, "ratio": 0.25})
    assert record.to_json() == {"at_bytes": 3, "ratio": 0.25}
    assert isinstance(record.at_bytes, int)


@pytest.mark.parametrize(("document", "message"), [
    ([], "Result: expected a JSON object, got an array"),
    ({"passes": {}}, "Result.passes: expected an array, got an object"),
    ({"passes": [{"pass": "1"}]}, "Result.passes[0].pass: expected a whole number, got text"),
    ({"passes": [{"pass": True}]}, "expected a whole number, got true/false"),
    ({"passes": [{"pass": 1, "cliffs": [{"ratio": 1}]}]}, "cliffs[0]: missing at_bytes"),
    ({"truth": {"a": "x"}}, "Result.truth.a: expected a number, got text"),
    ({"error": 3}, "Result.error: expected text, got a whole number"),
])
def test_a_document_of_the_wrong_shape_is_refused(document: object, message: str) -> None:
    with pytest.raises(StoredDataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Result.from_json(document)


# -- tuples, enums, JSON kept verbatim --------------------------------------------------


class Mode(StrEnum):
    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class Shapes(Record):
    names: tuple[str, ...] = ()
    window: tuple[int, int] | None = None
    mode: Mode = Mode.READ
    doc: JsonObject = field(default_factory=dict)
    anything: JsonValue = None


def test_tuples_and_enums_are_stored_as_arrays_and_values() -> None:
    built = Shapes(("a", "b"), (1, 5), Mode.WRITE, {"x": [1, {"y": None}]}, [1.5, "z"])
    stored = {"names": ["a", "b"], "window": [1, 5], "mode": "write",
              "doc": {"x": [1, {"y": None}]}, "anything": [1.5, "z"]}
    assert _text(built.to_json()) == _text(stored)
    read = Shapes.from_json(stored)
    assert read == built and read.mode is Mode.WRITE and read.names == ("a", "b")
    assert json.dumps(Shapes.from_json(stored).to_json()) == json.dumps(stored)


def test_a_json_field_keeps_its_document_as_it_is() -> None:
    doc = {"b": 1, "a": {"nan": math.nan, "list": [True, None, "x"]}}
    read = Shapes.from_json({"doc": doc})
    assert list(read.doc) == ["b", "a"] and _text(read.doc) == _text(doc)
    assert _text(read.to_json()) == _text({"doc": doc})


@pytest.mark.parametrize(("document", "message"), [
    ({"names": "ab"}, "Shapes.names: expected an array, got text"),
    ({"names": [1]}, r"Shapes.names\[0\]: expected text, got a whole number"),
    ({"window": [1]}, "Shapes.window: expected 2 values, got 1"),
    ({"window": [1, "5"]}, "Shapes.window"),
    ({"mode": "trim"}, "Shapes.mode: 'trim' is not one of 'read', 'write'"),
    ({"mode": 1}, "Shapes.mode: 1 is not one of"),
    ({"doc": []}, "Shapes.doc: expected an object, got an array"),
    ({"doc": {"x": {1, 2}}}, "Shapes.doc.x: not a JSON value"),
    ({"anything": {"k": (1, 2)}}, "Shapes.anything: not a JSON value"),
])
def test_a_tuple_enum_or_json_field_of_the_wrong_shape_is_refused(
        document: object, message: str) -> None:
    with pytest.raises(StoredDataError, match=message):
        Shapes.from_json(document)


# -- flat() field groups -----------------------------------------------------------------


@dataclass(frozen=True)
class Metrics(Record):
    OMIT_NONE = frozenset({"p99"})

    iops: float = 0.0
    p99: float | None = None


@dataclass(frozen=True)
class Little(Record):
    in_flight: float | None = None
    basis: str = "completion"


@dataclass(frozen=True)
class Cell(Record):
    cell: str
    metrics: Metrics = flat(default_factory=Metrics)
    little: Little | None = flat(default=None)
    note: str = ""


@dataclass(frozen=True)
class WaitCell(Cell):
    wait_s: float = 0.0


def test_a_flat_group_is_written_inline_at_its_place() -> None:
    cell = Cell("c1", Metrics(100.0, 2.5), Little(3.0), "n")
    assert list(cell.to_json()) == ["cell", "iops", "p99", "in_flight", "basis", "note"]
    assert cell.to_json()["iops"] == 100.0
    # an optional group that is None, and a group's own OMIT_NONE
    assert list(Cell("c2", Metrics(1.0)).to_json()) == ["cell", "iops", "note"]
    assert list(WaitCell("c3", wait_s=1.0).to_json()) == ["cell", "iops", "note", "wait_s"]


def test_a_flat_group_reads_back_from_the_inline_keys() -> None:
    stored = {"cell": "c1", "iops": 100, "p99": 2.5, "in_flight": 3.0, "basis": "total",
              "note": "n"}
    read = Cell.from_json(stored)
    assert read == Cell("c1", Metrics(100, 2.5), Little(3.0, "total"), "n")
    assert isinstance(read.metrics.iops, int)  # as stored
    assert _text(read.to_json()) == _text(stored)


def test_a_flat_groups_keys_keep_the_documents_order_and_unknown_keys() -> None:
    stored = {"note": "n", "future": [1], "in_flight": None, "cell": "c1", "basis": "total",
              "iops": 5.0}
    read = Cell.from_json(stored)
    assert read.little == Little(None, "total") and read.metrics == Metrics(5.0)
    assert _text(read.to_json()) == _text(stored)


def test_an_older_document_without_a_groups_keys_reads_and_writes_back_exactly() -> None:
    old = {"cell": "c1", "iops": 7.0, "note": ""}  # before the Little keys existed
    read = Cell.from_json(old)
    assert read.little is None
    assert _text(read.to_json()) == _text(old)
    assert _text(Cell(read.cell, read.metrics, read.little, read.note).to_json()) == \
        _text(old)  # as a run builds it: the same document
    assert Cell.from_json({"cell": "c"}).metrics == Metrics()  # a group at its default


def test_a_partial_record_writes_a_given_groups_keys_only() -> None:
    assert Cell.partial(cell="c", metrics=Metrics(2.0)).to_json() == {"cell": "c",
                                                                      "iops": 2.0}
    assert Cell.partial(cell="c", little=None).to_json() == {"cell": "c"}


def test_a_group_whose_keys_are_wrong_is_refused_where_they_are() -> None:
    with pytest.raises(StoredDataError, match=r"Cell\.iops: expected a number, got text"):
        Cell.from_json({"cell": "c", "iops": "fast"})
    with pytest.raises(StoredDataError, match="Cell: missing cell"):
        Cell.from_json({"iops": 1.0})


def test_a_flat_field_must_be_a_record_whose_keys_are_its_own() -> None:
    @dataclass(frozen=True)
    class Twice(Record):
        iops: float = 0.0
        metrics: Metrics = flat(default_factory=Metrics)

    @dataclass(frozen=True)
    class NotARecord(Record):
        values: list[int] = flat(default_factory=list)

    with pytest.raises(TypeError, match="Twice: two fields are stored under 'iops'"):
        Twice().to_json()
    with pytest.raises(TypeError, match="must be a Record"):
        NotARecord.from_json({})
