"""A small fake /sys and /proc for the target code's tests: disks, partitions, stacking,
mounts and swaps."""

from __future__ import annotations

from pathlib import Path

SATA_HOST = "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0"
SAS_HOST = "devices/pci0000:00/0000:00:03.0/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0"
NVME_CTRL = "devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0"
VIRTIO = "devices/pci0000:00/0000:00:02.0/virtio1"
VIRTUAL = "devices/virtual"


class FakeSys:
    """A small fake /sys and /proc: disks, partitions, stacking, mounts and swaps."""

    def __init__(self, root: Path) -> None:
        self.sys = root / "sys"
        self.proc = root / "proc"
        (self.proc / "self").mkdir(parents=True)
        (self.sys / "class" / "block").mkdir(parents=True)
        (self.sys / "dev" / "block").mkdir(parents=True)
        self.mounts: list[str] = []
        self.set_swaps([])

    def _node(self, directory: Path, name: str, devnum: str, size_sectors: int) -> None:
        directory.mkdir(parents=True)
        (directory / "dev").write_text(f"{devnum}\n")
        (directory / "size").write_text(f"{size_sectors}\n")
        (directory / "ro").write_text("0\n")
        (directory / "holders").mkdir()
        (directory / "slaves").mkdir()
        (self.sys / "class" / "block" / name).symlink_to(directory)
        (self.sys / "dev" / "block" / devnum).symlink_to(directory)

    def disk(
        self,
        name: str,
        devnum: str,
        *,
        parent: str = SATA_HOST,
        size_sectors: int = 2_000_000,
        queue: dict[str, str] | None = None,
        device: dict[str, str | bytes] | None = None,
    ) -> Path:
        directory = self.sys / parent / "block" / name
        self._node(directory, name, devnum, size_sectors)
        (directory / "removable").write_text("0\n")
        settings = {
            "logical_block_size": "512",
            "physical_block_size": "4096",
            "rotational": "0",
            "scheduler": "[mq-deadline] none",
            "discard_max_bytes": "2147450880",
            **(queue or {}),
        }
        (directory / "queue").mkdir()
        for key, value in settings.items():
            (directory / "queue" / key).write_text(f"{value}\n")
        if device is not None:
            device_dir = self.sys / parent
            for key, raw in device.items():
                path = device_dir / key
                path.write_bytes(raw) if isinstance(raw, bytes) else path.write_text(raw)
            (directory / "device").symlink_to(device_dir)
        return directory

    def partition(self, disk: str, name: str, devnum: str, number: int, size: int = 1000) -> None:
        directory = (self.sys / "class" / "block" / disk).resolve() / name
        self._node(directory, name, devnum, size)
        (directory / "partition").write_text(f"{number}\n")
        (directory / "start").write_text("2048\n")

    def write(self, name: str, relative: str, value: str) -> None:
        path = (self.sys / "class" / "block" / name).resolve() / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)

    def stack(self, upper: str, lower: str) -> None:
        """``upper`` (dm, md) is built on ``lower``."""
        block = self.sys / "class" / "block"
        (block / upper / "slaves" / lower).symlink_to(block / lower)
        (block / lower / "holders" / upper).symlink_to(block / upper)

    def mount(self, devnum: str, point: str, fs_type: str, source: str) -> None:
        number = 20 + len(self.mounts)
        escaped = point.replace(" ", "\\040")
        self.mounts.append(
            f"{number} 1 {devnum} / {escaped} rw,relatime shared:{number} - {fs_type} {source} rw"
        )
        (self.proc / "self" / "mountinfo").write_text("\n".join(self.mounts) + "\n")

    def set_swaps(self, entries: list[tuple[str, str]]) -> None:
        lines = ["Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"]
        lines += [f"{path}\t{kind}\t\t1048572\t\t0\t\t-2" for path, kind in entries]
        (self.proc / "swaps").write_text("\n".join(lines) + "\n")
