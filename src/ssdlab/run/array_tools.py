"""What each array backend needs on the machine (its tool, the kernel's support, a module
to load) and its version, checked before an array is built (run/array.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

from ssdlab.errors import ExitCode, UserError

#: what each backend needs on the machine: (tool, package, kernel check or None)
BACKEND_TOOLS = {
    "btrfs": ("mkfs.btrfs", "btrfs-progs", "/sys/fs/btrfs"),
    "md": ("mdadm", "mdadm", "/proc/mdstat"),
    "zfs": ("zpool", "zfsutils-linux", "/sys/module/zfs"),
}
#: the kernel module a backend's tool does not load itself: zpool says "The ZFS modules
#: are not loaded" where no init system loaded it at boot (the VM lab's guest)
BACKEND_MODULES = {"zfs": "zfs"}
VERSION_COMMANDS = {
    "btrfs": ["btrfs", "--version"],
    "md": ["mdadm", "--version"],
    "zfs": ["zfs", "version"],
}

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def check_backend(backend: str, *, say: Callable[[str], None] | None = None,
                  run: Runner | None = None) -> None:
    """The backend's tool and kernel support are here (one line otherwise). A module the
    tool does not load itself (ZFS's) is loaded with ``modprobe`` when ``run`` is given
    (a build; a dry run only checks)."""
    tool, package, kernel = BACKEND_TOOLS[backend]
    if shutil.which(tool) is None:
        raise UserError(f"{tool} is not installed: install the {package} package "
                        f"(apt install {package})", ExitCode.ENVIRONMENT)
    module = BACKEND_MODULES.get(backend)
    if not os.path.exists(kernel) and module is not None and run is not None:
        argv = ["modprobe", module]
        if say is not None:
            say(f"  $ {' '.join(argv)}")
        loaded = run(argv)
        if loaded.returncode != 0:
            raise UserError(f"the {module} kernel module cannot be loaded (`{' '.join(argv)}`: "
                            f"{(loaded.stderr or loaded.stdout).strip()}); `--dry-run` shows "
                            "the commands",
                            ExitCode.ENVIRONMENT)
    if not os.path.exists(kernel):
        raise UserError(f"this kernel has no {backend} support ({kernel} is missing); "
                        f"`--dry-run` shows the commands", ExitCode.ENVIRONMENT)


def backend_version(backend: str) -> str | None:
    try:
        done = subprocess.run(VERSION_COMMANDS[backend], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (done.stdout or done.stderr).strip().splitlines()
    return " ".join(line.strip() for line in text[:2]) or None
