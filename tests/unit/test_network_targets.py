"""Network targets without a network: NBD URIs, ssdlab's read-only NBD client against an
in-process fake server, nbdinfo's JSON through a fake runner, the guardrails of an
export, fio job files with ``uri=``, the purge by trim, network mounts' sources and
options, the link toward an address, and the words ``show`` and the dry run use."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import FioRun
from ssdlab.errors import EnvironmentProblem, TargetError, UserError
from ssdlab.plan.pts import PtsArgs, build_options
from ssdlab.plan.specs import NBD_URI_PREFIXES as PLAN_PREFIXES
from ssdlab.plan.specs import CellSpec, FioJob, Mix, Pattern, is_nbd_uri
from ssdlab.plan.transport import link_text, network_of, transport_text
from ssdlab.run import nbd as run_nbd
from ssdlab.run.prepare import check_file_purge, engine_for, refuse_nbd, resolve_target
from ssdlab.targets import nbd
from ssdlab.targets.identity import MountEntry, read_mountinfo
from ssdlab.targets.nbdclient import NbdClient, NbdError
from ssdlab.targets.network import (
    client_options,
    interface_facts,
    link_toward,
    share_facts,
    split_source,
    sshfs_command,
    transport_of,
)
from ssdlab.targets.signatures import DeviceProbe, Signature

MIB = 1 << 20

# -- a fake NBD server (fixed newstyle, NBD_OPT_GO, simple replies) ---------------------------


@dataclass
class FakeExport:
    name: str
    data: bytearray
    read_only: bool = False


class FakeNbdServer:
    """Serves ``exports`` on 127.0.0.1 (a thread per connection); counts what it got."""

    def __init__(self, exports: list[FakeExport], *, go: bool = True) -> None:
        self.exports = {e.name: e for e in exports}
        self.go = go
        self.commands: list[int] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() in the thread (Linux)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    @staticmethod
    def _recv(conn: socket.socket, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise ConnectionError
            out += chunk
        return out

    def _reply(self, conn: socket.socket, option: int, kind: int, data: bytes = b"") -> None:
        conn.sendall(struct.pack(">QIII", 0x3E889045565A9, option, kind, len(data)) + data)

    def _client(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"NBDMAGIC" + struct.pack(">QH", 0x49484156454F5054, 3))
                self._recv(conn, 4)
                export = self._options(conn)
                if export is not None:
                    self._transmission(conn, export)
            except (ConnectionError, OSError):
                return

    def _options(self, conn: socket.socket) -> FakeExport | None:
        while True:
            _, option, length = struct.unpack(">QII", self._recv(conn, 16))
            data = self._recv(conn, length)
            if option == 7 and not self.go:
                self._reply(conn, option, (1 << 31) | 1)
                continue
            name = data[4:4 + struct.unpack(">I", data[:4])[0]] if option == 7 else data
            export = self.exports.get(name.decode())
            if export is None:
                if option == 7:
                    self._reply(conn, option, (1 << 31) | 6, b"no such export")
                    continue
                return None
            flags = 1 | (2 if export.read_only else 0)
            if option == 1:
                conn.sendall(struct.pack(">QH", len(export.data), flags))
                return export
            self._reply(conn, option, 3, struct.pack(">HQH", 0, len(export.data), flags))
            self._reply(conn, option, 1)
            return export

    def _transmission(self, conn: socket.socket, export: FakeExport) -> None:
        while True:
            _, _, kind, cookie, offset, length = struct.unpack(">IHHQQI",
                                                               self._recv(conn, 28))
            self.commands.append(kind)
            if kind == 2:
                return
            conn.sendall(struct.pack(">IIQ", 0x67446698, 0, cookie)
                         + bytes(export.data[offset:offset + length]))


@pytest.fixture
def server() -> Iterator[FakeNbdServer]:
    data = bytearray(8 * MIB)
    data[4096 - 10:4096] = b"SWAPSPACE2"  # a swap signature on export "swap"
    fake = FakeNbdServer([FakeExport("", bytearray(8 * MIB)), FakeExport("swap", data),
                          FakeExport("ro", bytearray(4 * MIB), read_only=True)])
    yield fake
    fake.close()


# -- URIs -------------------------------------------------------------------------------------


def test_uris_are_parsed_into_one_spelling() -> None:
    uri = nbd.parse_uri("nbd://10.1.0.2")
    assert (uri.host, uri.port, uri.export, uri.text) == ("10.1.0.2", 10809, "",
                                                          "nbd://10.1.0.2:10809/")
    assert nbd.parse_uri("NBD://h:1234/ssd%20a").text == "nbd://h:1234/ssd%20a"
    assert nbd.parse_uri("nbd://h:1234/ssd%20a").export == "ssd a"
    assert nbd.parse_uri("nbd://[fd00::2]:99/x").text == "nbd://[fd00::2]:99/x"
    assert nbd.parse_uri("nbd://[fd00::2]:99/x").server == "[fd00::2]:99"
    assert nbd.is_nbd_target("nbd://h") and nbd.is_nbd_target("nbds://h")
    assert not nbd.is_nbd_target("/dev/nbd0") and not nbd.is_nbd_target("nbd.img")


def test_the_plan_and_the_targets_know_the_same_schemes() -> None:
    assert tuple(f"{s}://" for s in nbd.SCHEMES) == PLAN_PREFIXES
    assert is_nbd_uri("nbd+unix:///x?socket=/s") and not is_nbd_uri("/dev/sda")


@pytest.mark.parametrize(("uri", "words"), [
    ("nbds://h/x", "nbds:// is not supported"),
    ("nbd+vsock:///x", "nbd+vsock:// is not supported"),
    ("nbd://user@h/x", "no user name"),
    ("nbd://h/x#frag", "no user name or #fragment"),
    ("nbd://h/x?tls=on", "takes no ?query"),
    ("nbd:///x", "names no host"),
    ("nbd://h:99999/x", "not a valid NBD URI"),
    ("nbd+unix:///x", "one absolute socket path"),
    ("nbd+unix://h/x?socket=/tmp/s", "no host"),
    ("nbd+unix:///x?socket=rel/s", "absolute"),
])
def test_bad_uris_are_one_line_errors(uri: str, words: str) -> None:
    with pytest.raises(UserError) as err:
        nbd.parse_uri(uri)
    assert words in err.value.message and "\n" not in err.value.message


def test_a_unix_uri_needs_a_socket_there(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no socket at"):
        nbd.parse_uri(f"nbd+unix:///x?socket={tmp_path}/none")
    (tmp_path / "file").write_text("")
    with pytest.raises(TargetError, match="is not a Unix socket"):
        nbd.parse_uri(f"nbd+unix:///x?socket={tmp_path}/file")
    path = tmp_path / "nbd.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        uri = nbd.parse_uri(f"nbd+unix:///ssd?socket={path}")
    assert (uri.socket, uri.export, uri.server) == (str(path), "ssd", str(path))
    assert uri.text == f"nbd+unix:///ssd?socket={path}"


# -- the client --------------------------------------------------------------------------------


def test_the_client_reads_and_disconnects(server: FakeNbdServer) -> None:
    with NbdClient.tcp("127.0.0.1", server.port, "swap") as client:
        assert client.size == 8 * MIB and not client.read_only
        assert client.read(4086, 10) == b"SWAPSPACE2"
        assert client.read(8 * MIB - 2, 100) == b"\0\0"  # short at the end
        assert client.read(8 * MIB, 10) == b""
    deadline = threading.Event()
    deadline.wait(0.2)
    assert server.commands[-1] == 2 and 1 not in server.commands  # never a write


def test_the_client_falls_back_to_export_name(server: FakeNbdServer) -> None:
    server.go = False
    with NbdClient.tcp("127.0.0.1", server.port, "ro") as client:
        assert client.size == 4 * MIB and client.read_only


def test_the_client_says_why_the_server_refused(server: FakeNbdServer) -> None:
    with pytest.raises(NbdError, match="refused export 'nope': no such export"):
        NbdClient.tcp("127.0.0.1", server.port, "nope")


def test_the_client_refuses_what_is_not_nbd() -> None:
    listener = socket.create_server(("127.0.0.1", 0))

    def greet() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=greet, daemon=True).start()
    with pytest.raises(NbdError, match="not an NBD server"):
        NbdClient.tcp("127.0.0.1", listener.getsockname()[1], "")
    listener.close()


# -- identity and guardrails ---------------------------------------------------------------


def nbdinfo_json(export: str, size: int, **caps: Any) -> str:
    entry = {"export-name": export, "description": "fake export", "export-size": size,
             "is_read_only": False, "is_rotational": False, "can_trim": True, **caps}
    return json.dumps({"protocol": "newstyle-fixed", "TLS": False, "structured": True,
                       "exports": [entry]})


class FakeRunner:
    """nbdinfo prints ``nbdinfo``; ip prints nothing useful (no route)."""

    def __init__(self, nbdinfo: str, returncode: int = 0, stderr: str = "") -> None:
        self.nbdinfo, self.returncode, self.stderr = nbdinfo, returncode, stderr
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[0] == "nbdinfo":
            return subprocess.CompletedProcess(argv, self.returncode, self.nbdinfo, self.stderr)
        return subprocess.CompletedProcess(argv, 1, "", "no route")


def which(tool: str) -> str | None:
    return f"/usr/bin/{tool}"


def identify(server: FakeNbdServer, export: str, **caps: Any) -> nbd.NbdTarget:
    runner = FakeRunner(nbdinfo_json(export, 8 * MIB, **caps))
    return nbd.identify_nbd(f"nbd://127.0.0.1:{server.port}/{export}", runner=runner,
                            which=which)


def test_an_export_is_identified_reading_only(server: FakeNbdServer) -> None:
    found = identify(server, "", block_size_minimum=4096)
    info = found.info
    assert (info.kind, info.device_class, info.capacity_bytes) == ("nbd", "nbd", 8 * MIB)
    assert info.path == f"nbd://127.0.0.1:{server.port}/" and info.logical_sector_bytes == 4096
    net = info.details["network"]
    assert isinstance(net, dict)
    assert net["transport"] == "nbd" and net["server"] == f"127.0.0.1:{server.port}"
    assert net["description"] == "fake export" and net["server_software"] is None
    assert net["purge"] == "trim through fio's nbd engine"
    assert net["round_trip"]["reads"] == nbd.RTT_READS
    assert found.probe.blank
    assert 1 not in server.commands  # no write command ever


def test_signatures_on_an_export_need_the_confirmation(server: FakeNbdServer) -> None:
    found = identify(server, "swap")
    assert [s.type for s in found.probe.signatures] == ["swap"]
    path = found.info.path
    with pytest.raises(TargetError) as err:
        nbd.check_nbd_target(found, destroy_data=True, writes=True)
    assert err.value.message == (f"{path} carries a Linux swap area; nothing was written. To "
                                 f"destroy it, confirm with --destroy-data={path}")
    nbd.check_nbd_target(found, destroy_data=f"nbd://127.0.0.1:{server.port}/swap",
                         writes=True)
    nbd.check_nbd_target(found, destroy_data=False, writes=False)  # --read-only
    with pytest.raises(TargetError, match="not this export"):
        nbd.check_nbd_target(found, destroy_data="nbd://127.0.0.1:1/swap", writes=True)
    with pytest.raises(TargetError, match="not this export"):
        nbd.check_nbd_target(found, destroy_data="SERIAL123", writes=True)


def test_a_blank_export_needs_the_flag(server: FakeNbdServer) -> None:
    found = identify(server, "")
    with pytest.raises(TargetError, match="without --destroy-data: every byte of the export"):
        nbd.check_nbd_target(found, destroy_data=False, writes=True)
    nbd.check_nbd_target(found, destroy_data=True, writes=True)


def test_a_read_only_export_is_refused_for_writing(server: FakeNbdServer) -> None:
    found = identify(server, "ro", is_read_only=True)
    with pytest.raises(TargetError, match="exports it read-only"):
        nbd.check_nbd_target(found, destroy_data=True, writes=True)
    nbd.check_nbd_target(found, destroy_data=False, writes=False)


def test_an_unreadable_export_is_refused_unwritten(server: FakeNbdServer) -> None:
    runner = FakeRunner(nbdinfo_json("nope", MIB))
    with pytest.raises(TargetError, match="read of the export failed"):
        nbd.identify_nbd(f"nbd://127.0.0.1:{server.port}/nope", runner=runner, which=which)


def test_nbdinfo_failures_are_one_line() -> None:
    uri = nbd.parse_uri("nbd://10.9.9.9/x")
    failing = FakeRunner("", 1, "nbdinfo: nbd_connect_uri: connect: Connection refused\n")
    with pytest.raises(TargetError) as err:
        nbd.nbdinfo(uri, runner=failing, which=which)
    assert err.value.message == ("cannot reach the NBD export nbd://10.9.9.9:10809/x: "
                                 "nbd_connect_uri: connect: Connection refused")
    with pytest.raises(TargetError, match="printed no export"):
        nbd.nbdinfo(uri, runner=FakeRunner('{"exports": []}'), which=which)
    with pytest.raises(EnvironmentProblem, match="apt-get install libnbd-bin"):
        nbd.nbdinfo(uri, runner=failing, which=lambda tool: None)


def test_resolving_an_nbd_target_refuses_size_and_device_confirmations() -> None:
    with pytest.raises(UserError, match="--size applies to file targets"):
        resolve_target("nbd://127.0.0.1:1/x", 1 << 30, True)
    with pytest.raises(UserError, match="nbds:// is not supported"):
        resolve_target("nbds://127.0.0.1/x", None, True)


def test_an_export_that_stopped_answering_says_so(server: FakeNbdServer) -> None:
    assert nbd.unreachable(f"nbd://127.0.0.1:{server.port}/") is None
    server.close()
    why = nbd.unreachable(f"nbd://127.0.0.1:{server.port}/")
    assert why is not None and why.startswith(f"nbd://127.0.0.1:{server.port}/ does not answer")


# -- job files, options, purge ----------------------------------------------------------------


def cell() -> CellSpec:
    return CellSpec("c", Pattern.RANDOM, 4096, Mix(0), 1, 8, 0, 64 * MIB, runtime_s=1.0)


def test_an_nbd_job_names_the_uri_and_the_nbd_engine() -> None:
    text = render(FioJob("nbd://10.1.0.2:10809/ssd", (cell(),), "libaio"))
    lines = text.splitlines()
    assert "uri=nbd://10.1.0.2:10809/ssd" in lines and "ioengine=nbd" in lines
    assert not any(line.startswith("filename=") for line in lines)
    local = render(FioJob("/dev/sdb", (cell(),), "libaio")).splitlines()
    assert "filename=/dev/sdb" in local and "ioengine=libaio" in local


def nbd_info(can_trim: bool = True) -> Any:
    from ssdlab.run.prepare import planned_file

    info = planned_file("nbd://10.1.0.2:10809/ssd", 256 * MIB)
    return replace(info, kind="nbd", device_class="nbd", details={
        "network": {"transport": "nbd", "capabilities": {"can_trim": can_trim}}})


def test_options_record_the_nbd_engine_and_refuse_another() -> None:
    options = build_options(PtsArgs(profile="quick"), "nbd", 2)
    assert engine_for(nbd_info(), options).ioengine == "nbd"
    local = replace(nbd_info(), kind="block")
    assert engine_for(local, options).ioengine == "libaio"
    with pytest.raises(UserError, match="--ioengine io_uring: an NBD export is reached"):
        engine_for(nbd_info(), replace(options, ioengine="io_uring"))
    with pytest.raises(UserError, match="--purge blkdiscard applies to local block devices"):
        check_file_purge(nbd_info(), "blkdiscard")
    check_file_purge(nbd_info(), "none")
    with pytest.raises(TargetError, match="ssdlab run replay cannot use the NBD export"):
        refuse_nbd(nbd_info(), "replay", "why")


class TrimExecutor:
    def __init__(self, trimmed: int, ok: bool = True) -> None:
        self.trimmed, self.is_ok = trimmed, ok
        self.texts: list[str] = []

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: Any = None) -> FioRun:
        from ssdlab.engine.parser import parse_fio_output

        self.texts.append(job_text)
        doc = {"fio version": "fio-3.33", "jobs": [{
            "jobname": "purge-trim", "groupid": 0, "error": 0,
            "read": _direction(0), "write": _direction(0), "trim": _direction(self.trimmed),
            "usr_cpu": 0, "sys_cpu": 0, "job_runtime": 10}]}
        stdout = json.dumps(doc)
        output = parse_fio_output(stdout) if self.is_ok else None
        return FioRun(job_text, ("fio", "-"), stdout, "", 0 if self.is_ok else 1, 0.0, 1.0,
                      False, output, None if self.is_ok else "fio exited with status 1")


def _direction(io_bytes: int) -> dict[str, Any]:
    return {"io_bytes": io_bytes, "bw_bytes": 0, "iops": 0, "total_ios": 0, "runtime": 10,
            "clat_ns": {"mean": 0, "min": 0, "max": 0, "stddev": 0},
            "lat_ns": {"mean": 0, "max": 0}}


def test_the_purge_trims_the_range_through_fio() -> None:
    executor = TrimExecutor(256 * MIB)
    outcome = run_nbd.purge_nbd(nbd_info(), "auto", 0, 256 * MIB, executor, "0.1")
    assert outcome.ok and outcome.method == "nbd-trim"
    assert outcome.detail.startswith("trimmed 256 MiB at offset 0 in 16 MiB trims")
    lines = executor.texts[0].splitlines()
    for expected in ("uri=nbd://10.1.0.2:10809/ssd", "ioengine=nbd", "rw=trim",
                     f"bs={16 * MIB}", "offset=0", f"size={256 * MIB}"):
        assert expected in lines, expected
    short = run_nbd.purge_nbd(nbd_info(), "auto", 0, 256 * MIB, TrimExecutor(MIB), "0.1")
    assert not short.ok and "trimmed 1048576 of" in short.detail
    failed = run_nbd.purge_nbd(nbd_info(), "auto", 0, 256 * MIB, TrimExecutor(0, False), "0.1")
    assert not failed.ok and failed.detail == "fio: fio exited with status 1"


def test_an_export_that_cannot_trim_is_not_purged() -> None:
    executor = TrimExecutor(0)
    outcome = run_nbd.purge_nbd(nbd_info(can_trim=False), "auto", 0, MIB, executor, "0.1")
    assert not outcome.ok and "does not support trim" in outcome.detail
    assert executor.texts == []
    assert run_nbd.purge_nbd(nbd_info(), "none", 0, MIB, executor, "0.1").method == "none"
    assert run_nbd.trim_block(3 * MIB) == MIB and run_nbd.trim_block(4096 * 3) == 4096


# -- network mounts and links ------------------------------------------------------------------


@pytest.mark.parametrize(("fs_type", "source", "expected"), [
    ("fuse.sshfs", "root@10.1.0.2:/srv/share", ("root", "10.1.0.2", "/srv/share")),
    ("fuse.sshfs", "lab:", (None, "lab", None)),
    ("fuse.sshfs", "me@[fd00::2]:/x", ("me", "fd00::2", "/x")),
    ("nfs4", "nas:/export/a", (None, "nas", "/export/a")),
    ("cifs", "//nas/share/dir", (None, "nas", "/share/dir")),
    ("ceph", "10.0.0.1:6789,10.0.0.2:6789:/vol", (None, "10.0.0.1", "/vol")),
    ("9p", "hostshare", (None, None, "hostshare")),
])
def test_network_sources_name_server_and_export(fs_type: str, source: str,
                                                expected: tuple[str | None, ...]) -> None:
    assert split_source(fs_type, source) == expected


def test_transports_and_sshfs_options() -> None:
    assert [transport_of(t) for t in ("fuse.sshfs", "nfs4", "smb3", "ext4", "nfs")] == [
        "sshfs", "nfs", "smb", None, "nfs"]
    argv = ["sshfs", "-F", "/c", "u@h:/x", "/mnt", "-o", "cache=no,dir_cache=no", "-oro"]
    assert client_options(argv) == {"cache": "no", "dir_cache": "no", "ro": ""}


def test_mountinfo_keeps_the_options(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        "82 27 0:45 / /mnt/share rw,nosuid,relatime - fuse.sshfs root@10.1.0.2:/srv "
        "rw,user_id=0,group_id=0\n")
    (entry,) = read_mountinfo(proc=tmp_path)
    assert (entry.options, entry.super_options) == ("rw,nosuid,relatime",
                                                   "rw,user_id=0,group_id=0")


def fake_ip(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
    out: list[dict[str, object]]
    if argv[:3] == ["ip", "-j", "route"]:
        out = [{"dst": argv[-1], "dev": "veth7", "prefsrc": "10.1.0.1", "flags": []}]
    else:
        out = [{"ifname": "veth7", "linkinfo": {"info_kind": "veth"}}]
    return subprocess.CompletedProcess(argv, 0, json.dumps(out), "")


def fake_sysfs(tmp_path: Path) -> Path:
    net = tmp_path / "sys" / "class" / "net" / "veth7"
    net.mkdir(parents=True)
    (net / "mtu").write_text("1500\n")
    (net / "operstate").write_text("up\n")
    return tmp_path / "sys"


def test_the_link_toward_an_address(tmp_path: Path) -> None:
    link = link_toward("10.1.0.2", runner=fake_ip, which=which, sysfs=fake_sysfs(tmp_path))
    assert link == {"peer_address": "10.1.0.2", "interface": "veth7",
                    "local_address": "10.1.0.1", "gateway": None, "route_type": "unicast",
                    "kind": "veth", "driver": None, "mtu": 1500, "speed_mbps": None,
                    "operstate": "up"}
    assert link_text(link) == "link veth7 (veth) MTU 1500, speed unknown, from 10.1.0.1"
    assert link_toward("10.1.0.2", which=lambda t: None)["why"] == (
        "ip (iproute2) is not installed")
    no_route = link_toward("10.1.0.2", runner=FakeRunner(""), which=which)
    assert no_route["why"] == "no route to 10.1.0.2"
    assert interface_facts("nothere", runner=FakeRunner(""), sysfs=tmp_path)["mtu"] is None


def test_an_sshfs_share_records_server_options_and_link(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cmdline").write_bytes(
        b"sshfs\0root@10.1.0.2:/srv\0/mnt/share\0-o\0cache=no,IdentityFile=/k\0")
    assert sshfs_command("/mnt/share", proc=proc) == [
        "sshfs", "root@10.1.0.2:/srv", "/mnt/share", "-o", "cache=no,IdentityFile=/k"]
    entry = MountEntry(0, 45, "/mnt/share", "fuse.sshfs", "root@10.1.0.2:/srv",
                       "rw,relatime", "rw,user_id=0,group_id=0")
    facts = share_facts(entry, proc=proc, runner=fake_ip, which=which,
                        sysfs=fake_sysfs(tmp_path))
    assert facts is not None
    assert (facts["transport"], facts["user"], facts["server"], facts["export"]) == (
        "sshfs", "root", "10.1.0.2", "/srv")
    assert facts["key_options"] == {"cache": "no"} and facts["server_address"] == "10.1.0.2"
    target: dict[str, object] = {"kind": "directory", "network": facts}
    assert transport_text(target) == ("over sshfs from root@10.1.0.2:/srv, link veth7 (veth) "
                                      "MTU 1500, speed unknown, from 10.1.0.1, options cache=no")
    assert share_facts(replace(entry, fs_type="ext4")) is None


def test_nfs_takes_the_server_address_from_its_options(tmp_path: Path) -> None:
    entry = MountEntry(0, 50, "/mnt/nas", "nfs4", "nas:/export", "rw",
                       "rw,vers=4.2,rsize=1048576,hard,proto=tcp,addr=10.1.0.9")
    facts = share_facts(entry, runner=fake_ip, which=which, sysfs=fake_sysfs(tmp_path))
    assert facts is not None and facts["server_address"] == "10.1.0.9"
    assert facts["key_options"] == {"vers": "4.2", "proto": "tcp", "rsize": "1048576",
                                    "hard": ""}
    assert transport_text({"network": facts}) == (
        "over nfs from 10.1.0.9:/export, link veth7 (veth) MTU 1500, speed unknown, from "
        "10.1.0.1, options vers=4.2,proto=tcp,rsize=1048576,hard")


def test_what_show_says_of_an_nbd_target() -> None:
    target = {"path": "nbd://10.1.0.2:10809/ssd", "details": {"network": {
        "transport": "nbd", "server": "10.1.0.2:10809", "export": "ssd",
        "description": "emulated SSD", "fio_engine": "nbd",
        "purge": "trim through fio's nbd engine",
        "round_trip": {"reads": 8, "median_us": 85.5},
        "link": {"interface": "br0", "kind": "bridge", "mtu": 9000, "speed_mbps": 25000,
                 "local_address": "10.1.0.1"}}}}
    assert transport_text(target) == (
        "over NBD from 10.1.0.2:10809, export 'ssd' (emulated SSD), through fio's nbd "
        "engine, link br0 (bridge) MTU 9000, 25,000 Mb/s, from 10.1.0.1; small-read round "
        "trip 85.5 us (median of 8); purge: trim through fio's nbd engine")
    assert transport_text({"path": "/dev/sdb", "details": {}}) is None
    assert network_of({"details": {"dir": {"network": {"transport": "nfs"}}}}) == {
        "transport": "nfs"}


def test_a_probe_error_is_not_blank() -> None:
    probe = DeviceProbe("nbd://h/x", (), errors=("reading nbd://h/x: boom",))
    assert not probe.blank
    assert DeviceProbe("x", (Signature("swap", 4086),)).describe() == "a Linux swap area"


def test_fio_must_have_the_nbd_engine() -> None:
    def fio(out: str, code: int = 0) -> Any:
        return lambda argv, **_: subprocess.CompletedProcess(argv, code, out, "")

    nbd.check_fio_engine("fio", runner=fio("uri                     : Name of NBD URI\n"))
    with pytest.raises(EnvironmentProblem, match="fio has no nbd engine"):
        nbd.check_fio_engine("fio", runner=fio("IO engine nbd not found\n", 1))


def test_fio_errors_that_are_not_errnos_are_said_so() -> None:
    from ssdlab.engine.runner import _strerror

    assert _strerror(5) == os.strerror(5)
    assert _strerror(4294967295) == "-1: the engine gave no errno"  # the nbd engine's -1
    assert _strerror((1 << 32) - 5) == os.strerror(5)
    assert _strerror(1 << 40) == "not an errno"
