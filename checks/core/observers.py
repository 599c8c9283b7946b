"""Who is told of each finished check: a neutral hook, so that code outside the library (a book's ledger, a
test suite's log) can keep every CheckReport without the library knowing of it, and without wrapping the
caller's call.

check_jacobian (and so assert_gradients, check_module and assert_module_gradients, which call it) hands
each report it has finished to notify(), before assert_gradients judges it: a report that raises is seen
too. An observer is a callable of one argument, the report; add it to `observers` (and remove it when
done). An observer that raises stops the check with that error: it is part of the caller's program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Callables notified, in order, with each finished CheckReport.
observers: list[Callable[[Any], None]] = []


def notify(report: Any) -> None:
    """Hand a finished report to every observer."""
    for observer in tuple(observers):  # an observer may unsubscribe itself
        observer(report)
