"""`python -m checks [SITE_OR_LEDGER_JSON]`: verify a built book's ledger.

Exit 0: the ledger matches the sources beside it and has no problem. Exit 1: a readable list of the
problems (an unexpected failure or pass, a stored outcome its verdict contradicts, a chapter whose
executed checks are not all in the ledger, a chapter whose execution failed, an empty ledger). Exit 2,
with a one-line reason: no ledger, a malformed one, one from a build that did not finish, or one built
from other sources (the checks package, torch, Python, numpy, pandas, the devices, a chapter's text).
"""

from __future__ import annotations

import argparse
import sys

from .sphinx import ledger
from .core.errors import CheckInputError

DEFAULT_SITE = "_build/html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks", description=__doc__.splitlines()[0])
    parser.add_argument("ledger", nargs="?", default=DEFAULT_SITE,
                        help=f"a built site's folder or its {ledger.LEDGER_JSON} (default: {DEFAULT_SITE})")
    arguments = parser.parse_args(argv)
    try:
        found = ledger.read(arguments.ledger)
        differences = ledger.source_mismatches(found)
        if differences:
            raise CheckInputError(f"{found.path} was not built from the sources beside it ("
                                  + "; ".join(differences) + "); rebuild the book")
        problems = ledger.verify(found)
    except CheckInputError as error:
        print(f"python -m checks: {error}", file=sys.stderr)
        return 2
    print(ledger.report(found.entries, problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
