"""Typed records of stored JSON: exact in both directions, strict about types."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from ssdlab.jsonrecord import Record, StoredDataError, key


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
