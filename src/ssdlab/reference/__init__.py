"""Reference data: manufacturers' claimed figures and figures that reviews published.

:mod:`ssdlab.reference.specs` loads the vendor table shipped with ssdlab
(``data/vendor-specs.csv``) and matches a device's model string to a row of it.
:mod:`ssdlab.reference.published` reads a file of published review results and stores
each (source, device) as a read-only reference run, so measured drives can be shown
beside reviewed ones. Both are described in docs/reference-data.md.
"""

from ssdlab.reference.specs import (
    VendorSpec,
    find_spec,
    find_specs,
    load_specs,
    match_spec,
)

__all__ = ["VendorSpec", "find_spec", "find_specs", "load_specs", "match_spec"]
