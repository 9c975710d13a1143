"""The VM lab's guest image: built from Debian's packages, cached outside the clone.

The recipe is ``tests/vmlab/image/`` (``build.sh`` and the guest's ``init.sh``). The image
is cached in ``/var/cache/ssdlab-vmlab/<key>/`` (``$SSDLAB_VMLAB_CACHE``), ``<key>`` a hash
of every file of the recipe, so that a second ``make test``, or another clone on the same
machine, reuses it and a changed recipe builds a new one. An entry holds ``root.raw`` (the
root file system, read only: each guest writes to its own overlay), ``vmlinuz``,
``initrd.img``, ``packages.txt`` (what is installed in it), ``kernel.txt``, ``build.log``
and ``manifest.json``. ssdlab itself is not in the image: the guest gets the checkout's
package at start (tests/support/vmlab.py), so the entry stays valid across commits.

Building takes 5-15 minutes on 2 cores, by the load (debootstrap, then one chroot
``apt-get install`` in which ``zfs-dkms`` builds the ZFS module for the guest's kernel at
native speed). It happens in ``.build-<key>-<pid>/`` beside the entries, under a lock per
key: a second builder waits for the first and then reuses its entry. The finished entry
appears whole by one rename. A killed builder's directory is removed by the next builder
(its chroot's mounts first, then the files on its own file system only).

``python -m tests.support.vmimage [build|path|key]``: build or reuse (``make vmlab``),
print the entry's path, print the key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

RECIPE_DIR = Path(__file__).resolve().parents[1] / "vmlab" / "image"
CACHE_ROOT = Path(os.environ.get("SSDLAB_VMLAB_CACHE", "/var/cache/ssdlab-vmlab"))
#: bumped when what the cache holds changes shape (the files of an entry)
CACHE_FORMAT = 1
KEY_CHARS = 16
BUILD_TIMEOUT_S = 3600
#: what the host needs to build the image and run guests (Debian packages in brackets)
HOST_TOOLS = {
    "debootstrap": "debootstrap",
    "mkfs.ext4": "e2fsprogs",
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}
ENTRY_FILES = ("root.raw", "vmlinuz", "initrd.img", "packages.txt", "kernel.txt",
               "build.log", "manifest.json")
_BUILD_DIR = re.compile(r"^\.build-([0-9a-f]+)-(\d+)$")


class VmLabError(RuntimeError):
    """The VM lab cannot do what was asked; the message says why and what to do."""


@dataclass(frozen=True)
class Image:
    """A cached guest image."""

    key: str
    dir: Path

    @property
    def root(self) -> Path:
        return self.dir / "root.raw"

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    def manifest(self) -> dict[str, object]:
        data = json.loads((self.dir / "manifest.json").read_text())
        assert isinstance(data, dict)
        return data


def host_problem() -> str | None:
    """Why this machine cannot build or run guests, or None when it can."""
    if os.geteuid() != 0:
        return "the VM lab needs root (debootstrap, chroot)"
    missing = sorted({package for tool, package in HOST_TOOLS.items()
                      if shutil.which(tool) is None})
    if missing:
        return (f"the VM lab needs {', '.join(missing)}: apt-get install {' '.join(missing)} "
                "(make setup installs them)")
    return None


def recipe_key() -> str:
    """The cache key: a hash of every file of the recipe, names and contents."""
    digest = hashlib.sha256(f"ssdlab-vmlab cache format {CACHE_FORMAT}\n".encode())
    for path in sorted(RECIPE_DIR.iterdir()):
        if path.is_file():
            digest.update(f"{path.name}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:KEY_CHARS]


def cached_image(key: str | None = None) -> Image | None:
    """The cache entry of the recipe as it is now (or of ``key``), when it is there."""
    key = key or recipe_key()
    image = Image(key, CACHE_ROOT / key)
    if all((image.dir / name).exists() for name in ENTRY_FILES):
        return image
    return None


def ensure_image(say: Callable[[str], None] = print) -> Image:
    """The cached image, built first (5-15 minutes) when it is not there yet."""
    key = recipe_key()
    image = cached_image(key)
    if image is not None:
        return image
    problem = host_problem()
    if problem:
        raise VmLabError(problem)
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE_ROOT / f".lock-{key}", say) as lock_fd:
        image = cached_image(key)  # built by the builder we waited for
        if image is not None:
            return image
        _remove_stale_builds(key)
        return _build(key, lock_fd, say)


@contextlib.contextmanager
def _locked(path: Path, say: Callable[[str], None]) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"vmlab: another build of this image is under way; waiting for it ({path})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _remove_stale_builds(key: str) -> None:
    """Remove build directories left by killed builders: this key's (its lock is held
    here, so no one builds into them), and any other key's whose builder is gone."""
    for path in CACHE_ROOT.iterdir():
        match = _BUILD_DIR.match(path.name)
        if match and (match.group(1) == key or not _pid_alive(int(match.group(2)))):
            remove_tree(path)


def mounts_under(path: Path) -> list[str]:
    """The mount points at or below ``path``, deepest first."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(path) or point.startswith(f"{path}/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """Remove a directory of the lab's: what is mounted below it (a chroot's /dev, /proc,
    a FUSE file system) is unmounted first, and the removal never crosses into another
    file system."""
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    left = mounts_under(path)
    if left:
        raise VmLabError(f"cannot remove {path}: {left[0]} is still mounted")
    for _attempt in range(3):  # a process that just ended may still be writing in it
        done = subprocess.run(["rm", "-rf", "--one-file-system", str(path)],
                              capture_output=True, text=True, check=False)
        if not path.exists():
            return
        time.sleep(1.0)
    raise VmLabError(f"cannot remove {path}: {done.stderr.strip().splitlines()[:1]}")


def _build(key: str, lock_fd: int, say: Callable[[str], None]) -> Image:
    work = CACHE_ROOT / f".build-{key}-{os.getpid()}"
    log = CACHE_ROOT / f"build-{key}.log"
    work.mkdir()
    say(f"vmlab: building the guest image {key} (5-15 minutes; log: {log})")
    started = time.monotonic()
    try:
        with log.open("w") as out:
            # the lock goes to the script too: if this process dies, a second builder
            # still waits for the script to end before it clears the directory
            done = subprocess.run(
                ["bash", str(RECIPE_DIR / "build.sh"), str(work)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT_S, pass_fds=(lock_fd,), check=False)
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise VmLabError(f"the guest image build failed (exit {done.returncode}); "
                             f"the whole log is {log}; its end:\n{tail}")
        seconds = time.monotonic() - started
        out_dir = work / "out"
        shutil.move(str(log), out_dir / "build.log")
        packages = (out_dir / "packages.txt").read_text().splitlines()
        manifest = {
            "key": key,
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(seconds, 1),
            "kernel": (out_dir / "kernel.txt").read_text().strip(),
            "packages": len(packages),
            "recipe": {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                       for path in sorted(RECIPE_DIR.iterdir()) if path.is_file()},
        }
        (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        os.chmod(out_dir / "root.raw", 0o444)
        out_dir.rename(CACHE_ROOT / key)
        say(f"vmlab: built the guest image {key} in {seconds:.0f} s")
    finally:
        try:
            remove_tree(work)
        except VmLabError as exc:  # the entry is whole; the next builder clears this
            say(f"vmlab: {exc}")
    image = cached_image(key)
    assert image is not None
    return image


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "build"
    try:
        if what == "key":
            print(recipe_key())
        elif what == "path":
            image = cached_image()
            if image is None:
                raise VmLabError(f"the guest image {recipe_key()} is not built: make vmlab")
            print(image.dir)
        elif what == "build":
            image = ensure_image()
            print(f"vmlab: guest image {image.key} at {image.dir}")
        else:
            raise VmLabError(f"unknown command {what!r}: build, path or key")
    except VmLabError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
