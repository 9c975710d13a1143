"""Not collected by itself (not ``test_*``): the owner that
test_vmlab_real.py::test_a_killed_owners_guest_and_emulator_are_gone_after_the_next_session_start
runs in a pytest of its own and kills with SIGKILL. It starts an emulated SSD with a loop
device in its lab, starts a guest's QEMU whose drive is that loop device (not waiting for
the guest to boot: what is left after a kill is QEMU, the emulator, the loop device and
the files, booted or not), writes what it holds to ``$VMLAB_READY_FILE`` and waits to be
killed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.support.cli import ssdlab
from tests.support.vmlab import Drive, VmLab

pytestmark = [pytest.mark.root, pytest.mark.vmlab]


@pytest.mark.timeout(1800)
def test_hold_a_guest_until_killed(vmlab: VmLab) -> None:
    ready = os.environ.get("VMLAB_READY_FILE")
    if not ready:
        pytest.skip("run by test_vmlab_real.py only")
    started = ssdlab("emulator", "start", "--name", "held", "--size", "64MiB", "--loop",
                     env=vmlab.emulator_env)
    assert started.returncode == 0, started.stderr
    loop = next(line.split()[-1] for line in started.stdout.splitlines() if "target:" in line)
    guest = vmlab.guest([Drive.backed_by(loop)], wait=False)
    assert guest.qemu is not None
    held = {"lab": str(vmlab.dir), "qemu": guest.qemu.pid,
            "emulator": str(Path(vmlab.emulator_env["SSDLAB_EMU_RUN_DIR"], "held"))}
    Path(ready + ".part").write_text(json.dumps(held))
    os.rename(ready + ".part", ready)
    time.sleep(1700)
