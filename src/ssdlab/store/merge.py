"""Copy the runs of one store into another (``ssdlab store merge``), without duplicates.

Laptops and lab hosts keep their own SQLite stores; a lab gathers them in one database
(SQLite or PostgreSQL). A run is copied with everything recorded of it (its tests,
rounds, steps, events, every fio invocation with its raw output, its place in a set),
each run in one transaction, so an interrupted merge leaves whole runs only.

**The same run.** A run id is its start time and two random bytes, so two hosts starting
runs in the same second could draw the same id. A run already in the destination is the
same run only when its start time, host and command line match too; otherwise it is a
*conflict*: reported, never overwritten, never skipped silently.

**Newer copies.** A run copied while it was still running, or interrupted and resumed
later, differs from its earlier copy. The copy whose last recorded moment (its end, its
last round, step, event or test update) is later wins: the destination's copy is
replaced by a newer source copy, and kept when it is the newer one. Merging the same
stores again changes nothing.

Ids of the rows under a run (fio invocations, tests, steps, events) are the destination's
own: exports and reports never show them, so a run's export is the same in both stores.

**Secrets.** Rows are read with their secrets masked (store/masking.py), on both sides: a
password a run recorded before ssdlab masked them is not copied, and its run is still
the same run as its masked copy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ssdlab.store.backend import Db
from ssdlab.store.db import Store
from ssdlab.store.masking import mask_json_text, mask_text

_RUN_COLS = ("id", "created_at", "finished_at", "suite", "profile", "quick", "status", "message",
             "target_path", "target_model", "read_only", "target_json", "host_json",
             "plan_json", "versions_json", "argv_json")
_FIO_COLS = ("phase", "job_text", "command_json", "stdout_z", "stdout_bytes", "stderr",
             "returncode", "started_at", "ended_at")
_TEST_COLS = ("name", "status", "params_json", "verdicts_json", "result_json", "updated_at")
_ROUND_COLS = ("test", "round_no", "status", "tracking_json", "cells_json", "started_at",
               "ended_at")
_STEP_COLS = ("test", "kind", "detail_json", "created_at")
_EVENT_COLS = ("test", "kind", "message", "detail_json", "created_at")
_SET_COLS = ("id", "created_at", "finished_at", "suite", "argv_json", "targets_json",
             "detail_json")
#: what makes two runs with one id the same run
_IDENTITY = ("created_at", "host_json", "argv_json")
#: the columns that may hold a secret, of each table's rows as read here
_TEXT_COLS = ("target_path", "message")
_JSON_COLS = ("target_json", "host_json", "plan_json", "argv_json", "detail_json",
              "targets_json")


def _masked(cols: Sequence[str], row: Sequence[Any]) -> tuple[Any, ...]:
    """A row of ``cols`` (a prefix of ``row``) with the secrets in it masked."""
    out = list(row)
    for i, col in enumerate(cols):
        if col in _TEXT_COLS and isinstance(out[i], str):
            out[i] = mask_text(out[i])
        elif col in _JSON_COLS and isinstance(out[i], str):
            out[i] = mask_json_text(out[i])
    return tuple(out)


@dataclass
class MergeOutcome:
    """What a merge of one source did (or, in a dry run, would do)."""

    source: str
    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # the source's copy was newer
    same: list[str] = field(default_factory=list)  # already there, identical
    kept: list[str] = field(default_factory=list)  # the destination's copy is newer
    conflicts: list[str] = field(default_factory=list)  # another run with the same id
    sets_copied: list[str] = field(default_factory=list)
    set_conflicts: list[str] = field(default_factory=list)

    def line(self, dry_run: bool = False) -> str:
        verb = "would copy" if dry_run else "copied"
        parts = [f"{len(self.copied)} run(s) {verb}"]
        if self.updated:
            parts.append(f"{len(self.updated)} {'would be ' if dry_run else ''}updated "
                         "(newer in the source)")
        parts.append(f"{len(self.same)} already there")
        if self.kept:
            parts.append(f"{len(self.kept)} newer in the destination, kept")
        if self.sets_copied:
            parts.append(f"{len(self.sets_copied)} set(s) {verb}")
        if self.conflicts or self.set_conflicts:
            parts.append(f"{len(self.conflicts) + len(self.set_conflicts)} conflict(s)")
        return f"{self.source}: " + ", ".join(parts)


def _cols(cols: Sequence[str], prefix: str = "") -> str:
    return ", ".join(prefix + c for c in cols)


def _run_row(db: Db, run_id: str) -> tuple[Any, ...] | None:
    row = db.execute(f"SELECT {_cols(_RUN_COLS)} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else _masked(_RUN_COLS, row)


def _children(db: Db, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Everything under a run, in recorded order, fio invocations inline (no ids)."""
    fio = f"{_cols(_FIO_COLS, 'f.')}"
    return {
        "tests": [tuple(r) for r in db.execute(
            f"SELECT {_cols(_TEST_COLS)} FROM tests WHERE run_id = ? ORDER BY id", (run_id,))],
        "rounds": [tuple(r) for r in db.execute(
            f"SELECT {_cols(_ROUND_COLS, 'r.')}, f.id IS NOT NULL, {fio} FROM rounds r"
            " LEFT JOIN fio_invocations f ON f.id = r.fio_id WHERE r.run_id = ?"
            " ORDER BY r.test, r.round_no", (run_id,))],
        "steps": [_masked(_STEP_COLS, r) for r in db.execute(
            f"SELECT {_cols(_STEP_COLS, 's.')}, f.id IS NOT NULL, {fio} FROM steps s"
            " LEFT JOIN fio_invocations f ON f.id = s.fio_id WHERE s.run_id = ?"
            " ORDER BY s.id", (run_id,))],
        # fio invocations no round or step points to any more (a replaced failed round's)
        "orphans": [tuple(r) for r in db.execute(
            f"SELECT {_cols(_FIO_COLS)} FROM fio_invocations f WHERE f.run_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM rounds r WHERE r.fio_id = f.id)"
            " AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.fio_id = f.id) ORDER BY f.id",
            (run_id,))],
        "events": [_masked(_EVENT_COLS, r) for r in db.execute(
            f"SELECT {_cols(_EVENT_COLS)} FROM events WHERE run_id = ? ORDER BY id",
            (run_id,))],
        "set": [tuple(r) for r in db.execute(
            "SELECT set_id, position FROM set_runs WHERE run_id = ?", (run_id,))],
    }


def _digest(run: tuple[Any, ...], children: dict[str, list[tuple[Any, ...]]]) -> str:
    """A digest of everything recorded of a run (bytes and floats exactly)."""
    h = hashlib.sha256()
    for part in (run, *(row for key in sorted(children) for row in children[key])):
        h.update(repr(tuple(_plain(v) for v in part)).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def _plain(value: Any) -> Any:
    """A column's value as both backends give it (PostgreSQL: bool; SQLite: 0/1)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _last_moment(run: tuple[Any, ...], children: dict[str, list[tuple[Any, ...]]]) -> float:
    """The latest moment anything of the run was recorded."""
    moments = [float(run[1]), float(run[2] or 0.0)]
    moments += [float(t[5]) for t in children["tests"]]
    moments += [float(r[6]) for r in children["rounds"]]
    moments += [float(s[3]) for s in children["steps"]]
    moments += [float(e[4]) for e in children["events"]]
    return max(moments)


def _insert_fio(db: Db, run_id: str, fio: Sequence[Any]) -> int:
    return db.insert_id(
        f"INSERT INTO fio_invocations (run_id, {_cols(_FIO_COLS)})"
        f" VALUES (?, {', '.join('?' * len(_FIO_COLS))})", (run_id, *fio))


def _copy_run(db: Db, run: tuple[Any, ...], children: dict[str, list[tuple[Any, ...]]]) -> None:
    """Insert the run and everything under it (inside the caller's transaction)."""
    run_id = run[0]
    marks = ", ".join("?" * len(_RUN_COLS))
    db.execute(f"INSERT INTO runs ({_cols(_RUN_COLS)}) VALUES ({marks})", run)
    for fio in children["orphans"]:
        _insert_fio(db, run_id, fio)
    for test in children["tests"]:
        db.execute(f"INSERT INTO tests (run_id, {_cols(_TEST_COLS)})"
                   f" VALUES (?, {', '.join('?' * len(_TEST_COLS))})", (run_id, *test))
    n = len(_ROUND_COLS)
    for row in children["rounds"]:
        fio_id = _insert_fio(db, run_id, row[n + 1:]) if row[n] else None
        db.execute(f"INSERT INTO rounds (run_id, {_cols(_ROUND_COLS)}, fio_id)"
                   f" VALUES (?, {', '.join('?' * n)}, ?)", (run_id, *row[:n], fio_id))
    n = len(_STEP_COLS)
    for row in children["steps"]:
        fio_id = _insert_fio(db, run_id, row[n + 1:]) if row[n] else None
        db.execute(f"INSERT INTO steps (run_id, {_cols(_STEP_COLS)}, fio_id)"
                   f" VALUES (?, {', '.join('?' * n)}, ?)", (run_id, *row[:n], fio_id))
    for event in children["events"]:
        db.execute(f"INSERT INTO events (run_id, {_cols(_EVENT_COLS)})"
                   f" VALUES (?, {', '.join('?' * len(_EVENT_COLS))})", (run_id, *event))
    for set_id, position in children["set"]:
        db.execute("INSERT INTO set_runs (set_id, position, run_id) VALUES (?, ?, ?)"
                   " ON CONFLICT DO NOTHING", (set_id, position, run_id))


def _merge_sets(src: Db, dst: Db, out: MergeOutcome, dry_run: bool) -> set[str]:
    """Copy the sets the destination lacks; the ids of sets runs may join."""
    usable: set[str] = set()
    for row in src.execute(f"SELECT {_cols(_SET_COLS)} FROM sets ORDER BY created_at, id"):
        row = _masked(_SET_COLS, row)
        have = dst.execute(f"SELECT {_cols(_SET_COLS)} FROM sets WHERE id = ?", (row[0],)
                           ).fetchone()
        have = None if have is None else _masked(_SET_COLS, have)
        if have is None:
            if not dry_run:
                with dst.tx():
                    dst.execute(f"INSERT INTO sets ({_cols(_SET_COLS)})"
                                f" VALUES ({', '.join('?' * len(_SET_COLS))})", row)
            out.sets_copied.append(row[0])
            usable.add(row[0])
        elif float(have[1]) != float(row[1]) or have[4] != row[4]:
            out.set_conflicts.append(row[0])
        else:
            usable.add(row[0])
            if have[2] is None and row[2] is not None and not dry_run:  # it ended since
                with dst.tx():
                    dst.execute("UPDATE sets SET finished_at = ?, detail_json = ? WHERE id = ?",
                                (row[2], row[6], row[0]))
    return usable


def merge(source: Store, dest: Store, *, dry_run: bool = False,
          progress: Callable[[int, int], None] | None = None) -> MergeOutcome:
    """Copy every run of ``source`` into ``dest`` (see the module docstring)."""
    src, dst = source._conn, dest._conn
    out = MergeOutcome(str(source.path))
    sets = _merge_sets(src, dst, out, dry_run)
    ids = [str(r[0]) for r in src.execute("SELECT id FROM runs ORDER BY created_at, id")]
    for number, run_id in enumerate(ids, 1):
        with src.read():
            run = _run_row(src, run_id)
            children = _children(src, run_id)
        assert run is not None
        children["set"] = [s for s in children["set"] if s[0] in sets]
        _merge_run(dst, run, children, out, dry_run)
        if progress is not None:
            progress(number, len(ids))
    return out


def _merge_run(dst: Db, run: tuple[Any, ...], children: dict[str, list[tuple[Any, ...]]],
               out: MergeOutcome, dry_run: bool) -> None:
    run_id = str(run[0])
    with dst.read():
        have = _run_row(dst, run_id)
        theirs = None if have is None else _children(dst, run_id)
    if have is None or theirs is None:
        if not dry_run:
            with dst.tx():
                _copy_run(dst, run, children)
        out.copied.append(run_id)
        return
    same_run = all(have[_RUN_COLS.index(c)] == run[_RUN_COLS.index(c)] for c in _IDENTITY)
    if not same_run:
        out.conflicts.append(run_id)
    elif _digest(have, theirs) == _digest(run, children):
        out.same.append(run_id)
    elif _last_moment(run, children) > _last_moment(have, theirs):
        if not dry_run:
            with dst.tx():
                dst.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                _copy_run(dst, run, children)
        out.updated.append(run_id)
    else:
        out.kept.append(run_id)
