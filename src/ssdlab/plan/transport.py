"""How a target reached over the network is described in words: the dry run, ``ssdlab
show`` and the report's title page read the same recorded facts (targets/network.py,
targets/nbd.py) through these pure functions.

An NBD export keeps them in ``target["details"]["network"]``, a directory on a network
file system in ``target["network"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def network_of(target: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The recorded network facts of a run's target, or None (a local target)."""
    details = target.get("details")
    found = details.get("network") if isinstance(details, Mapping) else None
    if found is None:
        found = target.get("network")
    if found is None and isinstance(details, Mapping):  # a test file in a --dir
        folder = details.get("dir")
        found = folder.get("network") if isinstance(folder, Mapping) else None
    return found if isinstance(found, Mapping) else None


def link_text(link: object) -> str:
    """``link veth-a (veth) MTU 1500, speed unknown, from 10.1.0.1``."""
    if not isinstance(link, Mapping):
        return "link unknown"
    if link.get("why"):
        return f"link unknown ({link['why']})"
    if link.get("kind") == "unix socket":
        return f"Unix socket {link.get('path')} (no network link)"
    speed = link.get("speed_mbps")
    speed_text = f"{speed:,} Mb/s" if isinstance(speed, int) else "speed unknown"
    via = f" via {link['gateway']}" if link.get("gateway") else ""
    return (f"link {link.get('interface')} ({link.get('kind')}) MTU {link.get('mtu')}, "
            f"{speed_text}, from {link.get('local_address')}{via}")


def _nbd_text(net: Mapping[str, Any]) -> str:
    export = f"export {net['export']!r}" if net.get("export") else "the default export"
    described = f" ({net['description']})" if net.get("description") else ""
    rtt = net.get("round_trip")
    rtt_text = (f"; small-read round trip {rtt.get('median_us'):,} us (median of "
                f"{rtt.get('reads')})" if isinstance(rtt, Mapping) and
                isinstance(rtt.get("median_us"), int | float) else "")
    return (f"over NBD from {net.get('server')}, {export}{described}, through "
            f"fio's {net.get('fio_engine', 'nbd')} engine, {link_text(net.get('link'))}"
            f"{rtt_text}; purge: {net.get('purge')}")


def _share_text(net: Mapping[str, Any]) -> str:
    user = f"{net['user']}@" if net.get("user") else ""
    where = f"{user}{net.get('server_address') or net.get('server')}:{net.get('export') or ''}"
    options = net.get("key_options")
    shown = (", options " + ",".join(f"{k}={v}" if v else k for k, v in options.items())
             if isinstance(options, Mapping) and options else "")
    return f"over {net.get('transport')} from {where}, {link_text(net.get('link'))}{shown}"


def transport_text(target: Mapping[str, Any]) -> str | None:
    """One line saying how the target was reached (None: a local target)."""
    net = network_of(target)
    if net is None:
        return None
    return _nbd_text(net) if net.get("transport") == "nbd" else _share_text(net)
