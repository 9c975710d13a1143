#!/usr/bin/env python3
"""Benchmark: three hosts at once against each host alone (the coordinator is not the
bottleneck).

ssdlab runs one job on several hosts at once through fio's client/server mode: one
``fio --client`` on the coordinator drives each host's fio server through an ssh-forwarded
socket (src/ssdlab/run/remote.py, engine/client.py). This measures, side by side in one
run, what each host delivers alone and what all three deliver together:

  ceiling    first, once: host h1 alone with no rate limit, the fastest the emulated
             drive behind the whole path (ssh, fio server, loop device, FUSE) goes at
             this queue depth on this machine; the rate limit is chosen from it;
  alone      each host by itself: a RemoteSet of that one host (h1, h2, h3);
  together   all three at once: a RemoteSet of the three.

Every phase runs the same fio job: 4 KiB random reads, QD ``--iodepth`` (4), libaio,
O_DIRECT, time based, on a sequentially filled emulated SSD per host. The judged load is
**rate limited** (``rate_iops`` per host, by default ``--rate-fraction`` (0.1) of the
ceiling, rounded down to 100 IOPS), so that the machine's 2 CPUs do not limit it: the
three hosts together ask for far less than one host alone can do. The claim: the
aggregate IOPS of the three at once are at least ``--min-ratio`` (0.95) of the sum of
the three single-host figures (median of the repetitions' ratios; every repetition is
recorded). The same phases without the rate limit are recorded too, as information
only: there the hosts share 2 CPUs, so together cannot reach the sum of alone, and that
says nothing about the coordinator.

Recorded per fio run: the aggregate and per-host IOPS and latency, fio's own usr/sys
CPU per host, how far apart the hosts' jobs started (together: they wait for a common
instant, docs/hosts.md), the wall clock of the ``fio --client`` run against its ramp +
runtime (with that wait),
and the CPU use over the run: the machine's busy share (/proc/stat, all namespaces share
the CPUs), split into the coordinator's fio client (getrusage(RUSAGE_CHILDREN) around
the run), the coordinator's Python and ssh connections, the hosts' processes (their fio
servers and jobs; sshd and the agents), the emulator daemons, kernel threads and other
processes on the machine. Repetitions (default 3) rotate the order of the four phases.
Results: bench/results/multi_host.json and .md. Needs root (network namespaces, sshd,
/dev/fuse); only the emulated SSDs this script starts are written (the fill, locally);
the phases only read, through agents that hold the targets read-only.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recording import cpu_model, recorded_args, write_results
from ssdlab import __version__
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.engine.model import JobResult
from ssdlab.engine.runner import FioInterrupted, FioRun
from ssdlab.errors import UserError
from ssdlab.run.agent_wire import HostError
from ssdlab.run.remote import RemoteSet, Ssh
from ssdlab.units import parse_size

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # for tests.support.netlab, the lab of hosts the tests use

from tests.support.netlab import NetLab, netlab_unavailable  # noqa: E402

RESULT_NAME = "multi_host"
HOSTS = ("h1", "h2", "h3")
TOGETHER = "all"
PHASES = (*HOSTS, TOGETHER)
LIMITED, UNLIMITED = "rate-limited", "unlimited"
JOB_NAME = "randread-4k"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: fio's client run ends this long at most after the job's own time (connection, results)
TIMEOUT_MARGIN_S = 60.0
CONNECT_ATTEMPTS = 3
CONNECT_RETRY_S = 2.0
PERCENTILES = (50.0, 99.0)
#: a run is disturbed when processes of no part of this benchmark used more than this
#: share of one CPU meanwhile (other people's tests on a shared machine), or another fio ran
DISTURBED_CPU_PCT = 10.0
#: a rate-limited fio job using more than this share of a CPU busy-waits between I/Os
SPIN_CPU_PCT = 50.0


class Interrupted(Exception):
    """SIGTERM or SIGHUP: handled like Ctrl-C, so the emulators are stopped."""


def _on_signal(signum: int, _frame: object) -> None:
    raise Interrupted(f"stopped by signal {signal.Signals(signum).name}")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------- CPU accounting


def _netns_inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


@dataclass(frozen=True)
class Proc:
    comm: str
    ppid: int
    own_ticks: int  # utime + stime
    child_ticks: int  # cutime + cstime (children it has waited for)
    netns: int  # inode of its network namespace (0 when unreadable)


def _proc(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        netns = os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    # after the comm: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 0-based
    return Proc(comm, int(fields[1]), int(fields[11]) + int(fields[12]),
                int(fields[13]) + int(fields[14]), netns)


def snapshot() -> dict[int, Proc]:
    """Every process of the machine, read from /proc (no child process is started)."""
    found: dict[int, Proc] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            proc = _proc(int(entry.name))
            if proc is not None:
                found[int(entry.name)] = proc
    return found


def machine_ticks() -> dict[str, int]:
    """The whole machine's CPU time by kind, in clock ticks (the first line of /proc/stat)."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    values = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    return dict(zip(names, (int(v) for v in values), strict=True))


def _busy(ticks: dict[str, int]) -> int:
    return sum(ticks[k] for k in ("user", "nice", "system", "irq", "softirq"))


@dataclass
class Ours:
    """The processes of this benchmark, by role."""

    lab_netns: set[int]  # the hosts' network namespaces (inodes)
    emulator_pids: set[int]
    tunnel_pids: set[int] = field(default_factory=set)  # the coordinator's ssh connections

    def role(self, pid: int, proc: Proc, tree: set[int]) -> str:
        if proc.netns in self.lab_netns:
            return "hosts_fio" if proc.comm == "fio" else "hosts_sshd_agent"
        if pid in self.tunnel_pids:
            return "coordinator_ssh"
        if pid in self.emulator_pids:
            return "emulators"
        if pid == 2 or proc.ppid == 2:
            return "kernel_threads"
        if pid in tree:
            return "coordinator_other"
        return "other_processes"


def _descendants(procs: dict[int, Proc], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, proc in procs.items():
        children.setdefault(proc.ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


@dataclass
class CpuWindow:
    """CPU use over one fio run, by role (CPU seconds) and the machine's busy share."""

    ours: Ours
    wall_s: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)
    machine: dict[str, float] = field(default_factory=dict)
    foreign_fio: list[int] = field(default_factory=list)

    def __enter__(self) -> CpuWindow:
        self._procs0 = snapshot()
        self._ticks0 = machine_ticks()
        self._self0 = resource.getrusage(resource.RUSAGE_SELF)
        self._kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.monotonic() - self._t0
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        me = resource.getrusage(resource.RUSAGE_SELF)
        ticks = machine_ticks()
        procs = snapshot()
        k0, s0 = self._kids0, self._self0
        seconds = {
            # the fio client is the one child this process waits for during the run
            "coordinator_fio_client_user": kids.ru_utime - k0.ru_utime,
            "coordinator_fio_client_sys": kids.ru_stime - k0.ru_stime,
            "coordinator_python": me.ru_utime + me.ru_stime - s0.ru_utime - s0.ru_stime,
        }
        for role, value in role_seconds(self._procs0, procs, self.ours).items():
            seconds[role] = seconds.get(role, 0.0) + value
        tree = _descendants(procs, os.getpid())
        self.foreign_fio = sorted(
            pid for pid, proc in procs.items()
            if proc.comm == "fio" and self.ours.role(pid, proc, tree) == "other_processes")
        processes = sum(seconds.values())
        busy = (_busy(ticks) - _busy(self._ticks0)) / CLK_TCK
        seconds["proc_stat_minus_processes"] = busy - processes
        self.seconds = {k: round(v, 3) for k, v in sorted(seconds.items())}
        capacity = self.wall_s * (os.cpu_count() or 1)
        self.machine = {
            "busy_pct": 100 * busy / capacity,
            "processes_pct": 100 * processes / capacity,
            "busy_cpu_s": busy,
            "processes_cpu_s": processes,
            **{f"{k}_pct": 100 * (ticks[k] - self._ticks0[k]) / CLK_TCK / capacity
               for k in ("user", "system", "softirq", "iowait", "steal")},
        }


def role_seconds(before: dict[int, Proc], after: dict[int, Proc], ours: Ours
                 ) -> dict[str, float]:
    """CPU seconds of every process between two snapshots, by role (this process left out:
    getrusage counts it). The run times the kernel keeps per process are exact (it scales
    the tick-sampled user/system split to the scheduler's run time)."""
    tree = _descendants(after, os.getpid())
    out: dict[str, float] = {}
    for pid, proc in after.items():
        if pid == os.getpid():
            continue
        role = ours.role(pid, proc, tree)
        # the hosts' processes with the children they reaped meanwhile (fio's job
        # processes); of any other process only its own time: a parent that reaps a
        # long-lived child would add the child's whole life
        children = role.startswith("hosts_")
        was = before.get(pid)
        ticks = proc.own_ticks + (proc.child_ticks if children else 0)
        if was is not None:
            ticks -= was.own_ticks + (was.child_ticks if children else 0)
        out[role] = out.get(role, 0.0) + ticks / CLK_TCK
    for pid, was in before.items():
        role = ours.role(pid, was, set())
        if pid not in after and role.startswith("hosts_"):
            # gone: its parent on the host reaped it, and that parent's children's time
            # now holds all of it, the part counted in an earlier window too
            out[role] = out.get(role, 0.0) - (was.own_ticks + was.child_ticks) / CLK_TCK
    return out


# --------------------------------------------------------------------------- emulated SSDs


def ssdlab_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssdlab", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, check=False, timeout=120)


def start_emulators(args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    """One emulated SSD per host with a loop device over it: the loop devices."""
    devices = []
    for host in HOSTS:
        done = ssdlab_cli("emulator", "start", "--name", f"mh-{host}", "--profile",
                          args.profile, "--size", str(args.size), "--loop", env=env)
        if done.returncode != 0:
            raise RuntimeError(f"emulator start failed: {done.stderr.strip()}")
        found = re.search(r"target: (/dev/loop\d+)", done.stdout)
        if found is None:
            raise RuntimeError(f"emulator start named no loop device: {done.stdout.strip()}")
        devices.append(found.group(1))
    return devices


def emulator_pids(run_dir: Path) -> set[int]:
    pids = set()
    for host in HOSTS:
        state = json.loads((run_dir / f"mh-{host}.json").read_text())
        pids.add(int(state["pid"]))
    return pids


def fill(devices: Sequence[str]) -> list[dict[str, Any]]:
    """Each drive written once, sequentially (1 MiB, QD 8), all at once: the reads then
    read mapped pages (an unmapped page costs the emulator no NAND read)."""
    procs = [subprocess.Popen(
        ["fio", "--name=fill", f"--filename={dev}", "--rw=write", "--bs=1m", "--direct=1",
         "--ioengine=libaio", "--iodepth=8", "--output-format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for dev in devices]
    out = []
    for dev, proc in zip(devices, procs, strict=True):
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"filling {dev} failed: {stderr.strip()}")
        job = json.loads(stdout[stdout.index("{"):])["jobs"][0]["write"]
        out.append({"device": dev, "bytes": job["io_bytes"], "mb_s": job["bw_bytes"] / 1e6})
    return out


# --------------------------------------------------------------------------- fio runs


def job_text(spec: str, args: argparse.Namespace, rate_iops: int | None,
             runtime_s: float) -> str:
    lines = [
        "[global]", "ioengine=libaio", "direct=1", "rw=randread", "bs=4k",
        f"iodepth={args.iodepth}", "norandommap=1", "randrepeat=0", "time_based=1",
        f"ramp_time={int(args.ramp * 1000)}ms", f"runtime={int(runtime_s * 1000)}ms",
        "group_reporting=1", "", f"[{JOB_NAME}]", f"filename={spec}",
    ]
    if rate_iops is not None:
        lines.append(f"rate_iops={rate_iops}")
    return "\n".join(lines) + "\n"


def _latency_us(job: JobResult) -> dict[str, float]:
    pcts = job.read.clat_percentiles_ns
    out = {f"p{p:g}": pcts[p] / 1e3 for p in PERCENTILES if p in pcts}
    out["mean"] = job.read.clat_mean_ns / 1e3
    return out


def _host_figures(job: JobResult) -> dict[str, Any]:
    return {"iops": job.total_iops, "ios": job.read.total_ios + job.write.total_ios,
            "fio_usr_cpu_pct": job.usr_cpu_pct, "fio_sys_cpu_pct": job.sys_cpu_pct,
            "runtime_ms": job.job_runtime_ms, "clat_us": _latency_us(job)}


def command_as_recorded(run: FioRun, remote: RemoteSet) -> list[str]:
    """The fio client's command with the forwarded sockets and job files by name (they
    are temporary files of the machine)."""
    names = {f"--client=sock:{h.socket}": f"--client=sock:SOCKET_{h.name}"
             for h in remote.hosts}
    out = []
    for arg in run.command:
        if arg in names:
            out.append(names[arg])
        elif arg.endswith(".fio"):
            out.append(f"JOBFILE_{Path(arg).stem}")
        else:
            out.append(Path(arg).name if arg == run.command[0] else arg)
    return out


def fio_run(remote: RemoteSet, ours: Ours, text: str, runtime_s: float,
            args: argparse.Namespace) -> dict[str, Any]:
    """One fio client run on the connected hosts, with the CPU use over it."""
    executor = remote.executor()
    ours.tunnel_pids = {h.tunnel.pid for h in remote.hosts if h.tunnel is not None}
    with CpuWindow(ours) as cpu:
        run = executor.run(text, args.ramp + runtime_s + TIMEOUT_MARGIN_S, json_plus=True)
    if not run.ok or run.output is None:
        raise RuntimeError(f"fio on {remote.spec()} failed: {run.error}")
    total = run.output.jobs[0]
    client_s = cpu.seconds["coordinator_fio_client_user"] + \
        cpu.seconds["coordinator_fio_client_sys"]
    return {
        "iops": total.total_iops,
        "clat_us": _latency_us(total),
        "per_host": {job.host: _host_figures(job) for job in run.per_host},
        "wall_s": cpu.wall_s,
        "client_overhead_s": cpu.wall_s - args.ramp - runtime_s,
        "cpu_s": cpu.seconds,
        "machine_cpu": cpu.machine,
        "coordinator_fio_client_cpu_pct": 100 * client_s / cpu.wall_s,
        "foreign_fio": cpu.foreign_fio,
        "command": command_as_recorded(run, remote),
        # several hosts: how far apart their jobs started (docs/hosts.md); None alone
        "round_start_skew_s": run.start.skew_s if run.start is not None else None,
    }


def _diagnose(remote: RemoteSet) -> list[str]:
    """What each host's agent says of its target right now (after a failed connect)."""
    said = []
    for host in remote.hosts:
        try:
            remote.ssh.call(host.name, "check", "--target", host.target.path, "--read-only",
                            timeout=30)
            said.append(f"{host.name}: check passes now")
        except HostError as err:
            said.append(str(err))
    return said


def connect(remote: RemoteSet, failures: list[dict[str, Any]]) -> contextlib.ExitStack:
    """``remote`` connected (its agents serving, their fio servers forwarded), retried
    after a failure: each failure is recorded with what the agents say just after it."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(remote.connected())
            return stack
        except (HostError, ValueError) as exc:  # ValueError: a lost reason (bench/README.md)
            stack.close()
            failures.append({"hosts": remote.spec(), "attempt": attempt,
                             "error": f"{type(exc).__name__}: {exc}",
                             "agents_after": _diagnose(remote)})
            say(f"connecting {remote.spec()} failed ({failures[-1]['error']}); "
                f"agents say: {'; '.join(failures[-1]['agents_after'])}")
            time.sleep(CONNECT_RETRY_S)
    raise RuntimeError(f"could not connect {remote.spec()} in {CONNECT_ATTEMPTS} attempts")


def phase(name: str, sets: dict[str, RemoteSet], ours: Ours, rate_iops: int,
          args: argparse.Namespace, failures: list[dict[str, Any]]
          ) -> dict[str, dict[str, Any]]:
    """One phase (a host alone, or all together): the rate-limited job, then the
    unlimited one, on one connection of its hosts."""
    remote = sets[name]
    started = time.monotonic()
    with connect(remote, failures):
        connect_s = time.monotonic() - started
        out = {
            LIMITED: fio_run(remote, ours, job_text(remote.spec(), args, rate_iops,
                                                    args.runtime), args.runtime, args),
            UNLIMITED: fio_run(remote, ours, job_text(remote.spec(), args, None,
                                                      args.unlimited_runtime),
                               args.unlimited_runtime, args),
        }
    for result in out.values():
        result["connect_s"] = connect_s
    return out


def ceiling(sets: dict[str, RemoteSet], ours: Ours, args: argparse.Namespace,
            failures: list[dict[str, Any]]) -> dict[str, Any]:
    remote = sets[HOSTS[0]]
    with connect(remote, failures):
        text = job_text(remote.spec(), args, None, args.unlimited_runtime)
        return fio_run(remote, ours, text, args.unlimited_runtime, args)


def choose_rate(ceiling_iops: float, args: argparse.Namespace) -> int:
    if args.rate_iops is not None:
        return int(args.rate_iops)
    return max(100, int(ceiling_iops * args.rate_fraction) // 100 * 100)


# --------------------------------------------------------------------------- summary


def _fio_cpu(host: dict[str, Any]) -> float:
    return float(host["fio_usr_cpu_pct"] + host["fio_sys_cpu_pct"])


def _row(rep: dict[str, Any], load: str) -> dict[str, Any]:
    alone = {h: rep[h][load]["iops"] for h in HOSTS}
    together = rep[TOGETHER][load]
    alone_sum = sum(alone.values())
    busy_alone = [rep[h][load]["machine_cpu"]["busy_pct"] for h in HOSTS]
    procs_alone = [rep[h][load]["machine_cpu"]["processes_pct"] for h in HOSTS]
    client_alone = [rep[h][load]["coordinator_fio_client_cpu_pct"] for h in HOSTS]
    return {
        "alone": alone,
        "alone_sum": alone_sum,
        "together": together["iops"],
        "together_per_host": {h: v["iops"] for h, v in together["per_host"].items()},
        "ratio": together["iops"] / alone_sum,
        "machine_busy_pct_alone_mean": statistics.fmean(busy_alone),
        "machine_busy_pct_together": together["machine_cpu"]["busy_pct"],
        "processes_cpu_pct_alone_mean": statistics.fmean(procs_alone),
        "processes_cpu_pct_together": together["machine_cpu"]["processes_pct"],
        "fio_client_cpu_pct_alone_mean": statistics.fmean(client_alone),
        "fio_client_cpu_pct_together": together["coordinator_fio_client_cpu_pct"],
        "fio_job_cpu_pct_per_host_alone_mean": statistics.fmean(
            _fio_cpu(rep[h][load]["per_host"][h]) for h in HOSTS),
        "fio_job_cpu_pct_per_host_together_mean": statistics.fmean(
            _fio_cpu(v) for v in together["per_host"].values()),
        "p99_us_alone_mean": statistics.fmean(rep[h][load]["clat_us"]["p99"] for h in HOSTS),
        "p99_us_together": together["clat_us"]["p99"],
        "client_overhead_s_alone_mean": statistics.fmean(
            rep[h][load]["client_overhead_s"] for h in HOSTS),
        "client_overhead_s_together": together["client_overhead_s"],
    }


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in rows[0].items():
        if isinstance(value, dict):
            out[key] = {k: statistics.median(r[key][k] for r in rows) for k in value}
        else:
            out[key] = statistics.median(r[key] for r in rows)
    return out


def cpu_by_role(reps: list[dict[str, Any]], load: str) -> dict[str, dict[str, float]]:
    """Mean CPU share (% of one CPU) of each role, alone (mean of the hosts) and together."""
    out: dict[str, dict[str, float]] = {}
    for where, names in (("alone", HOSTS), ("together", (TOGETHER,))):
        runs = [rep[name][load] for rep in reps for name in names]
        roles = sorted({role for run in runs for role in run["cpu_s"]})
        out[where] = {role: statistics.fmean(100 * run["cpu_s"].get(role, 0.0) / run["wall_s"]
                                             for run in runs) for role in roles}
    return out


def disturbance(run: dict[str, Any]) -> str | None:
    """Why a run was disturbed by other work on the machine, or None."""
    other = 100 * run["cpu_s"].get("other_processes", 0.0) / run["wall_s"]
    why = []
    if other > DISTURBED_CPU_PCT:
        why.append(f"other processes used {other:.0f} % of a CPU")
    if run["foreign_fio"]:
        why.append(f"{len(run['foreign_fio'])} fio processes of others ran")
    return ", ".join(why) or None


def summarise(reps: list[dict[str, Any]], ceil: dict[str, Any], rate_iops: int,
              args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for load in (LIMITED, UNLIMITED):
        rows = [_row(rep, load) for rep in reps]
        out[load] = {"repetitions": rows, "median": _median_row(rows),
                     "cpu_pct_of_one_cpu_by_role": cpu_by_role(reps, load)}
    ratio = out[LIMITED]["median"]["ratio"]
    failures = []
    if ratio < args.min_ratio:
        failures.append(f"rate-limited: aggregate / sum of alone = {ratio:.3f} "
                        f"(median) < {args.min_ratio}")
    asked = len(HOSTS) * rate_iops
    if asked > args.max_load * ceil["iops"]:
        failures.append(f"the load is not one the CPUs do not limit: {len(HOSTS)} x "
                        f"{rate_iops} IOPS = {asked} > {args.max_load} x the ceiling "
                        f"({ceil['iops']:,.0f} IOPS)")
    disturbed = [f"repetition {i + 1}, {name}, {load}: {why}"
                 for i, rep in enumerate(reps) for name, loads in rep.items()
                 for load, r in loads.items() if (why := disturbance(r))]
    out.update({
        "ceiling_iops": ceil["iops"],
        "rate_iops_per_host": rate_iops,
        "rate_share_of_ceiling": rate_iops / ceil["iops"],
        "asked_together_share_of_ceiling": asked / ceil["iops"],
        "ratio_median": ratio,
        "ratio_min": min(r["ratio"] for r in out[LIMITED]["repetitions"]),
        "verdict": "FAIL" if failures else "PASS",
        "failures": failures,
        "disturbed": disturbed,
        "fio_spins": spins(reps),
    })
    return out


# --------------------------------------------------------------------------- report


def _table(s: dict[str, Any], load: str) -> list[str]:
    lines = [
        "| repetition | h1 alone | h2 alone | h3 alone | sum alone | all three at once "
        "| together / sum | machine CPU: processes, alone / together | machine CPU: "
        "/proc/stat, alone / together | fio client CPU alone / together "
        "| p99 alone / together |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = s[load]["repetitions"]
    for label, row in [*((str(i + 1), r) for i, r in enumerate(rows)),
                       ("**median**", s[load]["median"])]:
        alone = " | ".join(f"{row['alone'][h]:,.0f}" for h in HOSTS)
        lines.append(
            f"| {label} | {alone} | {row['alone_sum']:,.0f} | {row['together']:,.0f} | "
            f"{row['ratio']:.3f} | {row['processes_cpu_pct_alone_mean']:.0f} % / "
            f"{row['processes_cpu_pct_together']:.0f} % | "
            f"{row['machine_busy_pct_alone_mean']:.0f} % / "
            f"{row['machine_busy_pct_together']:.0f} % | "
            f"{row['fio_client_cpu_pct_alone_mean']:.1f} % / "
            f"{row['fio_client_cpu_pct_together']:.1f} % | "
            f"{row['p99_us_alone_mean']:,.0f} / {row['p99_us_together']:,.0f} us |")
    return lines


def _roles(s: dict[str, Any], load: str) -> list[str]:
    by = s[load]["cpu_pct_of_one_cpu_by_role"]
    med = s[load]["median"]
    roles = sorted(set(by["alone"]) | set(by["together"]))
    lines = ["| CPU used by | one host alone | three at once |", "| --- | --- | --- |"]
    for role in roles:
        lines.append(f"| {role} | {by['alone'].get(role, 0.0):.1f} % | "
                     f"{by['together'].get(role, 0.0):.1f} % |")
    lines.append(f"| (fio's own usr+sys of each host's job, median) | "
                 f"{med['fio_job_cpu_pct_per_host_alone_mean']:.1f} % | "
                 f"{med['fio_job_cpu_pct_per_host_together_mean']:.1f} % per host |")
    return lines


def markdown(doc: dict[str, Any]) -> str:
    s, a, m = doc["summary"], doc["args"], doc["machine"]
    med = s[LIMITED]["median"]
    lines = [
        "# Three hosts at once against each host alone",
        "",
        f"Measured {doc['date']} on {m['cpu_count']} CPUs ({m['cpu_model']}), kernel "
        f"{m['kernel']}, {m['fio']}, ssdlab {doc['versions']['ssdlab']}; "
        f"{a['repetitions']} repetitions, phase order rotated. Produced by "
        "`bench/multi_host.py`; every number is in `multi_host.json`.",
        "",
        f"**Load (judged): {doc['load']['judged']}**",
        "",
        f"Rate: {s['rate_iops_per_host']:,} IOPS per host = "
        f"{s['rate_share_of_ceiling']:.3f} of the ceiling ({s['ceiling_iops']:,.0f} IOPS: h1 "
        "alone, no rate limit); the three hosts together ask for "
        f"{s['asked_together_share_of_ceiling']:.2f} of what one host alone can do.",
        "",
        f"**Verdict: {s['verdict']}**: all three at once delivered {med['ratio']:.3f} of the "
        f"sum of each host alone (median of the repetitions; lowest {s['ratio_min']:.3f}; "
        f"claim >= {a['min_ratio']}).",
        "",
    ]
    lines += [f"* FAIL: {f}" for f in s["failures"]]
    if s["disturbed"]:
        runs = len(doc["repetitions"]) * len(PHASES) * 2
        lines += ["", f"**{len(s['disturbed'])} of {runs} runs were disturbed** by work "
                  "outside this benchmark (more than "
                  f"{DISTURBED_CPU_PCT:.0f} % of a CPU, or another fio): the rate-limited "
                  "figures hold regardless, the unlimited ones (CPU-bound) do not.", ""]
        lines += [f"* {d}" for d in s["disturbed"]]
    if s["connect_failures"]:
        lines += ["", f"**Connecting a phase's hosts failed {len(s['connect_failures'])} "
                  "time(s) and was retried** (what the agents said right after is in the "
                  "JSON):", ""]
        lines += [f"* {f['hosts']}, attempt {f['attempt']}: {f['error']}"
                  for f in s["connect_failures"]]
    lines += ["", f"## Rate-limited ({s['rate_iops_per_host']:,} IOPS per host, "
              f"{a['runtime']:g} s)", "", "IOPS:", "", *_table(s, LIMITED), "",
              "CPU use over the runs (% of one CPU; the machine has "
              f"{m['cpu_count']}):", "", *_roles(s, LIMITED), ""]
    unl = s[UNLIMITED]["median"]
    lines += ["## Unlimited (information only: CPU-bound)", "",
              f"The same job without `rate_iops` ({a['unlimited_runtime']:g} s). On "
              f"{m['cpu_count']} CPUs this is CPU-bound: one host alone keeps "
              f"{unl['processes_cpu_pct_alone_mean']:.0f} % of the machine busy (its fio "
              "job, the loop device's worker, the FUSE emulator daemon: the processes' run "
              "times), so three hosts would need about "
              f"{3 * unl['processes_cpu_pct_alone_mean']:.0f} % of the same "
              f"{m['cpu_count']} CPUs; together they got "
              f"{unl['processes_cpu_pct_together']:.0f} %. The ratio here measures the "
              "CPUs, not the coordinator.", "",
              *_table(s, UNLIMITED), "", *_roles(s, UNLIMITED), ""]
    lines += notes(doc)
    return "\n".join(lines) + "\n"


def spins(reps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rate-limited runs in which a host's fio job used more than SPIN_CPU_PCT of a CPU:
    it busy-waited between I/Os instead of sleeping (see spin_note)."""
    return [{"repetition": i + 1, "phase": name, "host": host,
             "fio_cpu_pct": _fio_cpu(figures)}
            for i, rep in enumerate(reps) for name in PHASES
            for host, figures in rep[name][LIMITED]["per_host"].items()
            if _fio_cpu(figures) > SPIN_CPU_PCT]


def spin_note(s: dict[str, Any]) -> list[str]:
    if not s["fio_spins"]:
        return []
    where = "; ".join(f"repetition {x['repetition']}, {x['phase']}: {x['host']} "
                      f"{x['fio_cpu_pct']:.0f} %" for x in s["fio_spins"])
    return [
        "* **fio busy-waited in some rate-limited runs** (its own usr+sys CPU: "
        f"{where}), which is what raises the CPU of those runs, not the coordinator. fio "
        "sleeps between rate-limited I/Os with nanosleep, except for waits shorter than "
        "the longest 1 us nanosleep it has timed (ten at each job start), which it spins "
        "through. A job that starts while the 2 CPUs are busy (the three hosts' jobs "
        "starting at once, or other work on the machine) can time a long nanosleep and "
        "then spin for its whole run (reproduced with "
        "a plain local fio server: a rate-limited job started while the CPUs were busy "
        "used 89 % of a CPU in 1 of 4 tries, 0-8 % otherwise). The rate is held either "
        "way."]


def notes(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    lim, unl = s[LIMITED]["median"], s[UNLIMITED]["median"]
    return [
        "## Notes", "",
        "* *machine CPU*, as a share of all CPUs over the fio client's run (the hosts are "
        "network namespaces: they share this machine's CPUs), measured two ways. "
        "*processes*: the run time of every process on the machine (the kernel keeps it "
        "exactly per process), the sum of the roles below. */proc/stat*: user + nice + "
        "system + irq + softirq, which this kernel samples at its timer tick (tick-based "
        "accounting, the tick stopped on idle CPUs): it misses short bursts that begin "
        "after an idle CPU wakes and end before its next tick, most of this load's work "
        "on a quiet machine, where it reads lower than the processes' sum "
        "(*proc_stat_minus_processes* negative). *fio client CPU*: the coordinator's "
        "`fio --client` process "
        "(getrusage(RUSAGE_CHILDREN) around the run), % of one CPU.",
        "* Roles: *coordinator_fio_client_** the `fio --client`; *coordinator_python* this "
        "script (ssdlab's executor, the watchdog, the JSON parsing); *coordinator_ssh* the "
        "ssh connections forwarding the fio servers' sockets; *hosts_fio* the hosts' fio "
        "servers and their jobs; *hosts_sshd_agent* their sshd and ssdlab agents; "
        "*emulators* the three emulator daemons; *kernel_threads* loop workers, softirq "
        "threads and other kernel threads (of the whole machine); *other_processes* "
        "anything else on the machine (processes that came and went within a run are "
        "missed).",
        *spin_note(s),
        "* Wall clock of one `fio --client` run beyond its ramp + runtime (starting the "
        "client, sending the job, starting the job on each server, collecting results): "
        f"rate-limited {lim['client_overhead_s_alone_mean']:.2f} s alone, "
        f"{lim['client_overhead_s_together']:.2f} s together; unlimited "
        f"{unl['client_overhead_s_alone_mean']:.2f} s alone, "
        f"{unl['client_overhead_s_together']:.2f} s together (medians). Each phase also "
        "connects (ssh, the agent's checks, fio server start): "
        f"{doc['summary']['connect_s_median']:.2f} s (median), outside the timed runs. "
        "About 1 s of each run's start-up is fio's own client/server mode (fio 3.33), with "
        "or without ssh: a server's connection process, idle between jobs, reads the "
        "next command only every second, so the client's \"run\" waits there; each "
        "server wakes on its own, so the hosts would start their jobs a few tenths of a "
        "second apart (bench/README.md). Together, each host's job waits for a common "
        "instant instead (docs/hosts.md), about 2.5 s after the client starts: the longer "
        "wall clock together; the hosts' starts were "
        f"{_skews_ms(doc)} apart. IOPS are per host over its own runtime, so the sum is "
        "exact.",
        "",
    ]


# --------------------------------------------------------------------------- main


def machine_facts() -> dict[str, Any]:
    model = cpu_model()
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True, check=False)
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
    return {
        "cpu_model": model or platform.processor() or "unknown",
        "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "fio": fio.stdout.strip(),
        "ssh": ssh.stderr.strip(),
        "cpu_idle_policy": idle_policy_env(),
        "loadavg_start": list(os.getloadavg()),
    }


def _skews_ms(doc: dict[str, Any]) -> str:
    """The together runs' start skews (their range, in ms)."""
    skews = [1000 * run["round_start_skew_s"] for rep in doc["repetitions"]
             for run in rep["all"].values() if run.get("round_start_skew_s") is not None]
    return f"{min(skews):.1f}-{max(skews):.1f} ms" if skews else "not measured"


def host_records(remote: RemoteSet) -> list[dict[str, Any]]:
    return [{"host": h.name, "target": h.target.path, "fio": h.hello.fio,
             "ssdlab": h.hello.ssdlab, "clock_offset_s": round(h.clock_offset_s, 3)}
            for h in remote.hosts]


def measure(args: argparse.Namespace, lab: NetLab, devices: list[str], run_dir: Path
            ) -> dict[str, Any]:
    ssh = Ssh(config=str(lab.ssh_config),
              agent=("env", f"SSDLAB_EMU_RUN_DIR={run_dir}", sys.executable, "-m", "ssdlab"))
    specs = {h: f"{h}:{d}" for h, d in zip(HOSTS, devices, strict=True)}
    specs[TOGETHER] = ",".join(specs[h] for h in HOSTS)
    sets = {name: RemoteSet.checked(spec, False, read_only=True, ssh=ssh)
            for name, spec in specs.items()}
    ours = Ours({_netns_inode(h.netns) for h in lab.hosts}, emulator_pids(run_dir))
    say(f"ceiling: {HOSTS[0]} alone, no rate limit, {args.unlimited_runtime:g} s")
    failures: list[dict[str, Any]] = []
    ceil = ceiling(sets, ours, args, failures)
    rate = choose_rate(ceil["iops"], args)
    say(f"ceiling {ceil['iops']:,.0f} IOPS: rate limit {rate:,} IOPS per host")
    reps = []
    for rep in range(args.repetitions):
        order = PHASES[rep % len(PHASES):] + PHASES[: rep % len(PHASES)]
        results = {}
        for name in order:
            results[name] = phase(name, sets, ours, rate, args, failures)
            say(f"repetition {rep + 1}/{args.repetitions} {name}: " + ", ".join(
                f"{load} {r['iops']:,.0f} IOPS" for load, r in results[name].items()))
        reps.append({name: results[name] for name in PHASES})
    summary = summarise(reps, ceil, rate, args)
    summary["connect_s_median"] = statistics.median(
        rep[name][LIMITED]["connect_s"] for rep in reps for name in PHASES)
    summary["connect_failures"] = failures
    return {
        "hosts": host_records(sets[TOGETHER]),
        "ceiling": ceil,
        "job_files": {LIMITED: job_text(specs[TOGETHER], args, rate, args.runtime),
                      UNLIMITED: job_text(specs[TOGETHER], args, None,
                                          args.unlimited_runtime)},
        "repetitions": reps,
        "summary": summary,
    }


def load_named(args: argparse.Namespace, rate: int) -> dict[str, str]:
    drive = (f"a {args.size // 2**20} MiB {args.profile} emulated SSD per host (loop "
             "device, filled sequentially once)")
    return {
        "judged": f"rate-limited 4 KiB random reads, {rate:,} IOPS per host (fio "
                  f"rate_iops), QD {args.iodepth}, libaio, direct, {args.runtime:g} s after "
                  f"a {args.ramp:g} s ramp, on {drive}",
        "information": f"the same without a rate limit ({args.unlimited_runtime:g} s): "
                       f"CPU-bound on {os.cpu_count()} CPUs",
    }


def run(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    env = {"SSDLAB_EMU_RUN_DIR": str(run_dir)}
    try:
        say(f"starting {len(HOSTS)} emulated SSDs ({args.profile}, {args.size // 2**20} MiB)")
        devices = start_emulators(args, env)
        say(f"filling {', '.join(devices)}")
        filled = fill(devices)
        with NetLab(len(HOSTS), stranger=False) as lab:
            doc = measure(args, lab, devices, run_dir)
        doc["fill"] = filled
        return doc
    finally:
        stopped = ssdlab_cli("emulator", "stop", "--all", env=env)
        if stopped.returncode != 0:
            print(f"warning: emulator stop: {stopped.stderr.strip()}", file=sys.stderr)


def size_arg(text: str) -> int:
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size < 64 * 2**20 or size % 2**20:
        raise argparse.ArgumentTypeError("size must be whole MiB, at least 64MiB")
    return size


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--repetitions", type=int, default=3, help="default 3")
    p.add_argument("--runtime", type=float, default=8.0,
                   help="seconds of each rate-limited run (8)")
    p.add_argument("--unlimited-runtime", type=float, default=2.0,
                   help="seconds of each run without a rate limit, the ceiling's too (2)")
    p.add_argument("--ramp", type=float, default=0.5, help="fio ramp_time, seconds (0.5)")
    p.add_argument("--iodepth", type=int, default=4, help="default 4")
    p.add_argument("--rate-iops", type=int, default=None,
                   help="rate_iops per host (default: --rate-fraction of the ceiling)")
    p.add_argument("--rate-fraction", type=float, default=0.05,
                   help="rate per host as a share of the ceiling, rounded down to 100 (0.05)")
    p.add_argument("--max-load", type=float, default=0.5,
                   help="the hosts together may ask at most this share of the ceiling (0.5)")
    p.add_argument("--min-ratio", type=float, default=0.95,
                   help="together / sum of alone must reach this (0.95)")
    p.add_argument("--profile", default="enterprise-tlc", help="emulator profile")
    p.add_argument("--size", type=size_arg, default=256 * 2**20, help="emulator size (256MiB)")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = p.parse_args(argv)
    if args.repetitions < 1 or min(args.runtime, args.unlimited_runtime) <= 0 or args.ramp < 0:
        p.error("--repetitions, --runtime and --unlimited-runtime must be positive")
    if args.rate_iops is not None and args.rate_iops <= 0:
        p.error("--rate-iops must be positive")
    if not 0 < args.rate_fraction <= 1:
        p.error("--rate-fraction must be in (0, 1]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    why = netlab_unavailable()
    if why is not None or not os.path.exists("/dev/fuse") or not shutil.which("fio"):
        print(f"Error: needs root, /dev/fuse, fio and a lab of hosts ({why or 'ok'})",
              file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    facts = machine_facts()
    run_dir = Path(tempfile.mkdtemp(prefix="ssdlab-bench-mh-", dir="/dev/shm"))
    started = time.monotonic()
    try:
        measured = run(args, run_dir)
    except (KeyboardInterrupt, Interrupted, FioInterrupted) as exc:
        print(f"interrupted ({exc or 'Ctrl-C'}): no results written", file=sys.stderr)
        return 130
    except (UserError, RuntimeError) as exc:
        print(f"Error: {exc}: no results written", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    facts["loadavg_end"] = list(os.getloadavg())
    doc: dict[str, Any] = {
        "benchmark": RESULT_NAME,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "args": recorded_args(args),
        "load": load_named(args, measured["summary"]["rate_iops_per_host"]),
        "machine": facts,
        "versions": {"ssdlab": __version__, "fio": facts["fio"], "ssh": facts["ssh"]},
        "duration_s": round(time.monotonic() - started, 1),
        **measured,
    }
    write_results(args.results_dir, RESULT_NAME, doc, markdown(doc))
    return 1 if doc["summary"]["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
