"""ssdlab: a storage test lab in software (SNIA PTS and review methodology on fio)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ssdlab")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
