"""Executed records, as a chapter holds them: a sequence that displays as a check table."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..core.errors import CheckInputError
from .display import records_frame, records_html
from .records import Record


class Results(Sequence[Record]):
    """Executed records; displays as a table and embeds the records for the book's ledger."""

    def __init__(self, records: Sequence[Record]) -> None:
        self._records = tuple(records)

    def __getitem__(self, index):  # type: ignore[override]
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __add__(self, other: Results) -> Results:
        return Results((*self._records, *other))

    @property
    def passed(self) -> bool:
        return all(record.passed for record in self._records)

    def failures(self) -> Results:
        return Results([record for record in self._records if not record.passed])

    def one(self, **where: object) -> Record:
        """The single record whose fields equal where, e.g. one(device="cpu", how="stored")."""
        found = [r for r in self._records if all(getattr(r, key) == value for key, value in where.items())]
        if len(found) != 1:
            raise CheckInputError(f"{len(found)} records match {where}; expected exactly one")
        return found[0]

    def frame(self):
        return records_frame(list(self._records))

    def _repr_html_(self) -> str:
        return records_html(list(self._records))
