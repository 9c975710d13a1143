"""Targets: what a device or file under test is, whether it is safe to use, and how to purge it.

* :mod:`ssdlab.targets.identity` identifies block devices, files, the host and fio.
* :mod:`ssdlab.targets.safety` refuses targets that must not be written (root disk, mounted...).
* :mod:`ssdlab.targets.purge` returns a device to a fresh-out-of-box-like state (blkdiscard, NVMe).
* :mod:`ssdlab.targets.filetarget` creates, marks, recreates and removes ssdlab's own test files.

Every function that reads sysfs or procfs takes ``sysfs=`` / ``proc=`` keyword arguments so
that tests can feed it a fake tree.
"""
