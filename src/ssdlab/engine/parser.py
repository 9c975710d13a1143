"""Parse fio's ``--output-format=json`` / ``json+`` stdout into :mod:`ssdlab.engine.model`.

fio's stdout is not always one clean JSON document: fio prints notes and warnings on
stdout (``note: both iodepth >= 1 and synchronous I/O engine are selected ...``), in
client mode it prints per-host progress lines before the JSON, and callers may append
the stdout of several runs. :func:`parse_fio_output` therefore scans the text for every
top-level JSON object that looks like fio output, and keeps everything else as
``stray_text``. Anything it cannot make sense of raises :class:`FioOutputError`.

Units: fio 3.x reports latencies in ns (``clat_ns``, ``lat_ns``) and bandwidth in
bytes/s (``bw_bytes``). Older output (fio 2.x) has ``clat``/``lat`` in usec and only
``bw`` in KiB/s; those are converted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ssdlab.engine.model import DirectionStats, FioOutput, JobResult
from ssdlab.errors import ExitCode, UserError
from ssdlab.jsonrecord import JsonObject

__all__ = ["FioOutputError", "bin_error_ns", "merged_percentile_ns", "parse_fio_output"]

_QUOTE_CHARS = 200
_AGGREGATE_CLIENT = "All clients"
#: where a JSON object can start (a "{" then a key or "}"): other "{" are not tried, since
#: every failed attempt costs O(offset) in json's error reporting
_OBJECT_START = re.compile(r'\{\s*["}]')
_DOCUMENT_START = re.compile(r'\{\s*"fio version"')


class FioOutputError(UserError):
    """fio's output is missing, truncated or not what fio prints."""

    exit_code = ExitCode.FAILURE


# --------------------------------------------------------------------------- scanning


def parse_fio_output(stdout: str) -> FioOutput:
    """Parse fio's stdout (json or json+, one or more documents, stray text allowed)."""
    documents, stray = _split_documents(stdout)
    jobs: list[JobResult] = []
    for index, document in enumerate(documents):
        try:
            jobs.extend(_parse_document(document))
        except FioOutputError as exc:
            if len(documents) == 1:
                raise
            where = f"fio JSON document {index + 1} of {len(documents)}"
            raise FioOutputError(f"{where}: {exc.message}") from None
    return FioOutput(
        fio_version=_fio_version(documents),
        jobs=tuple(jobs),
        documents=tuple(documents),
        stray_text=stray,
    )


def _split_documents(text: str) -> tuple[list[JsonObject], str]:
    """Every fio-looking top-level JSON object in ``text``, and the text around them."""
    decoder = json.JSONDecoder()
    documents: list[JsonObject] = []
    stray: list[str] = []
    first_error: str | None = None
    copied = pos = 0
    while (match := _OBJECT_START.search(text, pos)) is not None:
        start = match.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError as exc:
            if first_error is None and _DOCUMENT_START.match(text, start):
                first_error = _describe_decode_error(exc)
            pos = start + 1
            continue
        except RecursionError:
            # fio nests 4 levels deep; failing fast keeps this scan linear
            raise FioOutputError(
                f"fio's output has JSON nested too deeply to be fio's (at offset {start})"
            ) from None
        if _looks_like_fio(value):
            stray.append(text[copied:start])
            documents.append(value)
            copied = end
        pos = end
    stray.append(text[copied:])
    stray_text = "".join(stray)
    _check_found(documents, stray_text, first_error)
    return documents, stray_text


def _looks_like_fio(value: object) -> bool:
    return isinstance(value, dict) and (
        "fio version" in value
        or isinstance(value.get("jobs"), list)
        or isinstance(value.get("client_stats"), list)
    )


def _describe_decode_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _check_found(documents: list[JsonObject], stray: str, error: str | None) -> None:
    if '"fio version"' in stray:
        raise FioOutputError(
            f"fio's JSON output is truncated or malformed ({_one_line(error or 'unparsable')})"
        )
    if documents:
        return
    if not stray.strip():
        raise FioOutputError("fio printed no JSON output (its stdout was empty)")
    raise FioOutputError(f"fio printed no JSON output; its stdout began: {_quote(stray)}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _quote(text: str) -> str:
    line = _one_line(text)
    if len(line) > _QUOTE_CHARS:
        line = line[:_QUOTE_CHARS] + "..."
    return repr(line)


def _fio_version(documents: Sequence[Mapping[str, Any]]) -> str:
    for index, document in enumerate(documents):
        version = document.get("fio version", "")
        if not isinstance(version, str):
            raise FioOutputError(f"fio JSON key 'fio version' of document {index + 1} is not text")
        if version:
            return version
    return ""


# --------------------------------------------------------------------------- documents


def _parse_document(document: Mapping[str, Any]) -> list[JobResult]:
    if "jobs" not in document and "client_stats" not in document:
        raise FioOutputError("fio JSON output has neither 'jobs' nor 'client_stats'")
    global_options = _options(document, "global options", "")
    results: list[JobResult] = []
    for key in ("jobs", "client_stats"):
        entries = document.get(key, [])
        if not isinstance(entries, list):
            raise _type_error(key, "a list", entries)
        for index, entry in enumerate(entries):
            path = f"{key}[{index}]"
            if not isinstance(entry, dict):
                raise _type_error(path, "an object", entry)
            if key == "client_stats" and entry.get("jobname") == _AGGREGATE_CLIENT:
                continue
            results.append(_parse_job(entry, path, global_options))
    return results


def _parse_job(job: Mapping[str, Any], path: str, global_options: dict[str, str]) -> JobResult:
    if "mixed" in job and "read" not in job:
        raise FioOutputError(
            f"fio JSON {path} has only 'mixed' stats (unified_rw_reporting=mixed), "
            "but ssdlab needs 'read' and 'write': run fio without that option"
        )
    read = _parse_direction(_object(job, "read", path), f"{path}.read")
    write = _parse_direction(_object(job, "write", path), f"{path}.write")
    return JobResult(
        name=_text(job, "jobname", path),
        error=_integer(job, "error", path),
        read=read,
        write=write,
        usr_cpu_pct=_number(job, "usr_cpu", path),
        sys_cpu_pct=_number(job, "sys_cpu", path),
        job_runtime_ms=(
            max(read.runtime_ms, write.runtime_ms)
            if "job_runtime" not in job
            else _integer(job, "job_runtime", path)
        ),
        options={**global_options, **_options(job, "job options", path)},
        host=_host(job, path),
    )


def _host(job: Mapping[str, Any], path: str) -> str:
    """The fio server a client-mode job result came from ("" in local output)."""
    return _text(job, "hostname", path) if "hostname" in job else ""


def _options(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    if key not in obj:
        return {}
    options: dict[str, str] = {}
    for name, value in _object(obj, key, path).items():
        if not isinstance(value, str):
            raise _type_error(_join(_join(path, key), name), "text", value)
        options[name] = value
    return options


def _parse_direction(direction: Mapping[str, Any], path: str) -> DirectionStats:
    clat, clat_scale = _latency(direction, "clat", path)
    lat, lat_scale = _latency(direction, "lat", path)
    clat_path = _join(path, "clat_ns" if clat_scale == 1 else "clat")
    lat_path = _join(path, "lat_ns" if lat_scale == 1 else "lat")
    return DirectionStats(
        io_bytes=_io_bytes(direction, path),
        bw_bytes_per_s=_bandwidth(direction, path),
        iops=_number(direction, "iops", path),
        total_ios=_integer(direction, "total_ios", path),
        runtime_ms=_integer(direction, "runtime", path),
        clat_mean_ns=_number(clat, "mean", clat_path, clat_scale),
        clat_min_ns=_number(clat, "min", clat_path, clat_scale),
        clat_max_ns=_number(clat, "max", clat_path, clat_scale),
        clat_stddev_ns=_number(clat, "stddev", clat_path, clat_scale),
        lat_mean_ns=_number(lat, "mean", lat_path, lat_scale),
        lat_max_ns=_number(lat, "max", lat_path, lat_scale),
        clat_percentiles_ns=_percentiles(clat, clat_path, clat_scale),
        clat_bins_ns=_bins(clat, clat_path) if clat_scale == 1 else {},
        lat_percentiles_ns=_percentiles(lat, lat_path, lat_scale),
        lat_bins_ns=_bins(lat, lat_path) if lat_scale == 1 else {},
    )


def _latency(direction: Mapping[str, Any], name: str, path: str) -> tuple[JsonObject, int]:
    """The ``<name>_ns`` object and scale 1, or fio 2.x's ``<name>`` (usec) and 1000."""
    if f"{name}_ns" in direction or name not in direction:
        return _object(direction, f"{name}_ns", path), 1
    return _object(direction, name, path), 1000


def _io_bytes(direction: Mapping[str, Any], path: str) -> int:
    # fio 2.x had only "io_bytes", in KiB; fio 3 has "io_bytes" in bytes and "io_kbytes"
    modern = "io_kbytes" in direction or "bw_bytes" in direction
    return _integer(direction, "io_bytes", path) * (1 if modern else 1024)


def _bandwidth(direction: Mapping[str, Any], path: str) -> float:
    if "bw_bytes" in direction or "bw" not in direction:
        return _number(direction, "bw_bytes", path)
    return _number(direction, "bw", path, 1024)


def _percentiles(clat: Mapping[str, Any], path: str, scale: int) -> dict[float, float]:
    if "percentile" not in clat:
        return {}
    table = _object(clat, "percentile", path)
    path = _join(path, "percentile")
    result: dict[float, float] = {}
    for key in table:
        pct = _parse_float(key)
        if pct is None or not 0.0 <= pct <= 100.0:
            raise FioOutputError(f"fio JSON key {path}[{key!r}] is not a percentile")
        result[pct] = _number(table, key, path, scale)
    return result


def _bins(clat: Mapping[str, Any], path: str) -> dict[int, int]:
    if "bins" not in clat:
        return {}
    table = _object(clat, "bins", path)
    path = _join(path, "bins")
    result: dict[int, int] = {}
    for key in table:
        value = int(key) if key.isascii() and key.isdigit() and len(key) < 40 else None
        if value is None:
            raise FioOutputError(f"fio JSON key {path}[{key!r}] is not a latency in ns")
        count = _integer(table, key, path)
        if count < 0:
            raise FioOutputError(f"fio JSON key {path}[{key!r}] is a negative count")
        result[value] = result.get(value, 0) + count
    return result


def _parse_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# --------------------------------------------------------------------------- typed access


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_error(path: str, expected: str, value: object) -> FioOutputError:
    return FioOutputError(f"fio JSON key {path!r} should be {expected}, not {type(value).__name__}")


def _get(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise FioOutputError(f"fio JSON output lacks key {_join(path, key)!r}")
    return obj[key]


def _object(obj: Mapping[str, Any], key: str, path: str) -> JsonObject:
    value = _get(obj, key, path)
    if not isinstance(value, dict):
        raise _type_error(_join(path, key), "an object", value)
    return value


def _text(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = _get(obj, key, path)
    if not isinstance(value, str):
        raise _type_error(_join(path, key), "text", value)
    return value


def _integer(obj: Mapping[str, Any], key: str, path: str) -> int:
    value = _get(obj, key, path)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(_join(path, key), "an integer", value)
    return value


def _number(obj: Mapping[str, Any], key: str, path: str, scale: int = 1) -> float:
    """A finite number, times ``scale`` (unit conversion of old fio output)."""
    value = _get(obj, key, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(_join(path, key), "a number", value)
    try:
        number = float(value) * scale
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise FioOutputError(f"fio JSON key {_join(path, key)!r} is not a finite number")
    return number


# --------------------------------------------------------------------------- percentiles


#: fio's latency histogram (stat.h FIO_IO_U_PLAT_BITS): each power of two of nanoseconds
#: from 128 ns up is split into 2**6 buckets of equal width
PLAT_BITS = 6


def bin_error_ns(value_ns: float) -> float:
    """How far a latency fio's json+ histogram counted in the bucket whose value is
    ``value_ns`` may lie from that value: half the bucket's width (fio reports a bucket by
    its middle, stat.c plat_idx_to_val). Below 128 ns every nanosecond has its bucket (0);
    above, at most 1/128 of the value (0.78 %). A percentile read from merged histograms
    (:func:`merged_percentile_ns`) is the value of the bucket holding the sample of the
    same rank, so it lies within this of the exact percentile of the samples themselves.
    (Latencies above 2**34 ns, about 17 s, share fio's last bucket: no bound.)"""
    value = int(value_ns)
    if value < 2 << PLAT_BITS:
        return 0.0
    return float(1 << (value.bit_length() - 2 - PLAT_BITS))


def merged_percentile_ns(bins: Sequence[Mapping[int, int]], pct: float) -> float | None:
    """The ``pct`` percentile of several json+ latency histograms taken together.

    Same convention as fio: the value of the first bucket (in ascending order) at which
    the cumulative count reaches ``pct`` % of the total. The comparison is exact (no
    float rounding), matching fio's long-double arithmetic. ``None`` without samples.
    Raises :class:`ValueError` if ``pct`` is not within [0, 100] or a count is negative.
    """
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], not {pct!r}")
    merged: dict[int, int] = {}
    for histogram in bins:
        for value, count in histogram.items():
            if count < 0:
                raise ValueError(f"negative count {count} for bucket {value}")
            merged[value] = merged.get(value, 0) + count
    total = sum(merged.values())
    numerator, denominator = pct.as_integer_ratio()
    cumulative = 0
    for value in sorted(v for v, c in merged.items() if c > 0):
        cumulative += merged[value]
        # cumulative >= pct / 100 * total, in integers
        if cumulative * 100 * denominator >= numerator * total:
            return float(value)
    return None
