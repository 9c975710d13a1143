"""NBD exports as targets: ``nbd://HOST[:PORT][/EXPORT]`` and
``nbd+unix:///EXPORT?socket=PATH``.

fio reaches an export through its own ``nbd`` engine (libnbd, ``uri=``), so no kernel
NBD device is made. Identifying one writes nothing: ``nbdinfo --json`` tells its size and
what it can do; ssdlab's read-only client (:mod:`ssdlab.targets.nbdclient`) reads the
sectors where partition tables and file systems keep their signatures and times a few
small reads; :mod:`ssdlab.targets.network` records the link toward the server. The NBD
protocol does not name the server's software, so no name or version is recorded for it.

Writing needs ``--destroy-data`` as a device does: the bare flag for a blank export, the
confirmation ``--destroy-data=URI`` for one that carries a signature. A read-only export
is refused for writing. ssdlab cannot hold an export exclusively: another client of the
server can write to it meanwhile (docs/network.md).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import statistics
import subprocess
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ssdlab.errors import EnvironmentProblem, TargetError, UserError
from ssdlab.targets.identity import Runner, TargetInfo, Which
from ssdlab.targets.magic import MAGIC_PROBES, Reader
from ssdlab.targets.nbdclient import NbdClient, NbdError
from ssdlab.targets.network import link_toward, resolve
from ssdlab.targets.signatures import DeviceProbe, Signature

#: a target of this kind is an NBD export (``TargetInfo.kind``, ``device_class``)
NBD_KIND = "nbd"
#: the fio engine that reaches it
NBD_ENGINE = "nbd"
DEFAULT_PORT = 10809
#: URI schemes ssdlab takes, and the NBD ones it recognises but refuses
SCHEMES = ("nbd", "nbd+unix")
OTHER_SCHEMES = ("nbds", "nbds+unix", "nbd+vsock", "nbds+vsock")
#: round-trip time: this many reads of this size at offset 0
RTT_READS = 8
RTT_BYTES = 4096
NBDINFO_TIMEOUT_S = 30
NO_SERVER_NAME = "the NBD protocol does not name the server software"


@dataclass(frozen=True)
class NbdUri:
    """An NBD URI, checked: TCP (``host``, ``port``) or a Unix socket (``socket``)."""

    scheme: str
    host: str | None
    port: int | None
    socket: str | None
    export: str

    @property
    def text(self) -> str:
        """The URI as fio's ``uri=`` and the run record give it (one spelling per export)."""
        export = quote(self.export, safe="")
        if self.socket is not None:
            return f"nbd+unix:///{export}?socket={quote(self.socket)}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"nbd://{host}:{self.port}/{export}"

    @property
    def server(self) -> str:
        """``10.1.0.2:10809`` or the socket's path."""
        if self.socket is not None:
            return self.socket
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{host}:{self.port}"


def is_nbd_target(target: str) -> bool:
    """Whether ``--target`` names an NBD export (or tries to: an NBD scheme)."""
    scheme = target.partition("://")[0].lower()
    return "://" in target and scheme in SCHEMES + OTHER_SCHEMES


def parse_uri(target: str) -> NbdUri:
    """``nbd://HOST[:PORT][/EXPORT]`` or ``nbd+unix:///EXPORT?socket=PATH``; a one-line
    UserError for anything else."""
    try:
        parts = urlsplit(target.strip())
        port = parts.port
    except ValueError as exc:
        raise UserError(f"--target {target}: not a valid NBD URI ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UserError(f"--target {target}: {scheme}:// is not supported; give "
                        "nbd://HOST[:PORT][/EXPORT] or nbd+unix:///EXPORT?socket=PATH")
    if parts.username is not None or parts.fragment:
        raise UserError(f"--target {target}: an NBD URI takes no user name or #fragment")
    export = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    query = parse_qs(parts.query, keep_blank_values=True)
    if scheme == "nbd+unix":
        return _unix_uri(target, parts.hostname, query, export)
    if query:
        raise UserError(f"--target {target}: nbd:// takes no ?query (a Unix socket is "
                        "nbd+unix:///EXPORT?socket=PATH)")
    if not parts.hostname:
        raise UserError(f"--target {target}: the URI names no host: nbd://HOST[:PORT][/EXPORT]")
    return NbdUri("nbd", parts.hostname, port or DEFAULT_PORT, None, export)


def _unix_uri(target: str, host: str | None, query: dict[str, list[str]],
              export: str) -> NbdUri:
    sockets = query.pop("socket", [])
    if host or query or len(sockets) != 1 or not sockets[0].startswith("/"):
        raise UserError(f"--target {target}: give nbd+unix:///EXPORT?socket=/PATH (no host, "
                        "one absolute socket path, nothing else)")
    path = sockets[0]
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise TargetError(f"--target {target}: no socket at {path}") from None
    if not stat.S_ISSOCK(mode):
        raise TargetError(f"--target {target}: {path} is not a Unix socket")
    return NbdUri("nbd+unix", None, None, path, export)


def connect(uri: NbdUri, timeout_s: float = 10.0) -> NbdClient:
    """ssdlab's read-only client, connected to the export."""
    if uri.socket is not None:
        return NbdClient.unix(uri.socket, uri.export, timeout_s)
    assert uri.host is not None and uri.port is not None
    return NbdClient.tcp(uri.host, uri.port, uri.export, timeout_s)


# -- identity -------------------------------------------------------------------------------


def nbdinfo(uri: NbdUri, *, runner: Runner = subprocess.run,
            which: Which = shutil.which) -> dict[str, object]:
    """``nbdinfo --json URI``: the protocol and the export's facts."""
    if which("nbdinfo") is None:
        raise EnvironmentProblem("nbdinfo is not installed; install it (apt-get install "
                                 "libnbd-bin) to use NBD targets")
    try:
        done = runner(["nbdinfo", "--json", uri.text], capture_output=True, text=True,
                      check=False, timeout=NBDINFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TargetError(f"{uri.text}: nbdinfo got no answer in {NBDINFO_TIMEOUT_S} s; "
                          "nothing was written") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run nbdinfo: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        why = lines[-1].removeprefix("nbdinfo: ") if lines else f"status {done.returncode}"
        raise TargetError(f"cannot reach the NBD export {uri.text}: {why}")
    try:
        data = json.loads(done.stdout)
        exports = data["exports"]
        export = exports[0]
        if not isinstance(data, dict) or not isinstance(export, dict):
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError):
        raise TargetError(f"{uri.text}: nbdinfo printed no export") from None
    return {**{k: v for k, v in data.items() if k != "exports"}, "export": export}


def round_trip(client: NbdClient, reads: int = RTT_READS) -> dict[str, object]:
    """The round-trip time of ``reads`` small reads at offset 0, in us: min, median, max."""
    times = []
    for _ in range(reads):
        started = time.perf_counter_ns()
        client.read(0, RTT_BYTES)
        times.append((time.perf_counter_ns() - started) / 1000.0)
    return {"reads": reads, "bytes": RTT_BYTES, "min_us": round(min(times), 1),
            "median_us": round(statistics.median(times), 1), "max_us": round(max(times), 1)}


class NbdReader(Reader):
    """The export as the signature probes read it (:mod:`ssdlab.targets.magic`)."""

    def __init__(self, client: NbdClient) -> None:  # no fd: reads go to the server
        self.client = client
        self.size = client.size
        self._cache: dict[tuple[int, int], bytes] = {}

    def read(self, offset: int, length: int) -> bytes:
        key = (offset, length)
        if key not in self._cache:
            self._cache[key] = self.client.read(offset, length)
        return self._cache[key]


def probe_export(uri: NbdUri, client: NbdClient) -> DeviceProbe:
    """The signatures ssdlab's own magic-number probes find on the export."""
    reader = NbdReader(client)
    try:
        found: list[Signature] = [sig for probe in MAGIC_PROBES for sig in probe(reader)]
    except (OSError, NbdError) as exc:
        return DeviceProbe(uri.text, (), errors=(f"reading {uri.text}: {exc}",))
    return DeviceProbe(uri.text, tuple(found), tool="ssdlab's magic-number probes")


@dataclass(frozen=True)
class NbdTarget:
    """An export as identified: its record and what the signature probe found."""

    info: TargetInfo
    probe: DeviceProbe


def identify_nbd(target: str, *, runner: Runner = subprocess.run,
                 which: Which = shutil.which) -> NbdTarget:
    """Identify the export ``target`` names, reading only."""
    uri = parse_uri(target)
    facts = nbdinfo(uri, runner=runner, which=which)
    try:
        with connect(uri) as client:
            rtt = round_trip(client)
            found = probe_export(uri, client)
    except (OSError, NbdError) as exc:
        raise TargetError(f"{uri.text}: nbdinfo answered but ssdlab's read of the export "
                          f"failed: {exc}") from None
    export = facts["export"]
    assert isinstance(export, dict)
    size = export.get("export-size")
    if not isinstance(size, int) or size <= 0:
        raise TargetError(f"{uri.text}: the export has no size ({size!r})")
    logical = _int(export.get("block_size_minimum")) or 512
    network = network_facts(uri, facts, export, rtt, runner=runner, which=which)
    info = TargetInfo(
        path=uri.text, kind=NBD_KIND, name=uri.export or uri.server, device_class=NBD_KIND,
        model=None, serial=None, firmware=None, capacity_bytes=size,
        logical_sector_bytes=logical,
        physical_sector_bytes=_int(export.get("block_size_preferred")) or logical,
        rotational=export.get("is_rotational") if isinstance(
            export.get("is_rotational"), bool) else None,
        numa_node=None, scheduler=None, discard_max_bytes=None,
        details={"transport": "nbd", "network": network})
    return NbdTarget(info, found)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


CAPABILITIES = ("is_read_only", "is_rotational", "can_trim", "can_flush", "can_fua",
                "can_multi_conn", "can_zero", "can_fast_zero", "can_cache", "can_df")
BLOCK_SIZES = ("block_size_minimum", "block_size_preferred", "block_size_maximum")


def network_facts(uri: NbdUri, facts: dict[str, object], export: dict[str, object],
                  rtt: dict[str, object], *, runner: Runner = subprocess.run,
                  which: Which = shutil.which) -> dict[str, object]:
    """What the run records of the export and the way to it (``details["network"]``)."""
    address = None if uri.socket else resolve(uri.host or "")
    if uri.socket is not None:
        link: dict[str, object] = {"kind": "unix socket", "path": uri.socket}
    elif address is None:
        link = {"why": f"cannot resolve {uri.host}"}
    else:
        link = link_toward(address, runner=runner, which=which)
    return {
        "transport": "nbd", "uri": uri.text, "server": uri.server, "server_address": address,
        "export": uri.export, "description": export.get("description"),
        "server_software": None, "server_software_why": NO_SERVER_NAME,
        "protocol": facts.get("protocol"), "tls": facts.get("TLS"),
        "structured_replies": facts.get("structured"),
        "capabilities": {k: export[k] for k in CAPABILITIES if k in export},
        "block_sizes": {k: export[k] for k in BLOCK_SIZES if k in export},
        "identified_by": "nbdinfo --json, and ssdlab's read-only NBD client",
        "fio_engine": NBD_ENGINE,
        "purge": ("trim through fio's nbd engine" if export.get("can_trim") is True else
                  "none: the export does not support trim"),
        "exclusive": "not held: the server may serve other clients during the run",
        "round_trip": rtt, "link": link,
    }


def check_fio_engine(fio: str = "fio", *, runner: Runner = subprocess.run) -> None:
    """fio must have its nbd engine (built in to Debian's; elsewhere fio is built with
    libnbd, or packaged apart as fio-engine-nbd)."""
    try:
        done = runner([fio, f"--enghelp={NBD_ENGINE}"], capture_output=True, text=True,
                      check=False, timeout=NBDINFO_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentProblem(f"cannot run {fio} --enghelp={NBD_ENGINE}: {exc}") from None
    if done.returncode != 0 or "uri" not in (done.stdout or ""):
        raise EnvironmentProblem(f"{fio} has no nbd engine: install a fio built with libnbd "
                                 "(Debian's fio has it; Fedora: fio-engine-nbd)")


# -- safety ---------------------------------------------------------------------------------


def check_nbd_target(found: NbdTarget, *, destroy_data: bool | str, writes: bool) -> None:
    """Refuse (TargetError, one line) writing to an export without ``--destroy-data``, a
    read-only export, and one carrying a signature without the confirmation naming it."""
    info, path = found.info, found.info.path
    if isinstance(destroy_data, str):
        named = destroy_data.strip()
        if not is_nbd_target(named) or parse_uri(named).text != path:
            raise TargetError(f"refusing {path}: the confirmation names {named}, not this "
                              f"export (confirm with --destroy-data={path}); nothing was "
                              "written")
    if not writes:
        return
    network = info.details.get("network")
    caps = network.get("capabilities") if isinstance(network, dict) else None
    if isinstance(caps, dict) and caps.get("is_read_only") is True:
        raise TargetError(f"refusing {path}: the server exports it read-only; nothing was "
                          "written (--read-only runs only the read tests)")
    if isinstance(destroy_data, str):
        return
    probe = found.probe
    if probe.blank:
        if destroy_data:
            return
        raise TargetError(f"refusing to write to {path} without --destroy-data: every byte "
                          "of the export will be overwritten")
    raise TargetError(f"{path} carries {probe.describe()}; nothing was written. To destroy "
                      f"it, confirm with --destroy-data={path}")


def unreachable(path: str) -> str | None:
    """After a failed test: None if the export still reads, else why not (one line)."""
    try:
        with connect(parse_uri(path), timeout_s=10.0) as client:
            client.read(0, RTT_BYTES)
    except (OSError, NbdError, UserError) as exc:  # a timeout is an OSError
        return f"{path} does not answer ({exc})"
    return None
