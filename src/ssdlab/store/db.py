"""The results store: an SQLite file or a PostgreSQL database, one durable transaction
per recorded fact."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from ssdlab.errors import EnvironmentProblem, RunNotFound, UserError, command
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.store import records as rec
from ssdlab.store.backend import Db
from ssdlab.store.location import DEFAULT_STORE_ENV, StoreLocation, default_store_location
from ssdlab.store.masking import mask_argv, mask_json, mask_text
from ssdlab.store.records import (
    FioRecord,
    ReferenceTest,
    RoundRecord,
    RunData,
    RunHead,
    RunSummary,
    SetData,
    TestState,
)
from ssdlab.store.schema import connect

__all__ = ["DEFAULT_STORE_ENV", "Store", "StoreLocation", "StoreWriteError",
           "default_store_location", "default_store_path"]

ROUND_STATUSES = ("ok", "failed")
FINAL_RUN_STATUSES = ("complete", "interrupted", "failed")
_LAST_REFS = ("last", "latest")
#: a set's id: "set-" and the form of a run id
SET_PREFIX = "set-"
_SUMMARY_COLS = (
    "id, created_at, finished_at, suite, profile, quick, status, target_path,"
    " target_model, message, read_only"
)


def default_store_path() -> StoreLocation:
    """``$SSDLAB_STORE``, else ``$XDG_DATA_HOME/ssdlab/results.sqlite``, else ~/.local/share."""
    return default_store_location()


def _location(location: StoreLocation | Path | str) -> StoreLocation:
    if isinstance(location, StoreLocation):
        return location
    return StoreLocation.parse(location)


def _new_run_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(2)


class StoreWriteError(EnvironmentProblem):
    """The store could not be written (disk full, I/O error, locked too long, server gone)."""

    def __init__(self, db: Db, exc: BaseException) -> None:
        super().__init__(
            f"cannot write the results store {db.location}: {db.write_error_reason(exc)};"
            " everything committed before is kept (fix that, then continue with"
            f" `{command()} resume RUN`)"
        )


class Store:
    """A results store. Every write method commits durably before it returns.

    Secrets never reach it: a run's command line, plan, target and host, its events and
    messages, a set's command line and detail are stored masked (store/masking.py).
    """

    def __init__(self, db: Db) -> None:
        self._conn = db
        #: where the store is (its str is the path or the URL without a password)
        self.path: StoreLocation = db.location
        #: labels the command gave (``--label``): stored with every run it records, in its
        #: target (``target["labels"]``)
        self.run_labels: dict[str, str] = {}
        #: the set the next run it records belongs to, and its place there (set id,
        #: position): recorded with the run, in the same transaction
        self.set_member: tuple[str, int] | None = None

    @classmethod
    def open(cls, location: StoreLocation | Path | str) -> Store:
        """Open (creating or migrating) the store at ``location``; EnvironmentProblem if
        unusable."""
        return cls(connect(_location(location)))

    @classmethod
    def open_readonly(cls, location: StoreLocation | Path | str) -> Store:
        """Open the store for reading only: never created, migrated or written (``ssdlab
        serve``); a store of another schema version is refused."""
        return cls(connect(_location(location), read_only=True))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Db]:
        """One durable transaction; a full or failing disk or a lost server becomes a
        one-line error.

        The database rolls the failed transaction back, so the store keeps exactly what was
        committed before (every completed round) and stays consistent.
        """
        try:
            with self._conn.tx() as c:
                yield c
        except self._conn.write_errors as exc:
            raise StoreWriteError(self._conn, exc) from exc

    # -- writing -------------------------------------------------------------------

    def new_run(self, head: RunHead) -> str:
        """Record a new run with status "running"; return its id ``YYYYMMDD-HHMMSS-xxxx``."""
        target = head.target
        if self.run_labels:
            target = {**target, "labels": dict(self.run_labels)}
        target, host, plan = mask_json(target), mask_json(head.host), mask_json(
            head.plan.to_json())
        model = target.get("model")
        blobs = [rec.dumps(v) for v in (target, host, plan, dict(head.versions),
                                        mask_argv(list(head.argv)))]
        now = time.time()

        def write(c: Db, run_id: str) -> None:
            c.execute(
                "INSERT INTO runs (id, created_at, suite, profile, quick, status, target_path,"
                " target_model, target_json, host_json, plan_json, versions_json, argv_json)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (run_id, now, head.suite, head.profile, int(head.quick),
                 str(target.get("path", "")), model if isinstance(model, str) else None,
                 *blobs),
            )
            if self.set_member is not None:
                c.execute("INSERT INTO set_runs (set_id, position, run_id) VALUES (?, ?, ?)",
                          (*self.set_member, run_id))

        run_id = self._insert_new("runs", "", now, write)
        self.set_member = None  # one run per place in the set
        return run_id

    def _insert_new(self, table: str, prefix: str, now: float,
                    write: Callable[[Db, str], None]) -> str:
        """Draw an id (``prefix`` + the form of a run id) and ``write`` its rows in one
        transaction; another writer's run or set with that id: draw again."""
        for _attempt in range(50):
            new_id = prefix + _new_run_id(now)
            try:
                with self._tx() as c:
                    write(c, new_id)
                return new_id
            except self._conn.integrity_errors:
                if not self._taken(table, new_id):
                    raise
                continue  # the same id in the same second: draw again
        raise RuntimeError(f"could not allocate a unique {table[:-1]} id")

    def add_event(
        self,
        run_id: str,
        test: str | None,
        kind: str,
        message: str,
        detail: Record | JsonObject | None = None,
    ) -> None:
        """Record an event (purge outcome, preconditioning, skipped cell, warning); its
        detail a record, or a document kept verbatim (the emulated SSD's statistics)."""
        if isinstance(detail, Record):
            detail = detail.to_json()
        detail_json = None if detail is None else rec.dumps(mask_json(detail))
        with self._tx() as c:
            self._writable(c, run_id)
            c.execute(
                "INSERT INTO events (run_id, test, kind, message, detail_json, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, test, kind, mask_text(message), detail_json, time.time()),
            )

    def add_step(
        self, run_id: str, test: str, kind: str, detail: Record, fio: FioRecord | None
    ) -> None:
        """Record a purge / precondition step and its fio invocation in one transaction."""
        detail_json = rec.dumps(mask_json(detail.to_json()))
        with self._tx() as c:
            self._writable(c, run_id)
            self._ensure_test(c, run_id, test)
            fio_id = rec.insert_fio(c, run_id, fio)
            c.execute(
                "INSERT INTO steps (run_id, test, kind, detail_json, created_at, fio_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, test, kind, detail_json, time.time(), fio_id),
            )

    def add_round(self, run_id: str, test: str, rnd: RoundRecord) -> None:
        """Record one round and its fio invocation in one durable transaction.

        A round already stored as "failed" is replaced; one stored as "ok" raises ValueError.
        """
        if rnd.status not in ROUND_STATUSES:
            raise ValueError(f"round status must be one of {ROUND_STATUSES}, not "
                             f"{rnd.status!r}")
        data = (rec.dumps(dict(rnd.tracking)), rec.dumps([c.to_json() for c in rnd.cells]),
                rnd.started_at, rnd.ended_at)
        key = (run_id, test, rnd.round_no)
        with self._tx() as c:
            self._writable(c, run_id)
            self._ensure_test(c, run_id, test)
            old = c.execute(
                "SELECT status FROM rounds WHERE run_id = ? AND test = ? AND round_no = ?", key
            ).fetchone()
            if old is not None and old[0] != "failed":
                raise ValueError(f"round {rnd.round_no} of {test} in run {run_id} is already "
                                 "stored")
            if old is not None:  # replace the failed attempt; its fio record stays as evidence
                c.execute("DELETE FROM rounds WHERE run_id = ? AND test = ? AND round_no = ?", key)
            fio_id = rec.insert_fio(c, run_id, rnd.fio)
            c.execute(
                "INSERT INTO rounds (run_id, test, round_no, status, tracking_json, cells_json,"
                " started_at, ended_at, fio_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, rnd.status, *data, fio_id),
            )

    def set_test(self, run_id: str, test: str, state: TestState) -> None:
        """Insert or update a test's status, parameters, verdicts and result."""
        blobs = tuple(rec.dumps(d) for d in state.documents())
        with self._tx() as c:
            self._writable(c, run_id)
            c.execute(
                "INSERT INTO tests (run_id, name, status, params_json, verdicts_json,"
                " result_json, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, name) DO UPDATE SET status = excluded.status,"
                " params_json = excluded.params_json, verdicts_json = excluded.verdicts_json,"
                " result_json = excluded.result_json, updated_at = excluded.updated_at",
                (run_id, test, state.status, *blobs, time.time()),
            )

    def finish_run(self, run_id: str, status: str, message: str = "") -> None:
        """Mark a run "complete", "interrupted" or "failed"."""
        if status not in FINAL_RUN_STATUSES:
            raise ValueError(f"run status must be one of {FINAL_RUN_STATUSES}, not {status!r}")
        with self._tx() as c:
            self._writable(c, run_id)
            c.execute(
                "UPDATE runs SET status = ?, message = ?, finished_at = ? WHERE id = ?",
                (status, mask_text(message), time.time(), run_id),
            )

    def import_reference_run(self, head: RunHead, tests: Sequence[ReferenceTest], *,
                             status: str) -> str:
        """Record a finished read-only reference run and its tests in one transaction.

        ``tests`` in order (names unique). The run is never writable afterwards (see
        :meth:`_writable`); a crash leaves nothing of it.
        """
        names = [t.name for t in tests]
        if len(set(names)) != len(names):
            raise ValueError(f"test names of a reference run must be unique: {names}")
        target, host, plan = mask_json(head.target), mask_json(head.host), mask_json(
            head.plan.to_json())
        model = target.get("model")
        blobs = [rec.dumps(v) for v in (target, host, plan, dict(head.versions),
                                        mask_argv(list(head.argv)))]
        documents = [(t.name, t.state.status, *(rec.dumps(d) for d in t.state.documents()))
                     for t in tests]
        now = time.time()

        def write(c: Db, run_id: str) -> None:
            c.execute(
                "INSERT INTO runs (id, created_at, finished_at, suite, profile, quick, status,"
                " target_path, target_model, read_only, target_json, host_json, plan_json,"
                " versions_json, argv_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
                (run_id, now, now, head.suite, head.profile, int(head.quick), status,
                 str(target.get("path", "")), model if isinstance(model, str) else None,
                 *blobs),
            )
            c.executemany(
                "INSERT INTO tests (run_id, name, status, params_json, verdicts_json,"
                " result_json, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, *row, now) for row in documents],
            )

        return self._insert_new("runs", "", now, write)

    def find_reference_run(self, content_sha256: str) -> str | None:
        """The read-only run whose plan records ``content_sha256``, if one was imported."""
        rows = self._conn.execute(
            "SELECT id, plan_json FROM runs WHERE read_only = 1 ORDER BY created_at, id"
        )
        for run_id, plan_json in rows:
            plan = rec.loads(plan_json)
            if isinstance(plan, dict) and plan.get("content_sha256") == content_sha256:
                return str(run_id)
        return None

    def reopen_run(self, run_id: str, argv: list[str]) -> None:
        """Mark a stopped run "running" again (``ssdlab resume``), with an event saying so."""
        with self._tx() as c:
            self._writable(c, run_id)
            row = c.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            c.execute(
                "UPDATE runs SET status = 'running', message = '', finished_at = NULL"
                " WHERE id = ?",
                (run_id,),
            )
            c.execute(
                "INSERT INTO events (run_id, test, kind, message, detail_json, created_at)"
                " VALUES (?, NULL, 'resumed', ?, ?, ?)",
                (run_id, f"resumed (the run was {row[0]})",
                 rec.dumps({"argv": mask_argv(argv), "previous_status": row[0]}), time.time()),
            )

    def new_set(self, *, suite: str, argv: list[str], targets: list[str]) -> str:
        """Record a new set of runs (its runs join it as they are recorded, see
        :attr:`set_member`); its id ``set-YYYYMMDD-HHMMSS-xxxx``."""
        blobs = (rec.dumps(mask_argv(argv)), rec.dumps([mask_text(t) for t in targets]))
        now = time.time()

        def write(c: Db, set_id: str) -> None:
            c.execute("INSERT INTO sets (id, created_at, suite, argv_json, targets_json)"
                      " VALUES (?, ?, ?, ?, ?)", (set_id, now, suite, *blobs))

        return self._insert_new("sets", SET_PREFIX, now, write)

    def finish_set(self, set_id: str, detail: Record) -> None:
        """The set has ended (each run records how it ended); what it recorded."""
        with self._tx() as c:
            c.execute("UPDATE sets SET finished_at = ?, detail_json = ? WHERE id = ?",
                      (time.time(), rec.dumps(mask_json(detail.to_json())), set_id))

    def _taken(self, table: str, key: str) -> bool:
        """Whether a run or set with the id ``key`` exists (another writer's)."""
        return self._conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (key,)
                                  ).fetchone() is not None

    def _writable(self, c: Db, run_id: str) -> None:
        row = c.execute("SELECT read_only FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id} in {self.path} (see `{command()} runs`)")
        if row[0]:
            raise UserError(f"run {run_id} is a read-only reference run")

    @staticmethod
    def _ensure_test(c: Db, run_id: str, test: str) -> None:
        c.execute(
            "INSERT INTO tests (run_id, name, status, params_json, verdicts_json, result_json,"
            " updated_at) VALUES (?, ?, 'running', '{}', '{}', '{}', ?)"
            " ON CONFLICT (run_id, name) DO NOTHING",
            (run_id, test, time.time()),
        )

    # -- reading -------------------------------------------------------------------

    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first."""
        tests: dict[str, list[str]] = {}
        for run_id, name in self._conn.execute("SELECT run_id, name FROM tests ORDER BY id"):
            tests.setdefault(run_id, []).append(name)
        rows = self._conn.execute(
            f"SELECT {_SUMMARY_COLS} FROM runs ORDER BY created_at DESC, id DESC"
        ).fetchall()
        return [rec.summary_from_row(row, tuple(tests.get(row[0], ()))) for row in rows]

    def run_sets(self) -> dict[str, str]:
        """Run id -> the id of the set it ran in, for every run in a set."""
        return {str(r): str(s) for r, s in
                self._conn.execute("SELECT run_id, set_id FROM set_runs")}

    def find_set(self, ref: str) -> str | None:
        """The set ``ref`` names (its id, or a unique prefix of one that says ``set-``),
        or None when it names no set."""
        ref = ref.strip()
        if not ref.startswith(SET_PREFIX):
            return None
        rows = self._conn.execute(
            "SELECT id FROM sets WHERE substr(id, 1, ?) = ? ORDER BY created_at DESC, id DESC",
            (len(ref), ref)).fetchall()
        ids = [str(r[0]) for r in rows]
        if ref in ids:
            return ref
        if not ids:
            raise RunNotFound(f"no set matches {ref!r} in {self.path} (see `{command()} runs`)")
        if len(ids) > 1:
            raise UserError(f"{ref!r} matches {len(ids)} sets ({', '.join(ids[:5])}); give "
                            "more of the id")
        return ids[0]

    def load_set(self, set_id: str) -> SetData:
        row = self._conn.execute(
            "SELECT id, created_at, finished_at, suite, argv_json, targets_json, detail_json"
            " FROM sets WHERE id = ?", (set_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no set {set_id} in {self.path} (see `{command()} runs`)")
        runs = [(int(p), str(r)) for p, r in self._conn.execute(
            "SELECT position, run_id FROM set_runs WHERE set_id = ? ORDER BY position",
            (set_id,))]
        return SetData(str(row[0]), row[1], row[2], str(row[3]), mask_argv(rec.loads(row[4])),
                       mask_json(rec.loads(row[5])), mask_json(rec.loads(row[6])), runs)

    def expand(self, ref: str) -> list[str]:
        """The run ids ``ref`` names: a set's runs in order, else the one run."""
        set_id = self.find_set(ref)
        if set_id is None:
            return [self.resolve(ref)]
        runs = [run_id for _, run_id in self.load_set(set_id).runs]
        if not runs:
            raise RunNotFound(f"set {set_id} recorded no run")
        return runs

    def resolve(self, ref: str) -> str:
        """An exact run id, a unique prefix of one, or "last"/"latest" -> the run id."""
        ref = ref.strip()
        if ref.startswith(SET_PREFIX):
            set_id = self.find_set(ref)
            raise UserError(f"{set_id} is a set of runs, not one run (see `{command()} "
                            f"show {set_id}`)")
        if ref.lower() in _LAST_REFS:
            return self._newest()
        if ref and self._conn.execute("SELECT 1 FROM runs WHERE id = ?", (ref,)).fetchone():
            return ref
        found = self._by_prefix(ref) if ref else []
        if not found:
            raise RunNotFound(f"no run matches {ref!r} in {self.path} (see `{command()} runs`)")
        if len(found) > 1:
            shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise UserError(f"{ref!r} matches {len(found)} runs ({shown}); give more of the id")
        return found[0]

    def _newest(self) -> str:
        """The newest measured run: imported reference runs are never "last"."""
        row = self._conn.execute(
            "SELECT id FROM runs WHERE read_only = 0 ORDER BY created_at DESC, id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no measured runs yet in {self.path}")
        return str(row[0])

    def _by_prefix(self, prefix: str) -> list[str]:
        rows = self._conn.execute(
            "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY created_at DESC, id DESC",
            (len(prefix), prefix),
        )
        return [str(r[0]) for r in rows]

    def load(self, run_id: str, *, with_raw: bool = False) -> RunData:
        """The whole run (read as one snapshot); raw fio stdout is decompressed only when
        ``with_raw``."""
        with self._conn.read() as c:
            row = c.execute(
                f"SELECT {_SUMMARY_COLS}, target_json, host_json, plan_json, versions_json,"
                " argv_json FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no run {run_id} in {self.path} (see `{command()} runs`)")
            return rec.load_run(c, row, with_raw=with_raw)
