"""The aggregate of several hosts judged against the I/O-level truth (issue 33 item 5).

:func:`run_logged` runs one job on every host of a connected :class:`RemoteSet` (the
product's agents and forwarded fio servers) with fio's per-I/O completion-latency log on:
fio's servers send each host's log back to the client. :func:`judge` checks the logs
complete (one sample per I/O fio counted, host by host) and every aggregate percentile the
product computes from the merged json+ histograms (engine/aggregate.py) against the merged,
sorted samples: the same rank, within :func:`~ssdlab.engine.parser.bin_error_ns`.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ssdlab.engine.aggregate import aggregate_jobs
from ssdlab.engine.model import FioOutput
from ssdlab.engine.parser import bin_error_ns, parse_fio_output
from ssdlab.run.remote import RemoteSet

#: 4 KiB random reads at QD 4 on each host for ``runtime`` s, every completion logged;
#: fio reports its default percentiles (1 to 99.99): every one of them is judged
JOB = """[global]
ioengine=libaio
direct=1
filename={path}
size={size}
bs=4k
rw=randread
iodepth=4
time_based=1
runtime={runtime}
write_lat_log=truth
log_avg_msec=0
[cell]
"""


@dataclass(frozen=True)
class Judged:
    """What the check found: each host's I/Os and own p99, and the aggregate's (ns)."""

    ios: dict[str, int]
    host_p99_ns: dict[str, int]
    p99_ns: float
    p99_9_ns: float


def run_logged(remote: RemoteSet, *, size: str = "96m", runtime: int = 3,
               timeout: float = 120) -> tuple[FioOutput, dict[str, list[int]]]:
    """The job on every host at once (``remote`` connected): fio's output and each host's
    logged latencies (ns), by the client name fio gives the host (its socket's name)."""
    sockets = [Path(h.socket) for h in remote.hosts]
    where = sockets[0].parent
    # relative socket names: fio's client names a returned log "<log>.<client>", so a
    # client called by a path would name a file in a directory that does not exist
    argv = ["fio", "--output-format=json+", "--eta=never"]
    for host, sock in zip(remote.hosts, sockets, strict=True):
        job = where / f"{sock.stem}.fio"
        job.write_text(JOB.format(path=host.target.path, size=size, runtime=runtime))
        argv += [f"--client=sock:{sock.name}", job.name]
    done = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    logs = {sock.name: _samples(where / f"truth_clat.1.log.{sock.name}") for sock in sockets}
    return parse_fio_output(done.stdout), logs


def judge(output: FioOutput, logs: dict[str, list[int]], min_ios: int) -> Judged:
    """The logs are the whole truth, and every aggregate percentile is the truth's."""
    per_host = {job.host: job for job in output.jobs}
    assert sorted(per_host) == sorted(logs)
    for name, samples in logs.items():
        # one logged latency per I/O fio counted
        assert len(samples) == per_host[name].read.total_ios >= min_ios, name
    merged = aggregate_jobs(output).jobs[0].read
    assert merged.total_ios == sum(len(s) for s in logs.values())
    truth = sorted(s for samples in logs.values() for s in samples)
    assert {99.0, 99.9} <= set(merged.clat_percentiles_ns)
    for pct, value in merged.clat_percentiles_ns.items():
        exact = rank_value(truth, pct)
        assert abs(value - exact) <= bin_error_ns(value), (pct, value, exact)
    return Judged({n: len(s) for n, s in logs.items()},
                  {n: rank_value(sorted(s), 99.0) for n, s in logs.items()},
                  merged.clat_percentiles_ns[99.0], merged.clat_percentiles_ns[99.9])


def rank_value(ordered: list[int], pct: float) -> int:
    """The sample of rank ceil(pct % of n): fio's convention for a percentile."""
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def _samples(path: Path) -> list[int]:
    """A fio latency log's values (ns): one line per I/O with log_avg_msec=0."""
    return [int(line.split(",")[1]) for line in path.read_text().splitlines() if line.strip()]
