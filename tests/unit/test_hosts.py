"""Several hosts: fio --client output per host, the aggregate, the remote target names,
the coordinator's requests and the agent's socket (no ssh, no fio: tests/integration has
those)."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ssdlab.engine.aggregate import aggregate_jobs, by_host, merge_directions
from ssdlab.engine.client import ClientExecutor, ClientHost, host_job_text
from ssdlab.engine.model import DirectionStats
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioRun
from ssdlab.errors import ExitCode, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.run import agent
from ssdlab.run.agent_wire import (
    ErrorAnswer,
    Hello,
)
from ssdlab.run.remote import (
    RemoteHost,
    RemoteSet,
    Ssh,
    _refusal,
    check_suite,
)
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.remote_spec import RemoteTarget, is_remote, parse_remote, parse_remote_set

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"
CLIENT_OUTPUT = (FIXTURE / "j_client_sockets_jsonplus.json").read_text()


def _percentile(samples: list[int], pct: float) -> int:
    """fio's convention computed the plain way: the smallest sample with at least pct % of
    all samples at or below it."""
    ordered = sorted(samples)
    rank = math.ceil(pct / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _expand(bins: dict[int, int]) -> list[int]:
    return [value for value, count in bins.items() for _ in range(count)]


def test_the_parser_keeps_each_jobs_host() -> None:
    out = parse_fio_output(CLIENT_OUTPUT)
    hosts = by_host(out.jobs)
    assert sorted(hosts) == ["s1.sock", "s2.sock"]
    for jobs in hosts.values():
        assert [j.name for j in jobs] == ["cell-randread-4k", "cell-randwrite-4k"]


def test_the_aggregate_sums_and_merges_the_histograms() -> None:
    out = parse_fio_output(CLIENT_OUTPUT)
    total = aggregate_jobs(out)
    assert [j.name for j in total.jobs] == ["cell-randread-4k", "cell-randwrite-4k"]
    for job in total.jobs:
        parts = [j for j in out.jobs if j.name == job.name]
        assert len(parts) == 2
        assert job.total_iops == pytest.approx(sum(p.total_iops for p in parts))
        assert job.total_bw_bytes_per_s == pytest.approx(sum(p.total_bw_bytes_per_s
                                                              for p in parts))
        direction = job.read if not job.read.empty else job.write
        samples = [s for p in parts for s in _expand((p.read if not p.read.empty
                                                      else p.write).clat_bins_ns)]
        assert len(samples) == direction.total_ios
        for pct in (50.0, 99.0, 99.9, 99.99):
            assert direction.clat_percentiles_ns[pct] == _percentile(samples, pct)


def _stats(samples: list[float]) -> DirectionStats:
    return DirectionStats(
        io_bytes=len(samples) * 4096, bw_bytes_per_s=1.0, iops=float(len(samples)),
        total_ios=len(samples), runtime_ms=1000, clat_mean_ns=statistics.fmean(samples),
        clat_min_ns=min(samples), clat_max_ns=max(samples),
        clat_stddev_ns=statistics.pstdev(samples), lat_mean_ns=statistics.fmean(samples),
        lat_max_ns=max(samples),
        clat_percentiles_ns={99.0: float(_percentile([int(s) for s in samples], 99.0))},
    )


def test_mean_and_stddev_pool_the_hosts_samples() -> None:
    a, b = [100.0, 200.0, 300.0], [1000.0, 1100.0, 900.0, 1300.0, 700.0]
    merged = merge_directions([_stats(a), _stats(b)])
    assert merged.clat_mean_ns == pytest.approx(statistics.fmean(a + b))
    assert merged.clat_stddev_ns == pytest.approx(statistics.pstdev(a + b))
    assert merged.clat_min_ns == 100.0 and merged.clat_max_ns == 1300.0
    # without histograms a percentile cannot be merged: the larger host's is the bound
    assert merged.clat_percentiles_ns[99.0] == 1300.0
    assert merged.total_ios == 8


def _client_run(text: str) -> FioRun:
    return FioRun("job", ("fio",), text, "", 0, 0.0, 1.0, False, parse_fio_output(text), None)


def _executor(*names: str) -> ClientExecutor:
    hosts = [ClientHost(f"h{i + 1}", name, f"/dev/loop{i}") for i, name in enumerate(names)]
    return ClientExecutor(hosts, "h1:/dev/loop0,h2:/dev/loop1")


def test_the_client_executor_names_hosts_and_gives_the_aggregate() -> None:
    run = _executor("s1.sock", "s2.sock")._per_host(_client_run(CLIENT_OUTPUT))
    assert run.error is None and run.output is not None
    assert sorted(by_host(run.per_host)) == ["h1", "h2"]
    assert all(job.host == "" for job in run.output.jobs)
    assert run.output.jobs[0].total_iops == pytest.approx(
        sum(j.total_iops for j in run.per_host if j.name == run.output.jobs[0].name))


def test_a_host_without_results_is_named() -> None:
    run = _executor("s1.sock", "s2.sock", "s3.sock")._per_host(_client_run(CLIENT_OUTPUT))
    assert run.error is not None and run.error.startswith("host h3 returned no results")


def test_each_host_gets_its_own_path() -> None:
    text = "[global]\nfilename=h1:/dev/a,h2:/dev/b\n[cell]\nrw=read\n"
    assert host_job_text(text, "h1:/dev/a,h2:/dev/b", "/dev/b") == (
        "[global]\nfilename=/dev/b\n[cell]\nrw=read\n")
    cmd = _executor("s1", "s2").command(["a.fio", "b.fio"])
    assert cmd[1:] == ("--output-format=json+", "--eta=never", "--client=sock:s1", "a.fio",
                       "--client=sock:s2", "b.fio")


def test_each_hosts_copy_of_a_log_is_beside_its_name() -> None:
    """fio's client writes a log a server sends back as ``NAME.HOSTNAME``, the hostname
    being the socket as given: the sockets are named relative to where fio runs."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.hosts import fio_logs
    executor = _executor("h1.sock", "h2.sock")
    assert executor.log_copies("/tmp/x/slc_bw.1.log") == {
        "h1": "/tmp/x/slc_bw.1.log.h1.sock", "h2": "/tmp/x/slc_bw.1.log.h2.sock"}
    assert fio_logs(executor, Path("/tmp/x/a.log")) == {
        "h1": Path("/tmp/x/a.log.h1.sock"), "h2": Path("/tmp/x/a.log.h2.sock")}
    assert fio_logs(FioExecutor(), "/tmp/x/a.log") == {"": Path("/tmp/x/a.log")}
    found = _hosts(1 << 30, 1 << 30)
    found._dir = "/tmp/ssdlab-hosts-x"
    for host in found.hosts:
        host.socket = f"/tmp/ssdlab-hosts-x/{host.name}.sock"
    remote = found.executor()
    assert [h.socket for h in remote.hosts] == ["h1.sock", "h2.sock"]
    assert remote.cwd == "/tmp/ssdlab-hosts-x"


@pytest.mark.parametrize(("text", "remote"), [
    ("node1:/dev/nvme0n1", True), ("root@10.0.0.2:/dev/sdb", True),
    ("/dev/disk/by-path/pci-0000:00:1f.2", False), ("./a:b", False),
    ("nbd://server/export", False), ("disk.img", False), ("-oProxyCommand=x:/dev/a", False),
])
def test_remote_names(text: str, remote: bool) -> None:
    assert is_remote(text) is remote


def test_remote_sets() -> None:
    assert parse_remote("h1:/dev/a") == RemoteTarget("h1", "/dev/a")
    assert [str(t) for t in parse_remote_set("h1:/dev/a, h2:/dev/b")] == ["h1:/dev/a",
                                                                          "h2:/dev/b"]
    with pytest.raises(UserError, match="host h1 is named twice"):
        parse_remote_set("h1:/dev/a,h1:/dev/b")
    with pytest.raises(UserError, match="not a target on another host"):
        parse_remote("/dev/a")


def test_ssh_runs_the_agent_quoted() -> None:
    ssh = Ssh("/tmp/cfg", ("env", "X=1", "/opt/ssdlab"))
    argv = ssh.argv("h1", ["check", "--target", "/dev/a b"])
    assert argv[:3] == ["ssh", "-F", "/tmp/cfg"]
    assert argv[-2] == "h1"
    assert argv[-1] == "env X=1 /opt/ssdlab agent check --target '/dev/a b'"


def test_refusals_name_the_host() -> None:
    unreachable = subprocess.CompletedProcess([], 255, "", "ssh: connect to host h2 port 22: "
                                              "Connection refused\n")
    assert str(_refusal("h2", "hello", unreachable, None)) == (
        "host h2 cannot be reached by ssh: ssh: connect to host h2 port 22: Connection refused")
    refused = _refusal("h3", "check", subprocess.CompletedProcess([], 3, "", ""),
                       {"error": "refusing /dev/sdb: mounted at /srv", "exit": 3})
    assert str(refused) == "host h3: refusing /dev/sdb: mounted at /srv"
    assert refused.exit_code == ExitCode.TARGET


def _info(path: str, capacity: int, serial: str) -> TargetInfo:
    return TargetInfo(path, "block", path.rsplit("/", 1)[-1], "emulated", "EMU", serial, "1",
                      capacity, 512, 4096, False, None, "none", None, {})


def _hosts(*sizes: int, offset: float = 0.0, fio: str = "fio-3.33") -> RemoteSet:
    from ssdlab import __version__
    targets = tuple(RemoteTarget(f"h{i + 1}", f"/dev/loop{i}") for i in range(len(sizes)))
    found = RemoteSet(targets, Ssh(), True, False, local_fio="fio-3.33")
    found.hosts = [RemoteHost(t, _info(t.path, size, f"S{i}"),
                              Hello(1, __version__, fio, hostname=t.host), offset)
                   for i, (t, size) in enumerate(zip(targets, sizes, strict=True))]
    return found


def test_the_combined_target_is_the_smallest_one() -> None:
    found = _hosts(2 << 30, 1 << 30, 3 << 30)
    info = found.combined_info()
    assert info.path == "h1:/dev/loop0,h2:/dev/loop1,h3:/dev/loop2"
    assert info.capacity_bytes == 1 << 30
    assert info.serial == "S0,S1,S2"
    assert [h["host"] for h in info.details["hosts"]] == ["h1", "h2", "h3"]  # type: ignore[attr-defined]
    assert found.warnings() == ["the hosts' targets differ in size (1,073,741,824 to "
                                "3,221,225,472 bytes): every host runs on the smallest "
                                "one's range"]


def test_versions_and_clocks_that_differ_are_warned_of() -> None:
    assert _hosts(1 << 30, 1 << 30).warnings() == []
    skewed = _hosts(1 << 30, offset=7.5, fio="fio-3.36").warnings()
    assert skewed == ["host h1 runs fio-3.36, the coordinator fio-3.33",
                      "host h1's clock is +7.5 s off the coordinator's: its times are "
                      "recorded as it reports them"]
    assert replace(_hosts(1 << 30).hosts[0], clock_offset_s=-1.0).clock_offset_s == -1.0


@pytest.mark.parametrize("token", ["", "../x", "a/b", "x" * 65, "a b"])
def test_the_agent_refuses_a_bad_socket_token(token: str) -> None:
    with pytest.raises(UserError, match="bad agent token"):
        agent.socket_path(token)


def test_the_agent_socket_is_private() -> None:
    assert agent.socket_path("123-abc") == agent.SOCKET_ROOT / "123-abc" / "fio.sock"


def test_a_serving_agent_answers_only_for_its_targets(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent, "SOCKET_ROOT", tmp_path)
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / agent.HELD_FILE).write_text(
        json.dumps({"pid": os.getpid(), "targets": ["/dev/loop7"]}))
    assert agent.answer("not json", "t1", True) == ErrorAnswer(
        "bad request (Expecting value: line 1 column 1 (char 0))", 2)
    assert agent.answer("[]", "t1", True) == ErrorAnswer(
        "bad request (request: expected a JSON object, got an array)", 2)
    refused = agent.answer(json.dumps({"verb": "purge", "target": "/dev/sda"}), "t1", True)
    assert refused.to_json() == {"error": "/dev/sda is not a target this agent serves",
                                 "exit": 3}
    unknown = agent.answer(json.dumps({"verb": "format", "target": "/dev/loop7"}), "t1", True)
    assert unknown == ErrorAnswer("unknown request 'format'", 2)
    no_method = agent.answer(json.dumps({"verb": "purge", "target": "/dev/loop7"}), "t1",
                             True)
    assert no_method == ErrorAnswer("bad request (KeyError('method'))", 2)
    # a serve that is gone holds nothing
    (tmp_path / "t1" / agent.HELD_FILE).write_text(
        json.dumps({"pid": 2 ** 22 + 1, "targets": ["/dev/loop7"]}))
    gone = agent.answer(json.dumps({"verb": "probe", "target": "/dev/loop7"}), "t1", True)
    assert isinstance(gone, ErrorAnswer) and gone.exit == 3


def test_suites_that_cannot_run_on_other_hosts_say_so() -> None:
    from ssdlab.suites import SUITES
    specs = {s.name: s.spec for s in SUITES}
    remote = [name for name, spec in specs.items() if spec.remote]
    assert remote == ["pts", "atto", "cdm", "iometer", "latency-iops", "op-sweep", "peak",
                      "saturation", "slc-probe", "verify"]
    # every other suite that runs says why it does not run on other hosts
    local = [s.spec for s in SUITES if s.spec.runnable and not s.spec.remote]
    assert local and all(spec.local_only for spec in local)
    assert not any(specs[name].local_only for name in remote)
    check_suite(specs["pts"], "h1:/dev/a,h2:/dev/b", remote)
    check_suite(specs["db"], "/dev/loop0", remote)
    check_suite(specs["db"], None, remote)
    with pytest.raises(UserError) as refused:
        check_suite(specs["db"], "h1:/dev/a", remote)
    assert str(refused.value) == (
        "`ssdlab run db` runs on targets of this host only: it makes a file system (or a "
        "work directory) for database servers it starts on this host; targets on other "
        f"hosts (h1:/dev/a) are for: {', '.join(remote)} (docs/hosts.md)")
    # a directory of another host: refused by every suite, with the suite's reason
    with pytest.raises(UserError) as refused:
        check_suite(specs["aja"], None, remote, "h1:/srv/share")
    assert str(refused.value).startswith(
        "`ssdlab run aja`: --dir h1:/srv/share names a directory on another host; its files "
        "are made, timed and removed by ssdlab itself in a --dir of this host")
    # the block presets run in a --dir on each host (run/host_dirs.py)
    check_suite(specs["cdm"], None, remote, "h1:/srv/share,h2:/srv/share")
    check_suite(specs["cdm"], None, remote, "/srv/share")


def test_the_sets_write_counters_are_every_hosts_summed() -> None:
    """On several hosts the ground truth a suite reads (op-sweep's write amplification)
    is the sum of every emulated SSD's counters; None when a host has none."""
    from types import SimpleNamespace

    from ssdlab.plan.results import HostTruth, TruthAnswer
    from ssdlab.run import observe

    def truths(*counters: JsonObject | None) -> list[HostTruth]:
        return [HostTruth(f"h{i + 1}", TruthAnswer(None if c is None else {"counters": c}))
                for i, c in enumerate(counters)]

    events: list[tuple[str, object]] = []
    store = SimpleNamespace(add_event=lambda run, test, kind, text, detail: events.append(
        (kind, detail)))
    both = truths({"host_write_bytes": 10, "nand_write_bytes": 25, "x": 1},
                  {"host_write_bytes": 30, "nand_write_bytes": 35})
    session = SimpleNamespace(store=store, run_id="r", remote=SimpleNamespace(
        truth=lambda: both))
    assert observe.ground_truth(session, "t", "round 1") == {
        "counters": {"host_write_bytes": 40, "nand_write_bytes": 60}}
    assert events[0][0] == "host-truth"
    one = truths({"host_write_bytes": 10, "nand_write_bytes": 25}, None)
    session.remote = SimpleNamespace(truth=lambda: one)
    assert observe.ground_truth(session, "t", "round 2") is None


def test_a_series_from_logs_on_several_hosts_is_their_sum(tmp_path: Path) -> None:
    """Each host's copy of an averaged IOPS log (``LOG.SOCKET``, as fio's client writes
    it) is read and merged: the series is the hosts' sum; on one host, its own log."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.saturation_run import _rate_points
    prefix = tmp_path / "wsat"
    rates = {"h1.sock": (100, 120), "h2.sock": (300, 280)}
    for sock, (a, b) in rates.items():
        for job in (1, 2):
            Path(f"{prefix}_iops.{job}.log.{sock}").write_text(
                f"100, {a}, 1, 0, 0\n200, {b}, 1, 0, 0\n")
    merged = _rate_points(_executor("h1.sock", "h2.sock"), prefix, 2, 100, 4096)
    assert [round(p.rate) for p in merged] == [2 * (100 + 300), 2 * (120 + 280)]
    for job in (1, 2):
        Path(f"{prefix}_iops.{job}.log").write_text("100, 50, 1, 0, 0\n200, 60, 1, 0, 0\n")
    alone = _rate_points(FioExecutor(), prefix, 2, 100, 4096)
    assert [round(p.rate) for p in alone] == [100, 120]
