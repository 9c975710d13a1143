"""``--dry-run``: the plan and every fio job file, with nothing touched."""

from __future__ import annotations

from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.prepare import Prepared
from ssdlab.run.pts_run import job_text


def describe(prepared: Prepared) -> str:
    info, opts = prepared.info, prepared.options
    out = [
        f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
        f"{format_bytes(info.capacity_bytes)}, {info.logical_sector_bytes}-byte sectors)",
        f"profile {opts.profile}{' (QUICK)' if opts.quick else ''}, variant {opts.variant}, "
        f"rule {opts.rule}, tracking {opts.tracking}, at most {opts.max_rounds} rounds, "
        f"{opts.threads} threads x QD {opts.iodepth}",
    ]
    if prepared.create_file:
        out.append(
            f"would create and fully allocate {info.path} ({format_bytes(info.capacity_bytes)})"
        )
    for test in prepared.tests:
        out += [
            "",
            f"== {test.name}: {len(test.round_cells)} cells, "
            f"{format_duration(test.round_seconds)} per round",
        ]
        purge = opts.purge if test.purge else "none"
        if info.kind == "file" and purge != "none":
            purge = "recreate the file"
        out.append(f"purge: {purge}")
        for label, reason in test.skipped:
            out.append(f"skipped {label}: {reason}")
        if test.wipc is not None:
            out += [
                "-- preconditioning job file:",
                job_text(
                    prepared, (test.wipc,), f"{test.name} workload-independent preconditioning"
                ).rstrip(),
            ]
        out += [
            "-- job file of every round:",
            job_text(prepared, test.round_cells, f"{test.name} round N").rstrip(),
        ]
    return "\n".join(out) + "\n"
