"""The review presets' definitions (``presets/data/<name>.toml``) as the plans use them:
which preset a run ran (:class:`PresetIdentity`, stored with its plan and its tests'
parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ssdlab.jsonrecord import Record


@dataclass(frozen=True)
class PresetIdentity(Record):
    """Which preset, in which version of its definition, by its title (a preset's
    ``name``, ``version`` and ``title``)."""

    preset: str = ""
    preset_version: int = 0
    preset_title: str = ""

    @classmethod
    def of(cls, data: dict[str, Any]) -> PresetIdentity:
        """The identity of a loaded preset definition (``presets.load``)."""
        return cls(str(data["name"]), int(data["version"]), str(data["title"]))
