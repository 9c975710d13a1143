"""``python -m ssdlab``: the same as the ``ssdlab`` command."""

from ssdlab.cli.main import entry

entry()
