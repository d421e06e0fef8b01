"""Put a submission's nbgrader cell metadata back as it was released, before nbgrader sees it.

nbgrader trusts the metadata a notebook carries: a test cell whose ``grade`` flag was turned off
is never scored, an answer cell that lost its metadata or a graded cell the student added makes
the notebook fail validation, and a renamed ``grade_id`` loses the cell's points. Here every
cell of the submission is matched to the released notebook, by the cell's ``id`` (nbformat 4.5,
kept by JupyterLab, Colab and nbgrader) or else by its ``grade_id``; a matched cell gets the
release's nbgrader metadata back, and nbgrader metadata that matches no released cell is removed
(the cell stays, as an ordinary cell of the student's). What was changed is returned, one phrase
each, for the feedback. Test cells that were deleted are put back later
(:class:`.nbgrader_setup.RestoreTestCells`) and their sources by nbgrader itself.
"""

from __future__ import annotations

import copy

from nbformat import NotebookNode

# The top-level metadata JupyterLab uses to lock a cell; nbgrader sets both on its cells.
LOCKS = ("deletable", "editable")


def _nbgrader(cell: NotebookNode) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell: NotebookNode) -> str | None:
    gid = _nbgrader(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def _what_changed(mine: dict, released: dict) -> str:
    """One phrase for a cell whose nbgrader metadata differs from the release's."""
    if not mine:
        return "its nbgrader metadata was removed"
    changes = []
    for key in ("grade_id", "grade", "solution", "locked", "points"):
        if mine.get(key) != released.get(key):
            changes.append(f"{key} {released.get(key)!r} -> {mine.get(key)!r}")
    return "nbgrader metadata changed (" + ", ".join(changes) + ")" if changes else ""


def restore_metadata(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """Give every cell of ``nb`` that matches a cell of ``release`` the release's nbgrader
    metadata, and remove nbgrader metadata that matches no released cell. Edits ``nb`` in
    place; returns what was changed, one phrase per cell (empty when the metadata is intact).
    """
    graded = [c for c in release.cells if _grade_id(c)]
    matches: dict[int, NotebookNode] = {}
    # By cell id first (it survives a renamed grade_id), then by grade_id (a cell pasted back in gets a new id).
    for key in (lambda c: c.get("id"), _grade_id):
        wanted = {key(c): c for c in graded if key(c) and c not in matches.values()}
        for index, cell in enumerate(nb.cells):
            match = wanted.get(key(cell)) if index not in matches and key(cell) else None
            if match is not None and match.cell_type == cell.cell_type:
                matches[index] = wanted.pop(key(cell))
    changed: list[str] = []
    for index, cell in enumerate(nb.cells):
        match = matches.get(index)
        if match is None:
            if "nbgrader" in cell.get("metadata", {}):
                name = _grade_id(cell) or cell.get("id") or f"number {index + 1}"
                del cell.metadata["nbgrader"]
                changed.append(f"cell {name}: nbgrader metadata that no released cell has was removed")
            continue
        released = _nbgrader(match)
        if _nbgrader(cell) != released:
            what = _what_changed(_nbgrader(cell), released)
            if what:
                changed.append(f"cell {released['grade_id']}: {what}")
            cell.metadata["nbgrader"] = copy.deepcopy(released)
        for key in LOCKS:
            if key in match.metadata:
                cell.metadata[key] = match.metadata[key]
    return changed


def tamper_note(changed: list[str]) -> str:
    """The sentence for the feedback ('' when nothing was changed)."""
    if not changed:
        return ""
    return ("Cell metadata restored from the released notebook (graded as released, each exercise on its "
            "own): " + "; ".join(changed) + ". ")
