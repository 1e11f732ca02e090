"""Did-you-mean hints for misspelt names (attribute keys, op names, dtypes) in error messages."""
from __future__ import annotations

import difflib


def did_you_mean(word: str, choices) -> str:
    """The hint to append to an error about an unknown ``word``: ``" (did you mean 'block'?)"`` for the closest of
    ``choices`` by edit similarity, else ``""``.

    >>> did_you_mean("blokc", ["grid", "block", "cluster"])
    " (did you mean 'block'?)"

    Post: the hint names a member of ``choices`` or is empty; it never suggests ``word`` itself.
    """
    candidates = [str(c) for c in choices if str(c) != str(word)]
    close = difflib.get_close_matches(str(word), candidates, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


__all__ = ["did_you_mean"]
