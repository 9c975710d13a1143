"""The lab of SSH hosts in network namespaces (tests/support/netlab.py) does what the
multi-host tests rely on: ``ssh -F <config> hN`` logs in with no prompt and runs in hN's
namespace, the stranger reaches the hosts but cannot log in, a host can drop and come
back, and nothing (namespace, link, sshd, directory) is left once the lab is gone."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LoopFactory
from tests.support.netlab import (  # noqa: F401 (netlab_hosts_fixture: a fixture, used by name)
    NetLab,
    cleanup_stale,
    netlab_hosts_fixture,
)

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def lab() -> Iterator[NetLab]:
    with NetLab(3) as built:
        yield built


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_each_host_is_reached_by_ssh_in_its_own_namespace(lab: NetLab) -> None:
    root_netns = Path("/proc/self/ns/net").readlink().name
    seen = set()
    remote = "readlink /proc/self/ns/net; ip -o addr"
    for host in lab.hosts:
        ssh = ["ssh", "-F", str(lab.ssh_config), host.alias, remote]
        netns, addresses = _run(ssh).split("\n", 1)
        assert netns == _run(lab.argv(host, "readlink", "/proc/self/ns/net")).strip()
        assert netns != root_netns
        seen.add(netns)
        assert f"inet {host.address}/24 " in addresses
        others = [other.address for other in lab.hosts if other != host]
        assert not any(f"inet {address}/" in addresses for address in others)
    assert len(seen) == 3


def test_the_stranger_reaches_the_hosts_but_cannot_log_in(lab: NetLab) -> None:
    attempts = [(lab.stranger_ssh_config, host.alias) for host in lab.hosts]
    attempts.append((lab.ssh_config, "h1"))  # the lab's config: its key is hidden
    for config, alias in attempts:
        result = lab.exec_stranger("ssh", "-F", str(config), alias, "touch /tmp/x")
        assert result.returncode == 255
        assert "Permission denied (publickey)" in result.stderr
    assert lab.exec_stranger("cat", str(lab.dir / "client" / "id_ed25519")).returncode != 0


def test_a_host_drops_and_comes_back(lab: NetLab) -> None:
    lab.kill_sshd("h2")
    refused = lab.ssh("h2", "true")
    assert refused.returncode == 255
    assert "Connection refused" in refused.stderr
    lab.start_sshd("h2")
    assert lab.ssh("h2", "true").returncode == 0

    lab.block("h3")
    try:
        cut = lab.ssh("h3", "true", options=["ConnectTimeout=1"])
    finally:
        lab.unblock("h3")
    assert cut.returncode == 255
    assert "timed out" in cut.stderr
    assert lab.ssh("h3", "true").returncode == 0


@pytest.mark.parametrize("netlab_hosts", [1], indirect=True)
def test_the_fixture_builds_a_lab(netlab_hosts: NetLab) -> None:
    assert [host.alias for host in netlab_hosts.hosts] == ["h1"]
    assert netlab_hosts.ssh("h1", "echo", "up", check=True).stdout == "up\n"


def _leftovers(lab: NetLab, names: list[str]) -> list[str]:
    """What of the lab is still there: namespaces, links, processes naming its directory."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found = [name for name in names if name in netns or f" {name}:" in links.replace("@", ":")]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(lab.dir) in cmdline.read_text():
                found.append(str(cmdline))
        except OSError:
            continue
    return found + ([str(lab.dir)] if lab.dir.exists() else [])


def _started(argv: list[str]) -> subprocess.Popen[str]:
    """``argv`` started, once it has said "up" (it runs where it should)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "up\n"
    return proc


def _ended(proc: subprocess.Popen[str]) -> int | None:
    """Its exit status, or None (and it is killed) when it is still running after 5 s."""
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return proc.returncode


def test_nothing_is_left_after_the_lab_even_when_the_test_fails() -> None:
    with pytest.raises(RuntimeError, match="the test failed"), NetLab(2) as gone:
        sleeper = _started(gone.argv("h1", "sh", "-c", "echo up; exec sleep 600"))
        session = _started(gone.ssh_argv("h2", "echo up; exec sleep 600"))
        names = [host.netns for host in [*gone.hosts, gone.stranger]]
        names += [host.veth for host in [*gone.hosts, gone.stranger]] + [f"{gone.prefix}br"]
        raise RuntimeError("the test failed")
    assert _ended(sleeper) == -9
    # its sshd killed under it, the client sees the end (the hosts' FIN reach it: the lab's
    # bridge keeps its address when the stranger's port goes first)
    assert _ended(session) == 255
    assert _leftovers(gone, names) == []


def test_cleanup_stale_removes_what_a_killed_run_left() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    netns, bridge = f"sl{dead.pid}qh1", f"sl{dead.pid}qbr"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
        # gone afterwards: another test's lab starting meanwhile runs the same sweep, and
        # may be the one that removes them
        cleanup_stale()
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        spaces = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
        assert f" {bridge}:" not in links and netns not in spaces
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def test_a_host_keeps_no_copy_of_a_file_system_another_test_unmounts(
        loop_device: LoopFactory, shm_dir: Path) -> None:
    # make test runs two files at once: a file system another test mounts while a host's
    # command starts must be free for that test once it unmounts it (DROP_COPIES), but a
    # mount the lab was told to keep stays mounted in the host
    devices = [loop_device(32 * 1024 * 1024) for _ in range(2)]
    mounts = [shm_dir / "dropped", shm_dir / "kept"]
    for device, mount in zip(devices, mounts, strict=True):
        mount.mkdir()
        subprocess.run(["mkfs.ext4", "-q", device], check=True)
        subprocess.run(["mount", device, str(mount)], check=True)
    with NetLab(1, stranger=False, keep=[mounts[1]]) as net:
        host = _started(net.argv("h1", "sh", "-c", "echo up; exec sleep 600"))
        try:
            seen = _run(net.argv("h1", "findmnt", "-rn", "-o", "TARGET"))
            assert str(mounts[1]) in seen.split() and str(mounts[0]) not in seen.split()
            subprocess.run(["umount", str(mounts[0])], check=True)
            # free: no copy in the host's namespace holds it (wipefs needs it unclaimed)
            wiped = subprocess.run(["wipefs", "-a", devices[0]], capture_output=True,
                                   text=True)
            assert wiped.returncode == 0, wiped.stderr
        finally:
            host.kill()
            host.communicate()
