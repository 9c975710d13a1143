"""``ssdlab run pts --predict`` with the fake fio: it stops at a predicted steady state,
labelled as not a SNIA steady state everywhere a verdict shows, keeps every round, never
replaces the SNIA verdict, and ``ssdlab resume`` continues the test to the SNIA rule."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from ssdlab.analysis.predict import LABEL
from ssdlab.cli.resume_cmd import check_resumable
from ssdlab.plan.pts import PtsArgs
from ssdlab.report.build import render
from ssdlab.report.figures import figures
from ssdlab.report.terminal import render_run
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun, RunInterrupted
from ssdlab.store.db import Store
from ssdlab.store.export import write_export
from ssdlab.store.records import RunData
from ssdlab.suites import result_json
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

ARGS = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
               block_sizes="4", mixes="0/100", max_rounds=40, predict=True)


def settling(name: str, round_no: int) -> float:
    """Settles towards 10,000 IOPS (the SNIA rule passes at round 11), with a fixed
    +-0.5 % ripple (no randomness: the prediction is known at round 6)."""
    return (10_000.0 + 30_000.0 * math.exp(-0.5 * round_no)) * (
        1 + 0.005 * math.sin(2.3 * round_no))


def falling(name: str, round_no: int) -> float:
    """Never flattens: 4 % of its start lost every round."""
    return 40_000.0 * (1 - 0.04 * round_no)


def _run(tmp_path: Path, store: Store, args: PtsArgs, model: FakeFio) -> tuple[RunData, str]:
    out = io.StringIO()
    runner = PtsRun(make_prepared(tmp_path, args), store, model,
                    Progress(out, live=False, quick=True))
    return store.load(runner.execute(["test"])), out.getvalue()


def _export(run: RunData, fmt: str) -> str:
    out = io.StringIO()
    write_export(run, fmt, out, result_json)
    return out.getvalue()


def test_predict_stops_early_labelled_and_keeps_the_snia_verdict(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    run, printed = _run(tmp_path, store, ARGS, FakeFio(settling))
    test = run.test("iops")
    assert test.status == "predicted" and run.status == "complete"
    rounds = [r.round_no for r in test.rounds]
    assert rounds == list(range(1, len(rounds) + 1))  # every measured round is kept
    primary = test.verdicts["primary"]
    assert primary["attained"] is False and primary["rounds_seen"] == len(rounds)
    assert test.result["steady"] is False  # the SNIA verdict, not the prediction's
    prediction = test.result["prediction"]
    assert prediction["label"] == LABEL and prediction["message"].startswith(LABEL)
    assert prediction["rounds_seen"] == len(rounds)
    assert all(v["known"] for v in prediction["variables"])
    assert LABEL in printed and f"ssdlab resume {run.run_id}" in printed

    # the full SNIA run of the same series takes longer
    (tmp_path / "full").mkdir()
    full, _ = _run(tmp_path / "full", Store.open(tmp_path / "full.sqlite"),
                   PtsArgs(**{**ARGS.__dict__, "predict": False}), FakeFio(settling))
    assert full.test("iops").status == "steady"
    assert len(full.test("iops").rounds) > len(rounds)


def test_the_label_shows_in_show_export_and_report(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    run, _ = _run(tmp_path, store, ARGS, FakeFio(settling))
    shown = render_run(run)
    assert f"[STEADY STATE NOT REACHED; {LABEL}]" in shown
    assert f"  {LABEL} after" in shown and "verdict: NOT STEADY" in shown
    doc = json.loads(_export(run, "json"))
    (test,) = doc["tests"]
    assert test["status"] == "predicted" and test["verdict"]["attained"] is False
    assert test["result"]["prediction"]["label"] == LABEL
    rows = list(csv.DictReader(io.StringIO(_export(run, "csv"))))
    predicted = [r for r in rows if r["scope"] == LABEL]
    assert {r["metric"] for r in predicted} == {"predicted_window_average", "half_width_95",
                                               "plateau"}
    assert {r["cell"] for r in predicted} == {"IOPS 4 KiB 0/100"}
    value = next(r for r in predicted if r["metric"] == "predicted_window_average")["value"]
    assert float(value) == test["result"]["prediction"]["variables"][0]["value"]
    html, _ = render([run])
    assert LABEL in html and 'class="banner predicted"' in html
    assert f"STEADY STATE NOT REACHED in {len(run.test('iops').rounds)} rounds; {LABEL}" in html
    assert "STEADY STATE NOT REACHED" in html
    # comparisons and claims, which read figures, say it too
    figs = [f for f in figures(run).values() if f.key.kind == "iops"]
    assert figs and all(f.predicted and f.state == f"NOT steady; {LABEL}" for f in figs)


def test_where_the_series_never_flattens_nothing_is_predicted(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    args = PtsArgs(**{**ARGS.__dict__, "max_rounds": 20})
    run, printed = _run(tmp_path, store, args, FakeFio(falling))
    test = run.test("iops")
    assert test.status == "not_steady" and len(test.rounds) == 20
    assert "prediction" not in test.result
    assert f"{LABEL} after" not in printed and "no prediction after 20 rounds" in printed


def test_a_resumed_predicted_test_stopped_again_keeps_its_prediction(tmp_path: Path) -> None:
    """Resumed, interrupted again, resumed again: still on to the SNIA rule, never
    predicted anew, and the first prediction is kept throughout."""
    store = Store.open(tmp_path / "s.sqlite")
    fio = FakeFio(settling)
    run, _ = _run(tmp_path, store, ARGS, fio)
    stopped = len(run.test("iops").rounds)
    fio.interrupt_round = fio.rounds + 2
    with pytest.raises(RunInterrupted):
        PtsRun(make_prepared(tmp_path, ARGS), store, fio,
               Progress(io.StringIO(), live=False, quick=True)).resume(run, ["resume"])
    again = store.load(run.run_id)
    assert again.status == "interrupted" and again.test("iops").status == "running"
    assert again.test("iops").result["prediction"]["rounds_seen"] == stopped
    check_resumable(again)
    PtsRun(make_prepared(tmp_path, ARGS), store, fio,
           Progress(io.StringIO(), live=False, quick=True)).resume(again, ["resume"])
    test = store.load(run.run_id).test("iops")
    assert test.status == "steady" and test.result["prediction"]["rounds_seen"] == stopped
    assert [r.round_no for r in test.rounds] == list(range(1, len(test.rounds) + 1))


def test_resuming_a_predicted_run_goes_on_to_the_snia_rule(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    fio = FakeFio(settling)
    run, _ = _run(tmp_path, store, ARGS, fio)
    stopped = len(run.test("iops").rounds)
    check_resumable(run)  # complete, but a predicted test can go on
    resumer = PtsRun(make_prepared(tmp_path, ARGS), store, fio,
                     Progress(io.StringIO(), live=False, quick=True))
    resumer.resume(run, ["resume", run.run_id])
    done = store.load(run.run_id)
    test = done.test("iops")
    assert test.status == "steady" and done.status == "complete"
    assert [r.round_no for r in test.rounds] == list(range(1, len(test.rounds) + 1))
    assert len(test.rounds) > stopped and test.verdicts["primary"]["attained"] is True
    # the earlier prediction stays beside the SNIA verdict, still labelled
    assert test.result["prediction"]["label"] == LABEL
    assert test.result["prediction"]["rounds_seen"] == stopped
    assert "[steady]" in render_run(done)
