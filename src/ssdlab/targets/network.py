"""Where a target reached over the network is, and the link toward it: provenance only.

* :func:`link_toward`: the local interface the kernel routes toward an address
  (``ip -j route get``), its kind (veth, bridge ... from ``ip -j -d link show``, else the
  driver of the device), MTU and speed (``/sys/class/net/IF``; unknown for virtual links);
* :func:`share_facts`: a directory on a network file system (sshfs, NFS, SMB/CIFS, Ceph,
  9p, GlusterFS): the server and export from ``/proc/self/mountinfo``, the mount options
  that matter, the sshfs client's own options (from its command line), and the link.

Everything here only reads; a fact that cannot be had is recorded as missing with why.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from ssdlab.targets.identity import PROC, SYSFS, MountEntry, Runner, Which, read_attr, read_int

#: the transport each network file system is recorded as
TRANSPORTS = {"fuse.sshfs": "sshfs", "nfs": "nfs", "nfs4": "nfs", "cifs": "smb", "smb3": "smb",
              "smbfs": "smb", "ceph": "ceph", "fuse.ceph": "ceph", "9p": "9p",
              "glusterfs": "glusterfs", "fuse.glusterfs": "glusterfs"}
#: mount options worth showing, per transport (all of them are recorded)
KEY_OPTIONS = {
    "nfs": ("vers", "proto", "rsize", "wsize", "hard", "soft", "timeo", "nconnect", "sec",
            "actimeo", "noac", "lookupcache", "sync"),
    "smb": ("vers", "cache", "rsize", "wsize", "actimeo", "seal", "multichannel",
            "max_channels"),
    "sshfs": ("cache", "kernel_cache", "auto_cache", "dir_cache", "cache_timeout",
              "direct_io", "writeback_cache", "max_read", "Compression", "Ciphers",
              "sshfs_sync"),
    "ceph": ("fscache", "nowsync", "rsize", "wsize", "caps_max"),
    "9p": ("trans", "cache", "msize", "version"),
    "glusterfs": (),
}
COMMAND_TIMEOUT_S = 10


# -- the link toward an address -----------------------------------------------------------


def resolve(host: str) -> str | None:
    """The first address of ``host`` (an address stays itself), or None."""
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host.strip("[]")))
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    return str(infos[0][4][0]) if infos else None


def _json_of(command: list[str], runner: Runner) -> object:
    try:
        done = runner(command, capture_output=True, text=True, check=False,
                      timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return json.loads(done.stdout)
    except ValueError:
        return None


def link_toward(address: str, *, runner: Runner = subprocess.run,
                which: Which = shutil.which, sysfs: Path = SYSFS) -> dict[str, object]:
    """The local end of the path to ``address``: interface, its kind, MTU, speed, the
    local address and the gateway (none on the same link). ``why`` says what is missing."""
    if which("ip") is None:
        return {"peer_address": address, "why": "ip (iproute2) is not installed"}
    routes = _json_of(["ip", "-j", "route", "get", address], runner)
    route = routes[0] if isinstance(routes, list) and routes else None
    if not isinstance(route, dict) or not isinstance(route.get("dev"), str):
        return {"peer_address": address, "why": f"no route to {address}"}
    dev = str(route["dev"])
    link: dict[str, object] = {
        "peer_address": address,
        "interface": dev,
        "local_address": route.get("prefsrc"),
        "gateway": route.get("gateway"),
        "route_type": route.get("type", "unicast"),
    }
    link.update(interface_facts(dev, runner=runner, sysfs=sysfs))
    return link


def interface_facts(dev: str, *, runner: Runner = subprocess.run,
                    sysfs: Path = SYSFS) -> dict[str, object]:
    """An interface's kind, driver, MTU, speed (Mb/s; None where the link has none, as a
    veth) and state."""
    base = sysfs / "class" / "net" / dev
    speed = read_int(base / "speed")
    kind = None
    shown = _json_of(["ip", "-j", "-d", "link", "show", "dev", dev], runner)
    if isinstance(shown, list) and shown and isinstance(shown[0], dict):
        info = shown[0].get("linkinfo")
        kind = info.get("info_kind") if isinstance(info, dict) else None
        if kind is None and shown[0].get("link_type") == "loopback":
            kind = "loopback"
    driver = None
    with contextlib.suppress(OSError):
        driver = os.path.basename(os.readlink(base / "device" / "driver"))
    return {"kind": kind or driver or "physical", "driver": driver,
            "mtu": read_int(base / "mtu"),
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "operstate": read_attr(base / "operstate")}


# -- directories on network file systems ----------------------------------------------------


def transport_of(fs_type: str) -> str | None:
    """The transport a file system type is recorded as (None: not a network one)."""
    if fs_type in TRANSPORTS:
        return TRANSPORTS[fs_type]
    return "nfs" if fs_type.startswith("nfs") else None


def split_source(fs_type: str, source: str) -> tuple[str | None, str | None, str | None]:
    """(user, server, export) of a network mount's source: ``user@host:path`` (sshfs),
    ``host:/export`` (NFS, GlusterFS), ``//server/share`` (SMB), ``mon1,mon2:/path``
    (Ceph). Parts that are not there are None."""
    transport = transport_of(fs_type)
    if transport == "smb":
        match = re.match(r"^//([^/]+)(/.*)?$", source)
        return (None, match.group(1), (match.group(2) or "/")) if match else (None, None, None)
    if transport == "9p":
        return None, None, source or None
    if transport == "ceph":  # mon1[:port],mon2[:port]:/path (or the new name@fsid.fs=/path)
        monitors, sep, path = source.rpartition(":/")
        first = monitors.split(",")[0] if sep else ""
        host = first.rsplit(":", 1)[0] if first.count(":") == 1 else first
        return None, host.strip("[]") or None, f"/{path}" if sep else source
    user, _, rest = source.rpartition("@") if transport == "sshfs" else ("", "", source)
    match = re.match(r"^(\[[^\]]+\]|[^:]+):(.*)$", rest)
    if match is None:
        return user or None, rest or None, None
    server = match.group(1)
    return user or None, server.strip("[]"), match.group(2) or None


def _options(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key:
            out[key] = value
    return out


def sshfs_command(mount_point: str, *, proc: Path = PROC) -> list[str] | None:
    """The command line of the sshfs process serving ``mount_point`` (None: not found)."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            argv = (proc / pid / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if args and os.path.basename(args[0]) == "sshfs" and (
                mount_point in args or mount_point.rstrip("/") in args):
            return args
    return None


def ssh_hostname(alias: str, argv: object, *, runner: Runner = subprocess.run,
                 which: Which = shutil.which) -> str | None:
    """The address an ssh host alias stands for (``ssh -G``, with the ``-F`` config file
    the sshfs command line names, if any), or None."""
    if which("ssh") is None:
        return None
    command = ["ssh", "-G"]
    if isinstance(argv, list) and "-F" in argv[:-1]:
        command += ["-F", str(argv[argv.index("-F") + 1])]
    try:
        done = runner([*command, alias], capture_output=True, text=True, check=False,
                      timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^hostname (\S+)$", done.stdout or "", re.M)
    return resolve(match.group(1)) if done.returncode == 0 and match else None


def client_options(argv: list[str]) -> dict[str, str]:
    """The ``-o`` options of an sshfs command line (``-oX`` and ``-o X``)."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "-o" and i + 1 < len(argv) else (
            arg[2:] if arg.startswith("-o") and len(arg) > 2 else None)
        if value is not None:
            out.update(_options(value))
    return out


def share_facts(entry: MountEntry, *, proc: Path = PROC, runner: Runner = subprocess.run,
                which: Which = shutil.which, sysfs: Path = SYSFS) -> dict[str, object] | None:
    """What a directory on a network file system is reached over (None: not a network
    file system)."""
    transport = transport_of(entry.fs_type)
    if transport is None:
        return None
    user, server, export = split_source(entry.fs_type, entry.source)
    fs_options = _options(entry.super_options)
    facts: dict[str, object] = {
        "transport": transport, "fs_type": entry.fs_type, "source": entry.source,
        "user": user, "server": server, "export": export,
        "mount_options": entry.options, "fs_options": entry.super_options,
    }
    options = dict(fs_options)
    if transport == "sshfs":
        argv = sshfs_command(entry.mount_point, proc=proc)
        facts["client_command"] = argv
        if argv is not None:
            options.update(client_options(argv))
        else:
            facts["client_why"] = "the sshfs process serving the mount was not found"
    keys = KEY_OPTIONS.get(transport, ())
    facts["key_options"] = {k: options[k] for k in keys if k in options}
    address = fs_options.get("addr") or (resolve(server) if server else None)
    if address is None and transport == "sshfs" and server:
        address = ssh_hostname(server, facts.get("client_command"), runner=runner, which=which)
    facts["server_address"] = address
    if address:
        facts["link"] = link_toward(address, runner=runner, which=which, sysfs=sysfs)
    else:
        facts["link"] = {"why": f"cannot resolve the server {server!r}"}
    return facts
