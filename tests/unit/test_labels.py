"""``--label`` (issue 15, the controller review): labels given on the command line are
stored with every run the command records, shown by ``ssdlab show`` and the report, name
the runs in comparisons, and a comparison groups runs by each label key."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from ssdlab.cli.common import run_labels
from ssdlab.cli.main import build_parser
from ssdlab.errors import UserError
from ssdlab.plan.pts import PtsArgs
from ssdlab.report.build import render
from ssdlab.report.terminal import render_run
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun
from ssdlab.store.db import Store
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

QUICK_IOPS = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False)


def _run(tmp_path: Path, store: Store, iops: float, labels: dict[str, str]) -> str:
    store.run_labels = labels
    tmp_path.mkdir()
    prepared = make_prepared(tmp_path, QUICK_IOPS)
    fio = FakeFio(lambda name, round_no: iops)
    return PtsRun(prepared, store, fio, Progress(io.StringIO(), live=False)).execute(["t"])


def test_every_suite_takes_labels_and_a_key_twice_is_refused() -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "cdm", "--target", "/tmp/x", "--label",
                              "controller=H730,cache=wb", "--label", "firmware=25.5"])
    assert run_labels(args) == {"controller": "H730", "cache": "wb", "firmware": "25.5"}
    twice = parser.parse_args(["run", "pts", "--target", "/tmp/x", "--label", "a=1",
                               "--label", "a=2"])
    with pytest.raises(UserError, match="--label names a twice"):
        run_labels(twice)
    with pytest.raises(UserError, match="KEY=VALUE"):
        parser.parse_args(["run", "pts", "--target", "/tmp/x", "--label", "controller"])
    assert run_labels(argparse.Namespace()) == {}


def test_labels_are_stored_shown_and_group_a_comparison(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.sqlite")
    ids = [_run(tmp_path / str(i), store, iops, {"controller": ctl, "cache": "wb"})
           for i, (ctl, iops) in enumerate([("H730", 10_000.0), ("H730", 12_000.0),
                                            ("9460", 30_000.0)])]
    unlabelled = _run(tmp_path / "u", store, 5_000.0, {})
    runs = [store.load(i) for i in ids]
    assert runs[0].target["labels"] == {"controller": "H730", "cache": "wb"}
    assert "labels" not in store.load(unlabelled).target
    assert "labels: controller=H730, cache=wb" in render_run(runs[0])
    html, _ = render(runs)
    assert "[controller=H730, cache=wb]" in html  # the runs' names in the comparison
    assert "Grouped by label" in html and "By controller" in html
    assert "By cache" not in html  # one value: it tells no runs apart
    table = html.split("By controller", 1)[1].split("</table>", 1)[0]
    assert "9460 (1 run)" in table and "H730 (2 runs)" in table
    assert "11,000" in table and "30,000" in table  # H730: the mean of its two runs
