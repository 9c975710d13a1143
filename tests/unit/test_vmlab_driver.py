"""The VM lab's cache key, cache entries, QEMU command line and leftover sweep, without
QEMU (tests/support/vmimage.py, tests/support/vmlab.py; the guests: tests/vmlab/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import vmimage, vmlab
from tests.support.vmimage import ENTRY_FILES, Image
from tests.support.vmlab import Drive


def test_the_cache_key_hashes_every_file_of_the_recipe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vmimage, "RECIPE_DIR", tmp_path)
    (tmp_path / "build.sh").write_text("debootstrap bookworm\n")
    (tmp_path / "init.sh").write_text("#!/bin/sh\n")
    first = vmimage.recipe_key()
    assert len(first) == vmimage.KEY_CHARS and vmimage.recipe_key() == first
    (tmp_path / "init.sh").write_text("#!/bin/sh\nsshd\n")
    second = vmimage.recipe_key()
    (tmp_path / "packages.txt").write_text("fio\n")
    assert len({first, second, vmimage.recipe_key()}) == 3


def test_the_real_recipe_is_in_the_key() -> None:
    names = {path.name for path in vmimage.RECIPE_DIR.iterdir()}
    assert {"build.sh", "init.sh"} <= names


def test_an_entry_counts_only_when_every_file_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vmimage, "CACHE_ROOT", tmp_path)
    entry = tmp_path / "0123456789abcdef"
    entry.mkdir()
    for name in ENTRY_FILES[:-1]:
        (entry / name).write_text("x")
    assert vmimage.cached_image("0123456789abcdef") is None
    (entry / ENTRY_FILES[-1]).write_text("{}")
    assert vmimage.cached_image("0123456789abcdef") == Image("0123456789abcdef", entry)


def test_the_build_script_is_valid_shell() -> None:
    for script in ("build.sh", "init.sh"):
        done = subprocess.run(["sh" if script == "init.sh" else "bash", "-n",
                               str(vmimage.RECIPE_DIR / script)], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_qemu_gets_software_emulation_and_each_drive_its_own_nvme_controller(
        tmp_path: Path) -> None:
    lab = object.__new__(vmlab.VmLab)
    lab.dir = tmp_path
    guest = vmlab.Guest(lab, "g1", [Drive.scratch(1 << 20), Drive.backed_by("/dev/loop7")],
                        "1G", 2)
    guest.port = 40022
    image = Image("k", tmp_path / "k")
    argv = guest._qemu_argv(image)
    joined = " ".join(argv)
    assert "tcg,thread=multi" in joined and "kvm" not in joined
    assert "hostfwd=tcp:127.0.0.1:40022-:22" in joined and "restrict=on" in joined
    assert f"name=opt/ssdlab/authorized_keys,file={tmp_path}/g1/id_ed25519.pub" in argv
    drives = [arg for arg in argv if arg.startswith("file=") and "if=none" in arg]
    assert drives == [
        f"file={tmp_path}/g1/nvme0.img,if=none,id=nd0,format=raw,cache=none,aio=native,"
        "discard=unmap",
        "file=/dev/loop7,if=none,id=nd1,format=raw,cache=none,aio=native,discard=unmap"]
    assert "nvme,serial=VMLAB1,id=nvme1" in argv
    assert "nvme-ns,drive=nd1,bus=nvme1,nsid=1" in argv


def test_sata_and_scsi_drives_sit_on_ahci_and_virtio_scsi_and_keep_nvme_numbering(
        tmp_path: Path) -> None:
    lab = object.__new__(vmlab.VmLab)
    lab.dir = tmp_path
    drives = [Drive.scratch(1 << 20, "sata"), Drive.scratch(1 << 20),
              Drive.scratch(1 << 20, "scsi"), Drive.backed_by("/dev/loop7"),
              Drive.scratch(1 << 20, "sata")]
    guest = vmlab.Guest(lab, "g1", drives, "1G", 2)
    assert guest.serials == ["VMLABSATA0", "VMLAB0", "VMLABSCSI0", "VMLAB1", "VMLABSATA1"]
    assert guest.device(1) == "/dev/nvme0n1" and guest.device(3) == "/dev/nvme1n1"
    guest.port = 40022
    argv = guest._qemu_argv(Image("k", tmp_path / "k"))
    devices = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-device"]
    assert devices[1:] == [  # after the NIC: NVMe first, as without other buses
        "nvme,serial=VMLAB0,id=nvme0", "nvme-ns,drive=nd1,bus=nvme0,nsid=1",
        "nvme,serial=VMLAB1,id=nvme1", "nvme-ns,drive=nd3,bus=nvme1,nsid=1",
        "ahci,id=ahci0", "virtio-scsi-pci,id=scsi0",
        "ide-hd,drive=nd0,bus=ahci0.0,model=VMLAB-SATA,serial=VMLABSATA0,rotation_rate=1",
        "scsi-hd,drive=nd2,bus=scsi0.0,channel=0,scsi-id=0,lun=0,serial=VMLABSCSI0,"
        "rotation_rate=1",
        "ide-hd,drive=nd4,bus=ahci0.1,model=VMLAB-SATA,serial=VMLABSATA1,rotation_rate=1"]
    files = [arg for arg in argv if arg.startswith("file=") and "if=none" in arg]
    assert files[0] == (f"file={tmp_path}/g1/sata0.img,if=none,id=nd0,format=raw,"
                        "cache=none,aio=native,discard=unmap")
    with pytest.raises(ValueError, match="one of nvme, sata, scsi"):
        Drive.scratch(1 << 20, "sas")
    with pytest.raises(ValueError, match="at most 6 SATA"):
        vmlab.drive_serials([Drive.scratch(1 << 20, "sata")] * 7)


def test_only_labs_of_dead_owners_are_cleared(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vmlab, "SCRATCH_ROOT", tmp_path)
    mine = tmp_path / f"{vmlab.LAB_PREFIX}{os.getpid()}-{vmlab._start_time(os.getpid())}"
    # a process that has ended: its pid with another start time is someone else
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"{vmlab.LAB_PREFIX}{gone.stdout.strip()}-1"
    foreign = tmp_path / f"{vmlab.LAB_PREFIX}notours"
    for lab_dir in (mine, dead, foreign):
        (lab_dir / "g1").mkdir(parents=True)
        (lab_dir / "g1" / "console.log").write_text("boot\n")
    assert vmlab.clear_dead_labs() == [dead]
    assert mine.exists() and foreign.exists() and not dead.exists()


def test_a_missing_tool_names_its_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which",
                        lambda tool: None if tool.startswith("qemu") else f"/usr/bin/{tool}")
    problem = vmimage.host_problem()
    assert problem is not None
    assert "apt-get install qemu-system-x86 qemu-utils" in problem


FAKE_BUILD = """#!/bin/bash
# a stand-in for build.sh: counts its runs, takes a moment, writes an entry's files
set -e
echo run >> "$(dirname "$0")/../runs"
sleep 0.5
[ -e "$(dirname "$0")/../fail" ] && { echo "E: Unable to locate package zfs-dkms"; exit 100; }
mkdir -p "$1/out" "$1/rootfs/etc"
for name in root.raw vmlinuz initrd.img; do echo "$name" > "$1/out/$name"; done
echo "fio 3.33-3" > "$1/out/packages.txt"
echo 6.1.0-test > "$1/out/kernel.txt"
"""


@pytest.fixture
def fake_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "build.sh").write_text(FAKE_BUILD)
    monkeypatch.setattr(vmimage, "RECIPE_DIR", recipe)
    monkeypatch.setattr(vmimage, "CACHE_ROOT", tmp_path / "cache")
    monkeypatch.setattr(vmimage, "host_problem", lambda: None)
    return recipe


def test_two_builders_at_once_build_one_entry_and_both_use_it(fake_recipe: Path) -> None:
    key = vmimage.recipe_key()
    stale = vmimage.CACHE_ROOT / f".build-{key}-999999999"  # a killed builder's
    (stale / "rootfs").mkdir(parents=True)
    said: list[str] = []
    with ThreadPoolExecutor(2) as pool:
        images = list(pool.map(lambda _: vmimage.ensure_image(said.append), range(2)))
    assert images[0] == images[1] == vmimage.cached_image(key)
    assert (fake_recipe.parent / "runs").read_text() == "run\n"
    assert any("waiting for it" in line for line in said)
    manifest = images[0].manifest()
    assert manifest["key"] == key and manifest["kernel"] == "6.1.0-test"
    assert manifest["packages"] == 1
    assert sorted(p.name for p in vmimage.CACHE_ROOT.iterdir()) == [f".lock-{key}", key]
    assert vmimage.ensure_image(said.append) == images[0]  # reused: no third run
    assert (fake_recipe.parent / "runs").read_text() == "run\n"


def test_a_failed_build_names_its_log_and_leaves_no_entry(fake_recipe: Path) -> None:
    (fake_recipe.parent / "fail").write_text("")
    key = vmimage.recipe_key()
    with pytest.raises(vmimage.VmLabError) as failed:
        vmimage.ensure_image(lambda _: None)
    log = vmimage.CACHE_ROOT / f"build-{key}.log"
    assert f"the whole log is {log}" in str(failed.value)
    assert "Unable to locate package zfs-dkms" in str(failed.value)
    assert vmimage.cached_image(key) is None
    assert sorted(p.name for p in vmimage.CACHE_ROOT.iterdir()) == [
        f".lock-{key}", f"build-{key}.log"]


def test_the_tiers_modules_are_planned_to_two_workers_heaviest_first() -> None:
    """The VM tier's plan (tests/vmlab/conftest.py): the arrays module's worker gets the
    SATA/SCSI module and the short killed-run one beside it, the other worker the hosts, NVMe
    and slow-member modules (985 and 980 s by the weights)."""
    from tests.vmlab.conftest import MODULE_SECONDS, plan_modules
    modules = [f"tests/vmlab/{name}" for name in sorted(MODULE_SECONDS)]
    planned = plan_modules(modules, 2)
    assert [[m.rsplit("/", 1)[1] for m in worker] for worker in planned] == [
        ["test_arrays_real.py", "test_sata_scsi_real.py", "test_vmlab_real.py"],
        ["test_guest_hosts_real.py", "test_nvme_real.py", "test_slow_member_real.py"]]
    # a module the weights do not know still runs, on the worker with the least so far
    three = plan_modules(["tests/vmlab/test_new_real.py", *modules], 3)
    assert [[m.rsplit("/", 1)[1] for m in worker] for worker in three] == [
        ["test_arrays_real.py"],
        ["test_guest_hosts_real.py", "test_sata_scsi_real.py", "test_vmlab_real.py"],
        ["test_nvme_real.py", "test_new_real.py", "test_slow_member_real.py"]]
    assert plan_modules([], 2) == [[], []]
