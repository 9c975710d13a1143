"""The database suite's tools as programs: where the servers' and benchmarks' programs
are (:func:`find_binaries`), the versions they report (:func:`tool_versions`), and one
run of one of them under a watchdog (:func:`run_tool`: its output kept verbatim, killed
with ssdlab, stopped when it outlasts its time; Ctrl-C stops it and goes on up).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem, UserError
from ssdlab.plan.db import PGBENCH, SYSBENCH, DbArgs, DbOptions
from ssdlab.plan.dbcommands import Binaries

#: how long a program may take to say its version
VERSION_TIMEOUT_S = 30.0


# -- where the programs are ----------------------------------------------------------------


def _which(name: str, dirs: list[str] | None) -> str | None:
    if dirs is None:
        return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    return shutil.which(name, path=os.pathsep.join(dirs))


def pg_bindir(given: str | None) -> str | None:
    """PostgreSQL's programs: ``--pg-bindir``, else the newest /usr/lib/postgresql/*/bin."""
    if given is not None:
        return given
    found = glob.glob("/usr/lib/postgresql/*/bin")

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", path.split("/")[-2]))
    return max(found, key=version) if found else None


def find_binaries(o: DbOptions, args: DbArgs) -> Binaries:
    """Every program the chosen workloads need: a one-line error naming the first one
    missing (a usage error when an option names where it should be, else the package it
    comes from)."""
    found: dict[str, str] = {}
    if SYSBENCH in o.workloads:
        found.update(_mariadb_binaries(args))
    if PGBENCH in o.workloads:
        found.update(_postgres_binaries(args))
    return Binaries(**found)


def _mariadb_binaries(args: DbArgs) -> dict[str, str]:
    found = {}
    mdirs = [args.mariadb_bindir] if args.mariadb_bindir else None
    for key, name, package in (("mariadbd", "mariadbd", "mariadb-server"),
                               ("install_db", "mariadb-install-db", "mariadb-server"),
                               ("mariadb", "mariadb", "mariadb-client")):
        path = _which(name, mdirs)
        if path is None and mdirs:  # the option names a directory without it
            raise UserError(f"--mariadb-bindir {args.mariadb_bindir}: no {name} there")
        if path is None:
            raise EnvironmentProblem(f"{name} not found on the PATH or in /usr/sbin: "
                                     f"install {package} (Debian) or give --mariadb-bindir")
        found[key] = path
    sysbench = shutil.which(args.sysbench)
    if sysbench is None and args.sysbench != DbArgs.sysbench:
        raise UserError(f"--sysbench {args.sysbench}: not found, or not a program")
    if sysbench is None:
        raise EnvironmentProblem("sysbench not found: install sysbench (Debian) or give "
                                 "--sysbench PATH")
    found["sysbench"] = sysbench
    return found


def _postgres_binaries(args: DbArgs) -> dict[str, str]:
    found = {}
    bindir = pg_bindir(args.pg_bindir)
    for name in ("postgres", "initdb", "psql", "pgbench"):
        path = _which(name, [bindir]) if bindir else None
        if path is None and args.pg_bindir is not None:
            raise UserError(f"--pg-bindir {args.pg_bindir}: no {name} there")
        if path is None:
            where = f"in {bindir}" if bindir else "(no /usr/lib/postgresql/*/bin)"
            raise EnvironmentProblem(f"PostgreSQL's {name} not found {where}: install "
                                     "postgresql (Debian) or give --pg-bindir")
        found[name] = path
    return found


# -- what they say they are ----------------------------------------------------------------


def _version(argv: list[str], pattern: str) -> str:
    try:
        done = run_tool(argv, VERSION_TIMEOUT_S, lambda _s: None)
    except (OSError, EnvironmentProblem):
        return ""
    if done.timed_out:
        return ""
    match = re.search(pattern, done.stdout)
    return match.group(1) if match else done.stdout.strip()[:80]


def tool_versions(o: DbOptions, b: Binaries) -> dict[str, str]:
    """The servers' and tools' versions, as they report them."""
    out = {}
    if SYSBENCH in o.workloads:
        out["mariadb"] = _version([b.mariadbd, "--version"], r"Ver\s+(\d[\w.]*?)-MariaDB")
        out["sysbench"] = _version([b.sysbench, "--version"], r"sysbench\s+(\S+)")
    if PGBENCH in o.workloads:
        out["postgresql"] = _version([b.postgres, "--version"], r"\)\s+(\d[\w.]*)")
        out["pgbench"] = _version([b.pgbench, "--version"], r"\)\s+(\d[\w.]*)")
    return out


# -- one run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRun:
    """One run of sysbench or pgbench (or any tool), kept verbatim."""

    argv: list[str]
    stdout: str
    stderr: str
    returncode: int  # -9 when it was stopped for outlasting its time
    started_at: float
    ended_at: float
    timed_out: bool = False

    def error(self, what: str) -> str:
        """One line: ``what`` failed, and why (the first error line of its output)."""
        lines = [ln.strip() for ln in (self.stderr + "\n" + self.stdout).splitlines()
                 if ln.strip() and ("error" in ln.lower() or "fatal" in ln.lower())]
        why = lines[0] if lines else f"exit status {self.returncode}"
        return f"{what} failed: {why[:300]}"


def run_tool(argv: list[str], timeout_s: float, tick: Callable[[float], None],
             cwd: str = "/") -> ToolRun:
    """Run a tool to its end (killed with ssdlab; stopped after ``timeout_s``),
    ``tick(elapsed)`` about once a second. Ctrl-C stops it and goes on up."""
    started = time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    preexec_fn=die_with_parent, cwd=cwd)
        except FileNotFoundError:
            raise EnvironmentProblem(f"{argv[0]} not found") from None
        try:
            while proc.poll() is None:
                elapsed = time.time() - started
                if elapsed > timeout_s:
                    proc.kill()
                    proc.wait()
                    break
                tick(elapsed)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.5)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    late = time.time() - started > timeout_s
    return ToolRun(argv, stdout, stderr, -9 if late else proc.returncode, started, time.time(),
                   timed_out=late)
