"""What a drive wrote over a run by its own count (issue 15, item 7): the difference of
two readings of its health log (:mod:`ssdlab.targets.health`), with the count's
resolution and, where the drive reports NAND writes too, the write amplification.
Pure functions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Written:
    """What a drive counted as written between two readings of its health log."""

    host_bytes: int
    #: the count's unit: the true figure lies within this of ``host_bytes``
    resolution_bytes: int
    media_bytes: int | None

    @property
    def write_amplification(self) -> float | None:
        """NAND bytes per host byte, where the drive reports both."""
        if self.media_bytes is None or self.host_bytes <= 0:
            return None
        return self.media_bytes / self.host_bytes


def written_between(before_host: int, after_host: int, resolution: int,
                    before_media: int | None = None,
                    after_media: int | None = None) -> Written:
    """Bytes written between two health-log readings (ValueError when the count fell:
    another drive, or its log was reset)."""
    if after_host < before_host:
        raise ValueError("the drive's count of bytes written went down between the "
                         "readings: not the same drive, or its log was reset")
    media = (after_media - before_media
             if before_media is not None and after_media is not None else None)
    return Written(after_host - before_host, resolution, media)
