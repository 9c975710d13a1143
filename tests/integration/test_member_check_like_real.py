"""The member check compares like with like (issue 30), with real fio: four loop devices
over sparse files, one of them filled with data by fio first, the three others never
written (as freshly trimmed members are). `run matrix` called such a member "0.72x its
peers": space without data reads faster than data on SSDs. The check reads what each
member holds from its loop device's backing file (allocated blocks over size), does not
judge the filled member against the empty ones and says why; the empty ones are still
compared with each other. The check stays read-only: no member's content changes."""

from __future__ import annotations

import re
import subprocess

import pytest

from ssdlab.analysis.member_check import outlier_verdict
from ssdlab.engine.runner import FioExecutor
from ssdlab.run.member_check import check_members
from tests.conftest import LoopFactory
from tests.support.cli import sha256_of

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024


def test_a_member_holding_data_is_not_judged_against_empty_peers(loop_device: LoopFactory
                                                                  ) -> None:
    members = [loop_device(64 * MIB) for _ in range(4)]
    subprocess.run(["fio", "--name=fill", f"--filename={members[0]}", "--rw=write",
                    "--bs=1m", "--direct=1", "--ioengine=libaio", "--iodepth=8",
                    "--output-format=json"], check=True, capture_output=True)
    before = [sha256_of(m) for m in members]
    lines: list[str] = []
    results = check_members(members, FioExecutor(read_only=True), seconds=0.6,
                            progress=lines.append)
    print("\n".join(lines))
    shares = [r.data_share for r in results]
    assert shares[0] is not None and shares[0] >= 0.95  # filled
    assert all(s is not None and s <= 0.05 for s in shares[1:])  # never written
    verdict = outlier_verdict(results)
    print(verdict.message)
    assert members[0] not in verdict.outliers
    assert verdict.lines[0].endswith("not judged: no peer holds data on a like share of its "
                                     "space")
    assert f"not judged: {members[0]} holds data on 100 % of its space, its peers on 0 % " \
           "(trimmed or never written)" in verdict.message
    # the three empty ones are judged against each other; how many of them fall below
    # 0.8x is the host's noise (RAM-backed loop devices on a busy host: 2 of 3 once)
    judged = verdict.message.split("; not judged: ")[0]
    assert re.match(r"member check: (no outlier among 3 members|[123] of 3 members below)",
                    judged), judged
    assert not re.search(re.escape(members[0]) + r"\b", judged), judged
    assert "(data on 100 % of it)" in lines[1]
    assert [sha256_of(m) for m in members] == before  # read only
