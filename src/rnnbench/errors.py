"""The one error type for bad input. The command line reports an InputError as one line and exits
2 with nothing written; any other exception is a bug of ours (or of a framework): exit 1 with a
one-line summary and the path of the saved traceback (rnnbench.cli.main)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: a flag, a config file, a results file, a name. The message names
    the file, key or flag and says how to fix it. A ValueError subclass so library callers that
    catch ValueError keep working."""
