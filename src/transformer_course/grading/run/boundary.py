"""The boundary of one (student, assignment) pair: whatever one hand-in does, it is that pair's row.

Everything a grading run does for one pair, from finding and reading the hand-in to writing its
record, page and lateness, runs inside :func:`pair`. An exception there, of any kind
(``RecursionError`` from JSON nested a thousand deep, ``MemoryError``, ``OverflowError`` from a date
at the calendar's edge, ``UnicodeError``, an ``OSError`` of a student's file), becomes that pair's
:class:`Failure`: a status and a reason for its row, never the run's end. The class's tables are
written whatever one pair did.

Three things stay the run's, because every other pair would meet them too, or because the person
running it asked: a stop (Ctrl-C, SIGTERM: :mod:`.stop`), the interpreter's exit, and a fault of the
output folder while writing it (a full disk, a read-only ``OUT``: :mod:`.faults`).

What a failure is called depends on the stage it happened in:

- ``intake`` (finding, reading, recognising the hand-in): the hand-in cannot be read as a notebook,
  ``invalid`` (its bytes broke a reader: too deep, too large, not text, a value out of range), or
  ``refused`` (a file of it could not be opened); it is recorded, as the hand-in decides it;
- every other stage (``record``: writing its record and pages): ``grader-error``, not recorded,
  logged with its traceback, and graded again by the next run.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

from transformer_course.grading.run.faults import fault_of
from transformer_course.layout import GRADER_ERROR

STAGES = ("intake", "record", "lateness", "pages")
# What a reader raises on bytes it cannot make into a notebook: the hand-in's, not the grader's.
UNREADABLE = (RecursionError, MemoryError, UnicodeError, ValueError, OverflowError, TypeError, KeyError,
              IndexError, AttributeError)


@dataclass(frozen=True)
class Failure:
    """What went wrong for one pair: ``status`` of its row, ``reason`` for its row and page, the
    exception's ``trace`` for the instructor's log."""

    stage: str
    status: str
    reason: str
    trace: str
    error: BaseException

    @property
    def recorded(self) -> bool:
        """Whether the row is the hand-in's own verdict (kept), not the grader's failure (graded again)."""
        return self.status != GRADER_ERROR


def the_runs(error: BaseException, stage: str) -> bool:
    """Whether ``error`` ends the run rather than the pair: a stop, the interpreter's exit, or a fault of
    the storage where the stage writes the output folder."""
    if isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
        return True
    return stage != "intake" and fault_of(error, strict=True) is not None


def said(error: BaseException) -> str:
    """The exception in one short line (a student's bytes may be in its message: cut, one line)."""
    text = " ".join(str(error).split())
    if isinstance(error, RecursionError):
        text = "nested too deeply to read"
    elif isinstance(error, MemoryError):
        text = "too large to read in the memory a notebook may use"
    return f"{type(error).__name__}: {text[:160]}" if text else type(error).__name__


def failure(stage: str, error: BaseException) -> Failure:
    """The pair's :class:`Failure` for ``error`` raised in ``stage`` (one of :data:`STAGES`)."""
    trace = "".join(traceback.format_exception(error))
    if stage == "intake" and isinstance(error, OSError):
        return Failure(stage, "refused", f"refused: the hand-in could not be read ({said(error)}); nothing "
                       "was graded", trace, error)
    if stage == "intake" and isinstance(error, UNREADABLE):
        return Failure(stage, "invalid", f"invalid: the hand-in is not a notebook the grader can read "
                       f"({said(error)}); nothing was graded", trace, error)
    reason = (f"{GRADER_ERROR}: this notebook could not be graded because the grader failed while "
              f"{'reading it' if stage == 'intake' else 'writing its ' + stage} ({said(error)}); "
              "it is not the student's score")
    return Failure(stage, GRADER_ERROR, reason, trace, error)


@contextlib.contextmanager
def pair(stage: str) -> Iterator[list[Failure]]:
    """Run the block as one pair's ``stage``; yields a list that holds the pair's :class:`Failure`
    after the block when it raised (empty otherwise).

    Raises:
        KeyboardInterrupt, SystemExit: as raised (a stop is the run's).
        OSError: a fault of the output folder, outside the ``intake`` stage (the run's: see the module).
    """
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}: expected one of {', '.join(STAGES)}")
    failed: list[Failure] = []
    try:
        yield failed
    except BaseException as exc:  # noqa: BLE001 (the boundary: every exception is the pair's but the run's own)
        if the_runs(exc, stage):
            raise
        failed.append(failure(stage, exc))
