"""fio behind an interface: job files from specs, the runner, the output parser."""
