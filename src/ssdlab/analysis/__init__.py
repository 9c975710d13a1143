"""Analysis of measured rounds: steady-state detection (SNIA PTS and review rules)."""
