"""The one error type for bad input. The command line reports an InputError as one line and exits
2 with nothing written; any other exception is a bug of ours (or of a framework): exit 1 with a
one-line summary and the path of the saved traceback (rnnbench.cli.main)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: a flag, a config file, a results file, a name. The message names
    the file, key or flag and says how to fix it. A ValueError subclass so library callers that
    catch ValueError keep working."""


def did_you_mean(name: str, known) -> str:
    """' (did you mean 'lstm'?)' naming the known names closest to a mistyped `name` (difflib's
    ratio >= 0.6, at most three), or '' where none is close."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
