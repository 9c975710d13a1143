"""What the AJA-like and copy-set presets are built from, as data: video frame formats
(a resolution and a pixel format, one frame per I/O) and the copy sets (files of one
size, scaled to the set size asked for). Pure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ssdlab.errors import UserError
from ssdlab.units import parse_size

#: every size a preset uses is a multiple of this
ALIGN = 4096
#: the largest transfer of a bulk file phase
BULK_BLOCK = 1024 * 1024

_RESOLUTION = re.compile(r"^\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*$")


@dataclass(frozen=True)
class FrameFormat:
    """A video frame: its size in pixels, its pixel format, how it is written (whole
    aligned blocks)."""

    width: int
    height: int
    pixel_format: str
    pixel_label: str
    bytes_per_pixel: Fraction
    align_bytes: int

    @property
    def raw_bytes(self) -> int:
        return math.ceil(self.width * self.height * self.bytes_per_pixel)

    @property
    def frame_bytes(self) -> int:
        """One frame as written: the raw frame rounded up to whole aligned blocks."""
        return -(-self.raw_bytes // self.align_bytes) * self.align_bytes

    @property
    def label(self) -> str:
        return f"{self.width}x{self.height} {self.pixel_label}"


def frame_format(data: dict[str, Any], resolution: str, pixel_format: str) -> FrameFormat:
    named = data.get("resolutions", {})
    text = named.get(resolution, named.get(resolution.upper(), resolution))
    match = _RESOLUTION.match(str(text))
    if match is None or not all(0 < int(v) <= 16384 for v in match.groups()):
        raise UserError(f"--resolution {resolution!r}: give WIDTHxHEIGHT (each 1 to 16384, "
                        f"e.g. 5120x2700) or one of: {', '.join(named)}")
    formats = data["pixel_formats"]
    if pixel_format not in formats:
        raise UserError(f"--pixel-format {pixel_format!r} is not one of: {', '.join(formats)}")
    fmt = formats[pixel_format]
    return FrameFormat(int(match.group(1)), int(match.group(2)), pixel_format, fmt["label"],
                       Fraction(fmt["bytes_per_pixel"]), int(data["definition"]["align_bytes"]))


@dataclass(frozen=True)
class CopySet:
    """A copy set: ``files`` files of ``file_bytes`` each."""

    name: str
    files: int
    file_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.files * self.file_bytes


def scaled_sets(sets: list[dict[str, Any]], set_size: int) -> list[tuple[str, CopySet]]:
    """Each set of the definition shrunk (or grown) to ``set_size`` in total: by file size
    (rounded to 4 KiB) or by file count, as the set says."""
    result = []
    for s in sets:
        files, file_bytes = int(s["files"]), parse_size(str(s["file_size"]))
        nominal = files * file_bytes
        if s.get("shrink") == "count":
            files = max(1, round(files * set_size / nominal))
        else:
            file_bytes = max(ALIGN, round(file_bytes * set_size / nominal / ALIGN) * ALIGN)
        result.append((str(s["name"]), CopySet(str(s["name"]), files, file_bytes)))
    return result


def bulk_block(file_bytes: int) -> int:
    """The largest power-of-two transfer up to 1 MiB that divides the file size."""
    block = BULK_BLOCK
    while file_bytes % block:
        block //= 2
    return block
