"""How the commands end (suite.run, suite.merge): the exit status of an interrupt or of a defect, in one line.

0, 1 and 2 are each command's own (ok; a failed row or regression; a usage or input error). Here: 130 for Ctrl-C, and
3 for an internal error (an exception that is not one of the command's own refusals, or a SystemExit past argument
parsing, which only a kernel or plugin raises): one line, the traceback only with ``debug``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

INTERRUPTED = 130
INTERNAL = 3


def guarded(body: Callable[[], int], debug: bool, interrupted: str = "interrupted") -> int:
    """``body()``'s exit status, or INTERRUPTED / INTERNAL with one line on stderr."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"\n{interrupted}", file=sys.stderr)
        return INTERRUPTED
    except SystemExit as e:  # never a success, whatever its code
        print(f"internal error: something the command called raised SystemExit({e.code!r})", file=sys.stderr)
        return INTERNAL
    except Exception as e:  # a defect, not bad input
        if debug:
            raise
        print(f"internal error: {type(e).__name__}: {e} (--debug shows where)", file=sys.stderr)
        return INTERNAL
