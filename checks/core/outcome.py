"""The one vocabulary of a check's outcome: of an element, of a whole check, and of a ledger record."""

from typing import Literal

Outcome = Literal["pass", "fail", "inconclusive"]
