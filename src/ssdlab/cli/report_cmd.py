"""``ssdlab report``: HTML and PDF reports from the results store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, open_existing_store
from ssdlab.errors import ExitCode, UserError


def register(sub: Any) -> None:
    report = add_command(
        sub, "report", report_command,
        help="write an HTML and PDF report of one or more stored runs",
        description="""Writes DIR/report.html (self-contained: works offline) and
        DIR/report.pdf (the same content, printed by headless Chromium) from the results
        store. Per run: the title page and the SNIA PTS report pages (steady-state
        convergence and verification, measurement window, IOPS/throughput/latency results
        with charts). With several runs: parameters side by side, every run on one chart per
        test, ratios to a baseline with their significance, leaderboards. Where a run's
        drive matches a vendor spec sheet (`ssdlab specs`), measured against claimed. A
        large report is printed in parts, one Chromium per CPU at once, and joined
        ($SSDLAB_PRINT_JOBS sets how many; $SSDLAB_CHROMIUM names the Chromium binary).""",
    )
    report.add_argument(
        "runs", nargs="+", metavar="RUN", help="run ids, unique prefixes, or 'last'; a set "
        "id (set-...) stands for its runs, compared (docs/sets.md)"
    )
    report.add_argument(
        "-o", "--output-dir", type=Path, required=True, metavar="DIR",
        help="directory for report.html and report.pdf (created if missing; an existing "
        "report there is replaced)",
    )
    report.add_argument(
        "--baseline", metavar="RUN",
        help="the run the others are compared with (default: the first RUN)",
    )
    report.add_argument(
        "--claims", action="append", default=[], metavar="RUN=SPEC",
        help="compare RUN with a chosen vendor spec (e.g. 'last=7450 PRO 3840'; "
        "'RUN=none' for none); repeatable. Default: matched from the device model",
    )
    report.add_argument(
        "--no-auto-claims", action="store_true",
        help="do not match vendor specs from device models",
    )
    report.add_argument("--no-pdf", action="store_true", help="write the HTML only")
    report.add_argument("--title", help="report title (default: from the runs)")
    add_store_option(report)


def _claims(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        run, sep, spec = item.partition("=")
        if not sep or not run.strip() or not spec.strip():
            raise UserError(f"--claims {item!r}: give RUN=SPEC, e.g. 'last=SN640 3840'")
        out[run.strip()] = spec.strip()
    return out


def report_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.report.build import ReportRequest, write_report
    request = ReportRequest(
        run_refs=tuple(args.runs),
        out_dir=args.output_dir,
        baseline=args.baseline,
        claims=_claims(args.claims),
        auto_claims=not args.no_auto_claims,
        pdf=not args.no_pdf,
        title=args.title,
    )
    with open_existing_store(args) as store:
        files = write_report(store, request)
    print(f"report: {files.html} ({files.pages} sections, {files.seconds_html:.1f} s)")
    if files.pdf is not None:
        print(f"pdf:    {files.pdf} ({files.seconds_pdf:.1f} s)")
    return int(ExitCode.OK)
