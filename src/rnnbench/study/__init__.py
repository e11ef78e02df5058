"""Studies: measurements that are applications of their own (their own command line, workers and
writers) over rnnbench's drivers, checker and records, apart from the runner of `rnnbench run`."""
