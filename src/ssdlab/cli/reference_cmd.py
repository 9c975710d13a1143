"""``ssdlab specs`` and ``ssdlab import published``: reference data (docs/reference-data.md)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, open_store
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.reference.sources import cite, shipped
from ssdlab.reference.specs import SPECS_RESOURCE, VendorSpec, find_specs, load_specs
from ssdlab.report.text import num


def register(sub: Any) -> None:
    specs = add_command(
        sub, "specs", specs_command,
        help="list the vendors' claimed figures",
        description="""The manufacturers' claimed figures shipped with ssdlab. MB/s are
        decimal (10^6 bytes/s); IOPS are 4 KiB random; latency is the vendor's typical
        figure in microseconds; capacity in decimal GB. '-': not stated.""",
    )
    specs.add_argument(
        "match",
        nargs="*",
        metavar="MATCH",
        help="only rows whose vendor, model or capacity have these words, "
        "e.g. '7450 PRO 3840' or 'SN640', or a device model such as KCM51RUG7T68",
    )
    specs.add_argument("--json", action="store_true", help="print the rows as JSON")

    imp = sub.add_parser("import", help="import reference data into the results store")
    kinds = imp.add_subparsers(dest="kind", metavar="KIND", required=True)
    published = add_command(
        kinds, "published", import_published_command,
        help="published review results as read-only reference runs",
        description="""Read a CSV file of published results (the columns of
        docs/reference-data.md) and store one read-only reference run per source and device.
        The whole file is checked first: a bad row imports nothing. Figures imported before
        are not imported again.""",
    )
    published.add_argument("file", type=Path, metavar="FILE", help="the CSV file")
    add_store_option(published)


def _claimed(value: float | None) -> str:
    """A claimed figure as given: whole numbers without decimals, others with one."""
    return num(value, 0 if value is None or value == int(value) else 1)


_HEADER = (
    "vendor",
    "model",
    "GB",
    "read MB/s",
    "write MB/s",
    "4K read IOPS",
    "4K write IOPS",
    "70/30 IOPS",
    "read us",
    "write us",
    "DWPD",
    "source",
)
_LEFT = {0, 1, 11}  # left-aligned columns; numbers are right-aligned


def _spec_row(s: VendorSpec, note: str) -> list[str]:
    numbers = (
        s.capacity_gb,
        s.seq_read_mb_s,
        s.seq_write_mb_s,
        s.rand_read_4k_iops,
        s.rand_write_4k_iops,
        s.mixed_70_30_iops,
        s.latency_read_us,
        s.latency_write_us,
    )
    return [s.vendor, s.model, *[_claimed(n) for n in numbers], s.dwpd or "-", note]


def _notes(specs: Sequence[VendorSpec]) -> dict[str, str]:
    """Each source the rows name -> its note mark, ``[1]``..., in the order of the rows."""
    order = list(dict.fromkeys(s.source for s in specs))
    return {source: f"[{n}]" for n, source in enumerate(order, 1)}


def specs_table(specs: Sequence[VendorSpec]) -> list[str]:
    """The vendor table as aligned text lines, then the sources its notes cite and where
    the figures are on this host."""
    notes = _notes(specs)
    body = [list(_HEADER), *[_spec_row(s, notes[s.source]) for s in specs]]
    widths = [max(len(row[i]) for row in body) for i in range(len(_HEADER))]
    lines = []
    for n, row in enumerate(body):
        cells = [
            c.ljust(w) if i in _LEFT else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("MB/s = 10^6 bytes/s; IOPS at 4 KiB random; latency: the vendor's typical "
                 "figure; '-': not stated")
    lines.append("sources (the vendors' figures as these reviews quote them):")
    lines += [f"  {mark} {cite(source)}" for source, mark in notes.items()]
    lines.append(f"the figures ship with ssdlab: {shipped(SPECS_RESOURCE)} "
                 "(docs/reference-data.md)")
    return lines


def specs_command(args: argparse.Namespace, argv: list[str]) -> int:
    query = " ".join(args.match)
    chosen = find_specs(query, load_specs())
    if not chosen:
        raise UserError(f"no vendor spec matches {query!r} (see `{command()} specs`)")
    if args.json:
        print(json.dumps([{**dataclasses.asdict(s), "cited": cite(s.source)} for s in chosen],
                         indent=2))
        return int(ExitCode.OK)
    print("\n".join(specs_table(chosen)))
    return int(ExitCode.OK)


def import_published_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.reference.published import import_runs, read_published
    runs = read_published(args.file)  # all validated before a store is opened or created
    with open_store(args) as store:
        outcomes = import_runs(store, runs, args.file.name, argv)
    for item in outcomes:
        rows = len(item.run.rows)
        what = f"{item.run.device} ({rows} row{'' if rows == 1 else 's'})"
        if item.created:
            print(f"imported {what} as run {item.run_id} (read-only reference)")
        else:
            print(f"{what}: already imported as run {item.run_id}; not imported again")
    return int(ExitCode.OK)
