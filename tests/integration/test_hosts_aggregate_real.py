"""The aggregate of several hosts against the I/O-level truth (issue 33 item 5).

A run on several hosts reads every aggregate latency percentile from the hosts' merged
json+ histograms (engine/aggregate.py). Here two hosts (network namespaces with their own
sshd, tests/support/netlab.py) each drive an emulated SSD, one at the model's time scale 1,
the other at 3, through the product's own agents and forwarded fio servers
(run/remote.py) with fio's per-I/O completion-latency log on: fio's servers send those
logs back to the client. Every I/O of both hosts, merged and sorted, is the truth; each
of the product's aggregate percentiles (p1 to p99.99, p99 and p99.9 among them) must
equal the truth's percentile of the same rank within
:func:`~ssdlab.engine.parser.bin_error_ns` of it (half a histogram bucket: at most 1/128
of the value). The logs are checked complete first: as many samples as fio
counted I/Os, host by host.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.engine.aggregate import aggregate_jobs
from ssdlab.engine.parser import bin_error_ns, parse_fio_output
from ssdlab.run.remote import prepare_remote
from tests.support.cli import ssdlab
from tests.support.netlab import NetLab

pytestmark = [pytest.mark.root, pytest.mark.fio]

#: 4 KiB random reads at QD 4 for 3 s on each host, every completion logged; fio reports
#: its default percentiles (1 to 99.99), every one of them is judged
JOB = """[global]
ioengine=libaio
direct=1
filename={path}
size=96m
bs=4k
rw=randread
iodepth=4
time_based=1
runtime=3
write_lat_log=truth
log_avg_msec=0
[cell]
"""
PERCENTILES = (50.0, 99.0, 99.9)


@pytest.fixture
def two_hosts(emu_run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Two hosts, h1's emulated SSD at time scale 1, h2's at 3; ssdlab's agents there."""
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    devices = []
    for i, scale in enumerate(("1", "3")):
        started = ssdlab("emulator", "start", "--name", f"agg{i + 1}", "--size", "128MiB",
                         "--time-scale", scale, "--loop", env=env)
        assert started.returncode == 0, started.stderr
        devices.append(next(line.split()[-1] for line in started.stdout.splitlines()
                            if "target:" in line))
    with NetLab(2, stranger=False) as net:
        monkeypatch.setenv("SSDLAB_SSH_CONFIG", str(net.ssh_config))
        monkeypatch.setenv("SSDLAB_AGENT_COMMAND",
                           f"env SSDLAB_EMU_RUN_DIR={emu_run_dir} {sys.executable} -m ssdlab")
        yield [f"h{i + 1}:{d}" for i, d in enumerate(devices)]


def _samples(path: Path) -> list[int]:
    """A fio latency log's values (ns): one line per I/O with log_avg_msec=0."""
    return [int(line.split(",")[1]) for line in path.read_text().splitlines() if line.strip()]


def _rank_value(ordered: list[int], pct: float) -> int:
    """The sample of rank ceil(pct % of n): fio's convention for a percentile."""
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def test_aggregate_percentiles_are_the_merged_logs_within_the_bin_error(
        two_hosts: list[str]) -> None:
    _, remote = prepare_remote(",".join(two_hosts), True, read_only=False)
    with remote.connected():
        sockets = [Path(h.socket) for h in remote.hosts]
        where = sockets[0].parent
        # relative socket names: fio's client names a returned log "<log>.<client>", so a
        # client called by a path would name a file in a directory that does not exist
        argv = ["fio", "--output-format=json+", "--eta=never"]
        for host, sock in zip(remote.hosts, sockets, strict=True):
            job = where / f"{sock.stem}.fio"
            job.write_text(JOB.format(path=host.target.path))
            argv += [f"--client=sock:{sock.name}", job.name]
        done = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        output = parse_fio_output(done.stdout)
        logs = {sock.name: _samples(where / f"truth_clat.1.log.{sock.name}")
                for sock in sockets}
    per_host = {job.host: job for job in output.jobs}
    assert sorted(per_host) == sorted(logs)
    for name, samples in logs.items():
        # the truth is complete: one logged latency per I/O fio counted
        assert len(samples) == per_host[name].read.total_ios > 1000, name
    merged = aggregate_jobs(output).jobs[0].read
    assert merged.total_ios == sum(len(s) for s in logs.values())
    truth = sorted(s for samples in logs.values() for s in samples)
    assert set(PERCENTILES) <= set(merged.clat_percentiles_ns)
    for pct, product in merged.clat_percentiles_ns.items():
        exact = _rank_value(truth, pct)
        assert abs(product - exact) <= bin_error_ns(product), (pct, product, exact)
    p99 = {name: _rank_value(sorted(s), 99.0) for name, s in logs.items()}
    print(f"p99 per host {p99}, aggregate {merged.clat_percentiles_ns[99.0]:.0f} ns, "
          f"I/Os {[len(s) for s in logs.values()]}", file=sys.stderr)
