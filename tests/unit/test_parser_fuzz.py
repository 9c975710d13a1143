"""Fuzzing ssdlab.engine.parser: whatever fio's stdout holds, the parser returns a
FioOutput or raises FioOutputError with a one-line message, and nothing else."""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ssdlab.engine.model import DirectionStats, FioOutput
from ssdlab.engine.parser import FioOutputError, merged_percentile_ns, parse_fio_output

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"
TEXTS = {p.name: p.read_text() for p in sorted(FIXTURES.glob("*.json"))}
SMALL = [name for name, text in TEXTS.items() if len(text) < 10_000]

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=15,
)

TOKENS = [
    "{", "}", "[", "]", ":", ",", '"', " ", "\n", "0", "7", "-1", "1e999", ".5", "NaN",
    "null", "true", '"fio version"', '"jobs"', '"client_stats"', '"read"', '"x"',
    "fio: io_u error\n", "note: both iodepth >= 1\n",
]  # fmt: skip
jsonish_text = st.lists(st.sampled_from(TOKENS), max_size=80).map("".join)
stray_text = st.text(max_size=60) | jsonish_text


def check(text: str) -> FioOutput | None:
    """The only allowed outcomes: a well-typed FioOutput, or FioOutputError (one line)."""
    try:
        out = parse_fio_output(text)
    except FioOutputError as exc:
        event("FioOutputError")
        assert exc.message.strip()
        assert len(exc.message.splitlines()) == 1, exc.message
        return None
    assert isinstance(out, FioOutput)
    event("FioOutput")
    assert isinstance(out.fio_version, str) and isinstance(out.stray_text, str)
    assert out.documents and all(isinstance(d, dict) for d in out.documents)
    for job in out.jobs:
        assert isinstance(job.name, str) and isinstance(job.error, int)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in job.options.items())
        for number in (job.usr_cpu_pct, job.sys_cpu_pct):
            assert math.isfinite(number)
        check_direction(job.read)
        check_direction(job.write)
    return out


def check_direction(stats: DirectionStats) -> None:
    for value in vars(stats).values():
        if isinstance(value, float):
            assert math.isfinite(value)
    for pct, ns in stats.clat_percentiles_ns.items():
        assert 0.0 <= pct <= 100.0 and math.isfinite(ns)
    for bucket, count in stats.clat_bins_ns.items():
        assert isinstance(bucket, int) and isinstance(count, int) and count >= 0


# --------------------------------------------------------------------------- arbitrary input


@FUZZ
@given(st.text(max_size=500))
def test_arbitrary_text(text: str) -> None:
    check(text)


@FUZZ
@given(jsonish_text)
def test_jsonish_text(text: str) -> None:
    check(text)


@FUZZ
@given(json_values, stray_text, stray_text)
def test_arbitrary_json_value(value: Any, before: str, after: str) -> None:
    check(before + json.dumps(value) + after)


@FUZZ
@given(json_values, st.sampled_from(["jobs", "client_stats"]), st.booleans())
def test_arbitrary_jobs(value: Any, key: str, as_list: bool) -> None:
    document = {"fio version": "fio-3.33", key: [value] if as_list else value}
    check(json.dumps(document))


# --------------------------------------------------------------------------- mutated fixtures


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document (the root excluded)."""
    children: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        children = list(node.items())
    elif isinstance(node, list):
        children = list(enumerate(node))
    found: list[tuple[Any, ...]] = []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


DOCUMENTS = {name: json.loads(TEXTS[name][TEXTS[name].index("{") :]) for name in SMALL}
DOCUMENTS["c_randrw70_8k_qd1_jsonplus.json"] = json.loads(TEXTS["c_randrw70_8k_qd1_jsonplus.json"])
PATHS = {name: paths(document) for name, document in DOCUMENTS.items()}


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(DOCUMENTS)))
    document = copy.deepcopy(DOCUMENTS[name])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(PATHS[name]))
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(json_values)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(max_size=12))] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return json.dumps(document, indent=2)


@FUZZ
@given(mutated_documents(), stray_text, stray_text)
def test_mutated_fixture_documents(text: str, before: str, after: str) -> None:
    check(before + text + after)


@FUZZ
@given(st.sampled_from(sorted(TEXTS)), st.data())
def test_truncated_fixtures(name: str, data: st.DataObject) -> None:
    text = TEXTS[name]
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    end = data.draw(st.integers(min_value=start, max_value=len(text)))
    check(text[start:end])


@FUZZ
@given(
    st.sampled_from(SMALL),
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 2), st.sampled_from([*TOKENS, "x", "é"])),
        min_size=1,
        max_size=8,
    ),
)
def test_character_edits_of_fixtures(name: str, edits: list[tuple[float, int, str]]) -> None:
    text = TEXTS[name]
    for where, remove, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + remove :]
    check(text)


@FUZZ
@given(st.lists(st.sampled_from(sorted(TEXTS)), min_size=1, max_size=4), st.lists(stray_text))
def test_fixture_concatenations_keep_every_job(names: list[str], strays: list[str]) -> None:
    text = "".join(
        TEXTS[name] + (strays[i] if i < len(strays) else "") for i, name in enumerate(names)
    )
    out = check(text)
    if out is not None:  # stray text may legitimately break a document (e.g. '"' between)
        assert len(out.documents) >= 1


@FUZZ
@given(
    st.lists(st.sampled_from(sorted(TEXTS)), min_size=1, max_size=4),
    st.text("\n fio:-", max_size=30),
)
def test_fixture_concatenations_with_plain_stray_text(names: list[str], stray: str) -> None:
    out = check(stray.join(TEXTS[name] for name in names))
    assert out is not None
    expected = sum(len(parse_fio_output(TEXTS[name]).jobs) for name in names)
    assert len(out.jobs) == expected


# --------------------------------------------------------------------------- merged_percentile_ns

histograms = st.lists(
    st.dictionaries(st.integers(0, 10**9), st.integers(0, 50), max_size=12), max_size=4
)


def exact_percentile(bins: list[dict[int, int]], pct: float) -> float | None:
    samples = sorted(v for h in bins for v, c in h.items() for _ in range(c))
    if not samples:
        return None
    rank = max(1, math.ceil(Fraction(pct) / 100 * len(samples)))
    return float(samples[rank - 1])


@FUZZ
@given(histograms, st.floats(0.0, 100.0))
def test_merged_percentile_matches_exact_rank(bins: list[dict[int, int]], pct: float) -> None:
    assert merged_percentile_ns(bins, pct) == exact_percentile(bins, pct)


@FUZZ
@given(histograms, st.sampled_from([0.0, 12.5, 25.0, 50.0, 62.5, 75.0, 87.5, 100.0]))
def test_merged_percentile_matches_numpy(bins: list[dict[int, int]], pct: float) -> None:
    # pct / 100 is exact in binary for these, so numpy's float arithmetic is exact too
    samples = np.array([v for h in bins for v, c in h.items() for _ in range(c)], dtype=np.int64)
    result = merged_percentile_ns(bins, pct)
    if samples.size == 0:
        assert result is None
    else:
        assert result == float(np.percentile(samples, pct, method="inverted_cdf"))
