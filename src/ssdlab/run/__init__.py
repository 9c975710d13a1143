"""Running suites: purge, precondition, rounds, steady state, journal to the store."""
