"""`python -m checks [SITE_OR_LEDGER_JSON]`: verify a built book's ledger.

Exits 0 when every failure was declared an expected failure and every expected failure failed; 1 with a
readable list of the problems otherwise; 2 when there is no readable ledger.
"""

from __future__ import annotations

import argparse
import sys

from . import ledger
from .errors import CheckInputError

DEFAULT_SITE = "_build/html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks", description=__doc__.splitlines()[0])
    parser.add_argument("ledger", nargs="?", default=DEFAULT_SITE,
                        help=f"a built site's folder or its {ledger.LEDGER_JSON} (default: {DEFAULT_SITE})")
    arguments = parser.parse_args(argv)
    try:
        entries = ledger.load(arguments.ledger)
    except CheckInputError as error:
        print(f"python -m checks: {error}", file=sys.stderr)
        return 2
    print(ledger.report(entries))
    return 1 if ledger.problems(entries) else 0


if __name__ == "__main__":
    sys.exit(main())
