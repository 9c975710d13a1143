"""What a run on several hosts keeps of each host: its part of every round (and when its
cells started), its steady state, its purge (the run's target as a whole is their
aggregate: run/remote.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ssdlab.engine.aggregate import by_host
from ssdlab.engine.client import ClientExecutor
from ssdlab.engine.model import JobResult
from ssdlab.engine.runner import Executor, FioRun
from ssdlab.jsonrecord import Record
from ssdlab.plan.results import HostPart, HostRoundEvent, JobSummary, Reason
from ssdlab.run.remote import RemoteSet
from ssdlab.targets.purge import PurgeOutcome

#: the hosts of the run: identity, versions, clock offset (once, and on resume)
HOSTS_KIND = "hosts"
#: each host's part of one round
HOST_ROUND_KIND = "host-round"
#: each host's emulator ground truth and health log
HOST_TRUTH_KIND = "host-truth"
#: each host's own steady-state verdict of a test (judged on the same rule as the run's)
HOST_VERDICT_KIND = "host-verdicts"


def job_summary(job: JobResult) -> JobSummary:
    """A host's job in a round, summarised."""
    pct = {**job.read.clat_percentiles_ns, **job.write.clat_percentiles_ns}
    return JobSummary(job.total_iops, job.total_bw_bytes_per_s,
                      pct[99.0] / 1000 if 99.0 in pct else None, job.error)


def host_summaries(per_host: Sequence[JobResult]) -> dict[str, HostPart]:
    """Each host's jobs in a round, summarised (for suites that say nothing more)."""
    return {host: HostPart(jobs={job.name: job_summary(job) for job in jobs})
            for host, jobs in by_host(per_host).items()}


def host_round_events(round_no: int, run: FioRun, phase: str,
                      hosts: dict[str, HostPart] | None) -> list[tuple[str, str, Record]]:
    """The events (kind, message, detail) of a round on several hosts: each host's part
    (``hosts``: what the suite made of it, else a summary of each host's jobs) and when
    its cells started, and a warning for each host that started late. None on one host."""
    if not run.per_host:
        return []
    per_host = hosts if hosts is not None else host_summaries(run.per_host)
    events: list[tuple[str, str, Record]] = [
        (HOST_ROUND_KIND, f"round {round_no} on {len(per_host)} hosts",
         HostRoundEvent(round_no, phase, per_host, run.start))]
    for host, why in (run.start.late if run.start is not None else {}).items():
        events.append(("warning", f"host {host} started round {round_no} late: {why}",
                       Reason(why)))
    return events


def remote_purge(remote: RemoteSet, method: str, offset: int, size: int) -> PurgeOutcome:
    """Every host's purge at once, as one outcome: ok when every host's was."""
    outcomes = remote.purge(method, offset, size)
    ok = all(o.ok for _, o in outcomes)
    detail = "; ".join(f"{host}: {'ok' if o.ok else 'FAILED'} ({o.detail})"
                       for host, o in outcomes)
    seconds = max(float(o.seconds) for _, o in outcomes)
    used = {o.method for _, o in outcomes}
    return PurgeOutcome(used.pop() if len(used) == 1 else method, ok, seconds, None, detail)


def host_series(events: Sequence[HostRoundEvent], names: Sequence[str]
                ) -> dict[str, list[dict[str, float]]]:
    """Each host's tracking variables round by round, from a test's host-round events."""
    series: dict[str, list[dict[str, float]]] = {}
    for event in sorted(events, key=lambda e: e.round):
        for host, part in event.hosts.items():
            tracking = part.tracking or {}
            series.setdefault(host, []).append({n: float(tracking[n]) for n in names
                                                if n in tracking})
    return series


def fio_logs(executor: Executor, path: str | Path) -> dict[str, Path]:
    """Where the log the last fio run of ``executor`` wrote as ``path`` (its job file's
    name) is: ``path`` itself (key ""), or on several hosts each host's copy, which fio's
    client wrote beside it (by host name: :meth:`ClientExecutor.log_copies`)."""
    if isinstance(executor, ClientExecutor):
        return {host: Path(p) for host, p in executor.log_copies(str(path)).items()}
    return {"": Path(path)}
