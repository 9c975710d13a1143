"""``ssdlab run pts --predict`` with real fio on a file target (a few seconds).

Whether a real series is predicted before the SNIA rule passes depends on the machine's
noise, so the test checks what must hold either way: every round is kept, the SNIA
verdict is stored as judged (a prediction never makes a test steady), and whatever the
run ended on is labelled so in ``show``, the JSON and the CSV export. The stop itself and
``resume`` of a predicted run are tested deterministically with the fake fio
(tests/unit/test_predict_run.py).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ssdlab.analysis.predict import LABEL
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.fio, pytest.mark.timeout(120)]


def test_predict_with_real_fio_keeps_rounds_and_labels_the_outcome(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    run = ssdlab("run", "pts", "--target", str(tmp_path / "target.img"), "--size", "64MiB",
                 "--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
                 "100/0", "--no-precondition", "--round-seconds", "0.2", "--max-rounds", "8",
                 "--predict", "--store", store, timeout=100)
    assert run.returncode == 0 and run.stderr == "", run.stderr + run.stdout[-2000:]
    exported = ssdlab("export", "last", "--format", "json", "--store", store)
    doc = json.loads(exported.stdout)
    assert doc["plan"]["options"]["predict"] is True
    (test,) = doc["tests"]
    rounds = [r["round"] for r in test["rounds"]]
    assert rounds == list(range(1, len(rounds) + 1)) and all(
        r["status"] == "ok" for r in test["rounds"])
    verdict = test["verdict"]
    assert verdict["rounds_seen"] == len(rounds)
    assert test["status"] in ("steady", "not_steady", "predicted")
    assert (test["status"] == "steady") == verdict["attained"] == test["result"]["steady"]
    shown = ssdlab("show", "last", "--store", store).stdout
    rows = list(csv.DictReader(io.StringIO(
        ssdlab("export", "last", "--format", "csv", "--store", store).stdout)))
    predicted = [r for r in rows if r["scope"] == LABEL]
    if test["status"] == "predicted":
        prediction = test["result"]["prediction"]
        assert prediction["label"] == LABEL and prediction["rounds_seen"] == len(rounds)
        assert f"[STEADY STATE NOT REACHED; {LABEL}]" in shown and f"{LABEL} after" in shown
        assert predicted and {r["metric"] for r in predicted} >= {"predicted_window_average"}
        assert f"{LABEL} after {len(rounds)} rounds" in run.stdout
    else:  # the SNIA rule passed first, or nothing settled: no prediction is claimed
        assert "prediction" not in test["result"] and not predicted
        assert LABEL not in shown
        if len(rounds) >= 5 and test["status"] == "not_steady":
            assert "no prediction after" in run.stdout
