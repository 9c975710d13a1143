"""Reports rendered from the results store only, never from a live run."""
