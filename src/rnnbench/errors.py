"""The one error type for bad input. The command line reports an InputError as one line and exits
2 with nothing written; any other exception is a bug of ours (or of a framework): exit 1 with a
one-line summary and the path of the saved traceback (rnnbench.cli.main)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: a flag, a config file, a results file, a name. The message names
    the file, key or flag and says how to fix it. A ValueError subclass so library callers that
    catch ValueError keep working."""


def suggestions(name: str, known) -> list[str]:
    """The known names closest to a mistyped `name`, at most three, compared without regard to case:
    the name in another case; else the names it begins (a prefix of two or more characters, as a
    bug id is typed); else difflib's closest (ratio >= 0.6). The one suggestion function every
    "unknown NAME" message uses (models, drivers, suites, dtypes, environments, bug ids, keys)."""
    import difflib

    names = [str(k) for k in known]
    by_lower: dict[str, list[str]] = {}
    for k in names:
        by_lower.setdefault(k.lower(), []).append(k)
    typed = str(name).strip().lower()
    if typed in by_lower:
        return by_lower[typed][:3]
    begun = [k for k in names if len(typed) >= 2 and k.lower().startswith(typed)]
    if begun:
        return begun[:3]
    close = difflib.get_close_matches(typed, list(by_lower), n=3, cutoff=0.6)
    return [by_lower[c][0] for c in close]


def did_you_mean(name: str, known) -> str:
    """' (did you mean 'lstm'?)' naming suggestions(name, known), or '' where none is close."""
    close = suggestions(name, known)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def unknown(what: str, name: str, known, listed_by: str = "") -> str:
    """'unknown model 'LSTM' (did you mean 'lstm'?); ...' : with a suggestion and a long list of
    names, where to see them all (`listed_by`, e.g. "`rnnbench list`") instead of every name; else
    every known name."""
    names = [str(k) for k in known]
    hint = did_you_mean(name, names)
    if hint and listed_by and len(names) > 12:
        return f"unknown {what} {name!r}{hint}; {listed_by} names all {len(names)}"
    return f"unknown {what} {name!r}{hint}; known: {', '.join(names)}"
