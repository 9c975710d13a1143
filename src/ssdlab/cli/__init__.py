"""The ``ssdlab`` command: thin commands over the Python API."""
