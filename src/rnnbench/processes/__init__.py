"""The processes rnnbench starts and how they end: per-process temp dirs, what a worker started
(descendants), the parent's signals and streams, the framed pipe protocol, isolated workers, the
in-process thread pool, and the compile budget's alarm. Standard library only."""
