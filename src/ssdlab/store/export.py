"""Export a stored run as JSON (one document) or CSV (long form). See docs/results-format.md."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.store.records import EventData, FioData, RoundData, RunData, StepData, TestData

EXPORT_SCHEMA_VERSION = 1
EXPORT_FORMATS = ("json", "csv")

#: Keys that identify a cell; every other numeric key of a cell dict is a metric.
CELL_KEYS = ("cell", "block_bytes", "read_pct", "pattern")
CSV_COLUMNS = ("run_id", "test", "scope", "round", *CELL_KEYS, "metric", "value")
#: the kind of the events holding a test's self-consistency checks (plan/consistency.py's
#: EVENT_KIND; the store imports nothing of the plan)
CHECKS_KIND = "consistency"


def iso_utc(unix_s: float | None) -> str | None:
    """``2024-05-01T12:00:00.000Z`` (ISO 8601, UTC, milliseconds); None stays None."""
    if unix_s is None:
        return None
    stamp = datetime.fromtimestamp(unix_s, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def finite(value: Any) -> Any:
    """A copy of ``value`` with NaN/inf replaced by None and tuples made lists (JSON for
    browsers and other strict readers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _event(event: EventData) -> JsonObject:
    return {
        "time": iso_utc(event.created_at),
        "test": event.test,
        "kind": event.kind,
        "message": event.message,
        "detail": event.detail,
    }


def _fio(fio: FioData | None) -> JsonObject | None:
    if fio is None:
        return None
    return {
        "phase": fio.phase,
        "command": list(fio.command),
        "returncode": fio.returncode,
        "started_at": iso_utc(fio.started_at),
        "ended_at": iso_utc(fio.ended_at),
        "duration_s": fio.ended_at - fio.started_at,
        "job_file": fio.job_text,
        "stderr": fio.stderr,
        "stdout_bytes": fio.stdout_bytes,
    }


def _step(step: StepData) -> JsonObject:
    return {
        "kind": step.kind,
        "time": iso_utc(step.created_at),
        "detail": step.detail,
        "fio": _fio(step.fio),
    }


def _round(rnd: RoundData) -> JsonObject:
    return {
        "round": rnd.round_no,
        "status": rnd.status,
        "tracking": dict(rnd.tracking.items()),
        "cells": list(rnd.cells),
        "started_at": iso_utc(rnd.started_at),
        "ended_at": iso_utc(rnd.ended_at),
        "duration_s": rnd.ended_at - rnd.started_at,
        "job_file": rnd.job_text,
        "fio_command": list(rnd.command),
        "fio_returncode": rnd.fio_returncode,
        "fio_stderr": rnd.stderr,
    }


#: a test's result as exported: (run, test) -> the JSON object (its typed record's)
ResultJson = Callable[[RunData, TestData], JsonObject]


def stored_result(run: RunData, test: TestData) -> JsonObject:
    return test.result


def test_checks(run: RunData, test: TestData) -> JsonObject | None:
    """The test's stored self-consistency checks (None: a run stored before them)."""
    found = [e.detail for e in run.events if e.kind == CHECKS_KIND and e.test == test.name
             and isinstance(e.detail, dict)]
    return found[-1] if found else None


def _test(run: RunData, test: TestData, result: ResultJson) -> JsonObject:
    doc = {
        "name": test.name,
        "status": test.status,
        "params": test.params,
        "verdict": test.verdicts.get("primary"),
        "verdicts": test.verdicts,
        "result": result(run, test),
    }
    checks = test_checks(run, test)
    if checks is not None:  # docs/consistency.md; runs stored before them have none
        doc["checks"] = checks
    return {**doc, "rounds": [_round(r) for r in test.rounds],
            "steps": [_step(s) for s in test.steps]}


def _run_header(run: RunData) -> JsonObject:
    return {
        "id": run.run_id,
        "created_at": iso_utc(run.created_at),
        "finished_at": iso_utc(run.finished_at),
        "status": run.status,
        "message": run.message,
        "suite": run.suite,
        "profile": run.profile,
        "quick": run.quick,
        "argv": list(run.argv),
        "read_only": run.read_only,
        "target_path": run.target_path,
        "target_model": run.target_model,
    }


def run_to_json(run: RunData, result_of: ResultJson = stored_result) -> dict[str, Any]:
    """The export document of ``run`` (JSON-able, no NaN/inf: those become None); each
    test's result as ``result_of`` gives it (the suites' typed records: ssdlab.suites).
    (Its readers index it as they index the stored documents: store/records.py JSONDict.)
    """
    doc = {
        "schema_version": EXPORT_SCHEMA_VERSION,
        "kind": "ssdlab-run",
        "run": _run_header(run),
        "versions": run.versions,
        "target": run.target,
        "host": run.host,
        "plan": run.plan,
        "events": [_event(e) for e in run.events],
        "tests": [_test(run, t, result_of) for t in run.tests],
    }
    return dict(finite(doc))


def _is_metric(key: str, value: object) -> bool:
    return key not in CELL_KEYS and isinstance(value, int | float) and not isinstance(value, bool)


def _cell_rows(base: dict[str, object], cells: object) -> Iterator[dict[str, object]]:
    if not isinstance(cells, list):
        return
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        ident = {k: ("" if cell.get(k) is None else cell[k]) for k in CELL_KEYS}
        for key, value in cell.items():
            if _is_metric(key, value):
                yield {**base, **ident, "metric": key, "value": finite(value)}


def run_to_csv_rows(run: RunData, result: ResultJson = stored_result
                    ) -> list[dict[str, object]]:
    """Long form: one row per (test, scope, round, cell, metric); NaN/inf values are None."""
    rows: list[dict[str, object]] = []
    for test in run.tests:
        base: dict[str, object] = {"run_id": run.run_id, "test": test.name}
        for rnd in test.rounds:
            scope = {**base, "scope": "round", "round": rnd.round_no}
            rows.extend(_cell_rows(scope, rnd.cells))
        stored = result(run, test)
        scope = {**base, "scope": "result", "round": ""}
        rows.extend(_cell_rows(scope, stored.get("cells")))
        rows.extend(_prediction_rows(base, stored.get("prediction")))
        rows.extend(_check_rows(base, test_checks(run, test)))
    return rows


def _check_rows(base: dict[str, object], checks: Mapping[str, Any] | None
                ) -> Iterator[dict[str, object]]:
    """A test's checks (docs/consistency.md): scope "checks"; each cell's Little's law
    verdict (metric ``littles_law``, value its status), then the test's cache-bound
    verdict in words (metric ``cache_bound``, no cell)."""
    if checks is None:
        return
    scope = {**base, "scope": "checks", "round": "", **dict.fromkeys(CELL_KEYS, "")}
    for cell in checks.get("cells") or []:
        if isinstance(cell, Mapping):
            yield {**scope, "cell": cell.get("cell", ""), "metric": "littles_law",
                   "value": cell.get("status")}
    cache = checks.get("cache")
    if isinstance(cache, Mapping):
        yield {**scope, "metric": "cache_bound", "value": cache.get("message")}


#: a prediction's figures in the CSV export: its key -> the row's metric
PREDICTION_METRICS = {"value": "predicted_window_average", "half_width": "half_width_95",
                      "plateau": "plateau"}


def _prediction_rows(base: dict[str, object], prediction: object
                     ) -> Iterator[dict[str, object]]:
    """``--predict``'s figures (docs/pts.md): scope is the prediction's label, "predicted
    steady state (not a SNIA steady state)", the cell the tracking variable."""
    if not isinstance(prediction, Mapping) or not isinstance(prediction.get("variables"), list):
        return
    scope = {**base, "scope": str(prediction.get("label", "prediction")), "round": "",
             **dict.fromkeys(CELL_KEYS, "")}
    for variable in prediction["variables"]:
        if not isinstance(variable, Mapping):
            continue
        for key, metric in PREDICTION_METRICS.items():
            value = variable.get(key)
            if _is_metric(key, value):
                yield {**scope, "cell": variable.get("variable", ""), "metric": metric,
                       "value": finite(value)}


def write_export(run: RunData, fmt: str, out: TextIO, result: ResultJson = stored_result
                 ) -> None:
    """Write ``run`` to ``out`` as "json" or "csv"; UserError for another format."""
    if fmt == "json":
        json.dump(run_to_json(run, result), out, indent=2, sort_keys=False, allow_nan=False)
        out.write("\n")
    elif fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(run_to_csv_rows(run, result))
    else:
        choices = " or ".join(EXPORT_FORMATS)
        raise UserError(f"unknown export format {fmt!r} (choose {choices})")
