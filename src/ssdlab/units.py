"""Parsing sizes and durations the user types. MB = 10^6 bytes, MiB = 2^20 bytes."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ssdlab.errors import UserError

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
    "tb": 1000**4,
}
_SIZE_RE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,9})?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, *, default_unit: str = "") -> int:
    """``1GiB``/``1G`` -> 2^30, ``1GB`` -> 10^9, ``4k`` -> 4096. ValueError otherwise."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 512, 4k, 1GiB, 1GB)")
    number, unit = match.groups()
    factor = _SIZE_UNITS.get((unit or default_unit).lower())
    if factor is None:
        raise ValueError(
            f"{text!r} has an unknown unit {unit!r} (use B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)"
        )
    value = Fraction(number) * factor
    if value.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def _trim(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def format_bytes(count: float) -> str:
    """Binary units for capacities: 1073741824 -> '1 GiB'."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(count) >= factor:
            return f"{_trim(count / factor)} {unit}"
    return f"{count:.0f} B"


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def check_fio_seconds(option: str, value: float, minimum: float, maximum: float) -> float:
    """A duration fio is given (``runtime=``, ``ramp_time=``): ``minimum`` to ``maximum``
    seconds and a whole number of milliseconds, fio's resolution; else a one-line error."""
    in_range = math.isfinite(value) and minimum <= value <= maximum
    if not (in_range and abs(value * 1000 - round(value * 1000)) <= 1e-6):
        raise UserError(f"{option} {value!r}: give {minimum:g} to {maximum:g} seconds, a "
                        "whole number of milliseconds")
    return float(value)


def fio_time(seconds: float) -> str:
    """A duration as fio reads it: whole seconds as ``5s``, anything finer as ``500ms``."""
    millis = round(seconds * 1000)
    if millis <= 0:
        raise ValueError(f"duration must be positive, got {seconds}")
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"
