"""The signature probe of a device (or an image file): util-linux and ssdlab's own
magic-number reader (:mod:`ssdlab.targets.magic`), both opening the target ``O_RDONLY``
and never writing.

* :func:`probe_with_tools` runs util-linux: ``wipefs --no-act --json`` (every signature
  with its offset, primary and backup), else ``blkid -p -o export`` (libblkid's low-level
  probe: the first signature);
* :func:`~ssdlab.targets.magic.probe_magic` reads the magic numbers itself.

:func:`probe_device` reports the union, and the partitions' own signatures: anything
either probe finds counts. A probe that fails is reported as such, never as "blank".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable

from ssdlab.targets.identity import Runner, Which
from ssdlab.targets.magic import probe_magic
from ssdlab.targets.signatures import DeviceProbe, Signature, enrich, family

__all__ = [
    "merge",
    "probe_device",
    "probe_with_tools",
]

TOOL_TIMEOUT_S = 30.0


# --------------------------------------------------------------------------- util-linux


def _tool_env() -> dict[str, str]:
    return {**os.environ, "LC_ALL": "C"}


def _parse_wipefs(text: str) -> list[Signature]:
    """``wipefs --json`` output (nothing at all when there is no signature)."""
    if not text.strip():
        return []
    rows = json.loads(text).get("signatures", [])
    out = []
    for row in rows:
        offset = row.get("offset")
        out.append(Signature(
            type=str(row.get("type") or "unknown"),
            offset_bytes=int(offset, 0) if isinstance(offset, str) else offset,
            uuid=row.get("uuid") or None,
            label=row.get("label") or None,
            sources=("wipefs",),
        ))
    return out


def _parse_blkid(text: str) -> list[Signature]:
    """``blkid -p -o export``: KEY=value lines; TYPE and PTTYPE are the signatures."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    out = []
    if "PTTYPE" in values:
        out.append(Signature(values["PTTYPE"], uuid=values.get("PTUUID"), sources=("blkid",)))
    if "TYPE" in values:
        out.append(Signature(values["TYPE"], uuid=values.get("UUID"),
                             label=values.get("LABEL"), version=values.get("VERSION"),
                             sources=("blkid",)))
    return out


def _run_tool(command: list[str], runner: Runner) -> subprocess.CompletedProcess[str]:
    return runner(command, capture_output=True, text=True, check=False,
                  timeout=TOOL_TIMEOUT_S, env=_tool_env())


def probe_with_tools(
    path: str, *, runner: Runner = subprocess.run, which: Which = shutil.which
) -> tuple[str | None, list[Signature], str | None]:
    """(tool used, its signatures, its error) from ``wipefs``, else ``blkid``.

    Both only read (libblkid opens the device ``O_RDONLY``); ``--no-act`` on top.
    """
    try:
        if which("wipefs"):
            done = _run_tool(["wipefs", "--no-act", "--json", path], runner)
            if done.returncode == 0:
                return "wipefs", _parse_wipefs(done.stdout), None
            return "wipefs", [], _first_line(done.stderr) or f"exit status {done.returncode}"
        if which("blkid"):
            done = _run_tool(["blkid", "-p", "-o", "export", path], runner)
            if done.returncode == 0:
                return "blkid", _parse_blkid(done.stdout), None
            if done.returncode == 2:  # nothing found
                return "blkid", [], None
            if done.returncode == 8:  # several signatures and blkid cannot tell which
                return "blkid", [Signature("ambivalent", sources=("blkid",))], None
            return "blkid", [], _first_line(done.stderr) or f"exit status {done.returncode}"
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        return None, [], f"util-linux probe failed: {err}"
    return None, [], None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# --------------------------------------------------------------------------- both probes


def _matches(tool: Signature, magic: Signature) -> bool:
    if family(tool.type) != family(magic.type):
        return False
    return tool.offset_bytes is None or tool.offset_bytes == magic.offset_bytes



def merge(tool: list[Signature], magic: list[Signature]) -> tuple[Signature, ...]:
    """The union: the tool's names and fields first, enriched by ssdlab's own findings."""
    left = list(magic)
    out = []
    for sig in tool:
        twin = next((m for m in left if _matches(sig, m)), None)
        if twin is not None:
            left.remove(twin)
            sig = enrich(sig, twin)
        out.append(sig)
    return tuple(out + left)


def _probe_one(
    path: str, runner: Runner, which: Which
) -> tuple[str | None, tuple[Signature, ...], list[str]]:
    errors = []
    tool, found, error = probe_with_tools(path, runner=runner, which=which)
    if error:
        errors.append(f"{tool or 'util-linux'}: {error}")
    try:
        magic = probe_magic(path)
    except OSError as err:
        magic = []
        errors.append(f"reading {path}: {err.strerror or err}")
    return tool, merge(found, magic), errors


def probe_device(
    path: str,
    partitions: Iterable[str] = (),
    *,
    runner: Runner = subprocess.run,
    which: Which = shutil.which,
) -> DeviceProbe:
    """Probe ``path`` (and the partition nodes given) with util-linux and with ssdlab's own
    magic-number reader; nothing is opened for writing."""
    tool, signatures, errors = _probe_one(path, runner, which)
    inside = []
    for part in partitions:
        _, found, part_errors = _probe_one(part, runner, which)
        inside.append((part, found))
        errors += part_errors
    return DeviceProbe(path, signatures, tuple(inside), tool, tuple(errors))
