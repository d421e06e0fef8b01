"""Counts as people write them: ``1 notebook``, ``2 notebooks``, never ``1 notebooks``."""

from __future__ import annotations


def count(n: int | float, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun that agrees with it: ``count(1, "assignment")`` is ``1 assignment``,
    ``count(0, "pair")`` is ``0 pairs``; ``plural`` for a noun not made with an s
    (``count(2, "notebook has", "notebooks have")``)."""
    return f"{n:g} {singular if n == 1 else plural or singular + 's'}"
