"""Run one job on several hosts at once through their fio servers (``fio --client``).

Each host's fio server is reached through a local socket (an ssh-forwarded one: see
``run/remote.py``); the job file is the run's, with the run's target name replaced by each
host's own target path. The output is fio's per-client results: :class:`FioRun` keeps
them per host (``per_host``, each job's ``host`` set to the host's name) and gives their
aggregate (``output``, :mod:`ssdlab.engine.aggregate`) to the suite, which sees one
target. Always json+, so latency percentiles merge from the histograms. With
``starts`` (run/startsync.py), each host's jobs wait for the round's common instant and
the run says when each host's cells started (``FioRun.start``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ssdlab.cpuidle import idle_policy
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.engine.aggregate import aggregate_jobs, by_host
from ssdlab.engine.runner import (
    FioRun,
    FioStopped,
    StopCheck,
    TickFn,
    parsed,
    run_watched,
)
from ssdlab.plan.round_start import RoundStart

__all__ = ["ClientExecutor", "ClientHost", "host_job_text"]


@dataclass(frozen=True)
class ClientHost:
    """One host's fio server as the coordinator reaches it."""

    name: str  # as the run names the host (its ssh name)
    socket: str  # the local socket forwarded to its fio server
    path: str  # the target's path on that host


class RoundStarts(Protocol):
    """Who makes the hosts' jobs of a round start together (run/startsync.py)."""

    def begin(self, job_text: str) -> Sequence[str] | None:
        """Each host's job text, its jobs waiting for the round's instants (None: the
        job text runs as it is)."""

    def waits_s(self) -> float:
        """How much longer than its jobs the round begun last may take (its waits)."""

    def end(self) -> RoundStart | None:
        """When each host's cells of the round began (None: not known)."""


def host_job_text(job_text: str, placeholder: str, path: str) -> str:
    """The run's job file for one host: ``filename=<placeholder>`` names its own path."""
    return job_text.replace(f"filename={placeholder}\n", f"filename={path}\n")


class ClientExecutor:
    """An :class:`~ssdlab.engine.runner.Executor` on several fio servers at once."""

    def __init__(self, hosts: Sequence[ClientHost], placeholder: str, *, fio: str = "fio",
                 read_only: bool = False, stop_check: StopCheck | None = None,
                 cpu_idle: str | None = None, starts: RoundStarts | None = None,
                 cwd: str | None = None) -> None:
        self.hosts = tuple(hosts)
        self.starts = starts  # rounds that start together
        #: where fio runs: the hosts' sockets are named relative to it (fio's client writes
        #: a log a host's job sends back as ``LOG.SOCKET``: :meth:`log_copies`)
        self.cwd = cwd
        self.placeholder = placeholder
        self.fio = fio
        self.read_only = read_only
        self.stop_check = stop_check  # e.g. "host h2 dropped" while fio runs
        self.cpu_idle = cpu_idle or idle_policy_env()

    def command(self, job_files: Sequence[str]) -> tuple[str, ...]:
        guard = ("--readonly",) if self.read_only else ()
        clients: list[str] = []
        for host, job_file in zip(self.hosts, job_files, strict=True):
            clients += [f"--client=sock:{host.socket}", job_file]
        return (self.fio, "--output-format=json+", "--eta=never", *guard, *clients)

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        with idle_policy(self.cpu_idle), tempfile.TemporaryDirectory(prefix="ssdlab-jobs-") as d:
            texts = self.starts.begin(job_text) if self.starts is not None else None
            files = []
            for index, host in enumerate(self.hosts):
                path = Path(d) / f"host{index + 1}.fio"
                text = job_text if texts is None else texts[index]
                path.write_text(host_job_text(text, self.placeholder, host.path))
                files.append(str(path))
            cmd = self.command(files)
            try:
                waits = 0.0 if texts is None or self.starts is None else self.starts.waits_s()
                done = run_watched(cmd, job_text, timeout_s + waits, on_tick,
                                   self.stop_check, "",
                                   cwd=Path(self.cwd) if self.cwd else None)
            except FioStopped as stopped:
                return replace(stopped.run, error=stopped.reason)
        run = self._per_host(parsed(done))
        if texts is not None and run.error is None and self.starts is not None:
            run = replace(run, start=self.starts.end())
        return run

    def log_copies(self, path: str) -> dict[str, str]:
        """Each host's copy of a log its job wrote as ``path`` (the job file's name), by
        host: fio's client writes what a server sends back at ``PATH.HOSTNAME``, the
        hostname being the socket as given (fio 3.33 client.c fio_client_handle_iolog)."""
        return {host.name: f"{path}.{host.socket}" for host in self.hosts}

    def _per_host(self, run: FioRun) -> FioRun:
        """The run with each job's host named, the aggregate as its output, and an error
        naming a host that returned no results."""
        if run.output is None:
            return run
        names = {host.socket: host.name for host in self.hosts}
        jobs = tuple(replace(job, host=names.get(job.host, job.host))
                     for job in run.output.jobs)
        found = by_host(jobs)
        missing = [host.name for host in self.hosts if host.name not in found]
        error = run.error
        if missing and error is None:
            error = (f"host {missing[0]} returned no results: its fio server stopped or "
                     "its connection dropped")
        counts = {len(found_jobs) for found_jobs in found.values()}
        if len(counts) > 1 and error is None:
            error = "the hosts returned different numbers of job results"
        output = aggregate_jobs(replace(run.output, jobs=jobs))
        return replace(run, output=output, per_host=jobs, error=error)
