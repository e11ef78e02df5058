"""The command line, one module per subcommand (rnnbench.cli.run, .list, .table, ...), the shared
options in rnnbench.cli.options, and the error boundary and exit codes in rnnbench.cli.main."""

from rnnbench.cli.main import main

__all__ = ["main"]
