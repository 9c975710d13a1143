"""Review presets as data: each preset is a TOML file in ``presets/data/`` shipped with
ssdlab, with a ``name``, a ``version`` (bumped whenever a definition changes what is
measured; every result records the name and version it ran) and its definitions.

:func:`load` reads and checks the common header; each preset's own module validates the
rest into frozen objects before any I/O.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

from ssdlab.errors import UserError

HEADER = ("name", "version", "title", "description")


def names() -> list[str]:
    """Every preset shipped, by file name."""
    folder = resources.files("ssdlab.presets").joinpath("data")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir()
                  if p.name.endswith(".toml"))


def load(name: str) -> dict[str, Any]:
    """The preset ``name`` as a dict; UserError if there is none or it is malformed."""
    if name not in names():
        raise UserError(f"no preset {name!r}; the presets are: {', '.join(names())}")
    text = resources.files("ssdlab.presets").joinpath("data", f"{name}.toml").read_text(
        encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # a packaging bug, said plainly
        raise UserError(f"preset {name}: {exc}") from None
    missing = [key for key in HEADER if key not in data]
    if missing or data.get("name") != name or not isinstance(data.get("version"), int):
        raise UserError(f"preset {name} is malformed (header {missing or 'name/version'})")
    return data


def identity(data: dict[str, Any]) -> dict[str, Any]:
    """What a result records about the preset it ran."""
    return {"preset": data["name"], "preset_version": data["version"],
            "preset_title": data["title"]}
