"""Running rows: timing, one row in-process, worker processes, and the orchestrating runner."""
