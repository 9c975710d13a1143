"""What to run, as validated, frozen data: fio job specs, tests, suites and profiles."""
