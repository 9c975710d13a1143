"""Scratch directories of a running ssdlab, ``$TMPDIR/ssdlab-KIND-PID-XXXXXXXX``: fio's log
files of one round (``wsat``, ``hir``, ``iolog`` (a trace replay's), ``preset``, ``slc``)
and the fio gate's FIFO and lock (``gate``). Each is removed when its block ends; an
ssdlab killed by SIGKILL (or the kernel) runs no ``finally``, so every new one first
removes those of the known kinds whose process is gone. Nothing else in the directory is
touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: the kinds of scratch directory ssdlab makes (a name of another kind is never removed)
KINDS = frozenset({"gate", "wsat", "hir", "iolog", "preset", "slc"})


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner(name: str) -> int | None:
    """The pid in a scratch directory's name (``ssdlab-wsat-4242-k3j_x1``), or None when
    the name is not one of ours."""
    parts = name.split("-")
    if len(parts) != 4 or parts[0] != "ssdlab" or parts[1] not in KINDS:
        return None
    return int(parts[2]) if parts[2].isdigit() else None


def sweep(parent: Path) -> list[Path]:
    """Remove the scratch directories in ``parent`` whose ssdlab died without removing
    them; the ones removed."""
    removed = []
    for directory in parent.glob("ssdlab-*-*-*"):
        pid = owner(directory.name)
        if pid is not None and pid != os.getpid() and not alive(pid) and directory.is_dir():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def make(kind: str, parent: Path | None = None) -> Path:
    """A new scratch directory of ``kind`` in ``parent`` (default: ``$TMPDIR``), after the
    sweep; the caller removes it."""
    if kind not in KINDS:
        raise ValueError(f"unknown scratch kind {kind!r}")
    where = Path(tempfile.gettempdir()) if parent is None else parent
    sweep(where)
    return Path(tempfile.mkdtemp(prefix=f"ssdlab-{kind}-{os.getpid()}-", dir=where))


@contextlib.contextmanager
def scratch_dir(kind: str, parent: Path | None = None) -> Iterator[Path]:
    """:func:`make`, removed when the block ends."""
    directory = make(kind, parent)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
