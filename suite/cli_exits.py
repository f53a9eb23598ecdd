"""How the commands end (suite.run, suite.merge): the exit status of an interrupt or of a defect, in one line.

0, 1 and 2 are each command's own (ok; a failed row or regression; a usage or input error). Here: 130 for Ctrl-C,
141 where the reader of standard output left early (``| head``), as a shell reports a writer that SIGPIPE ended, and 3
for an internal error (an exception that is not one of the command's own refusals, or a SystemExit past argument
parsing, which only a kernel or plugin raises): one line, the traceback only with ``debug``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

INTERRUPTED = 130
INTERNAL = 3
READER_LEFT = 141  # 128 + SIGPIPE


def drop_stdout() -> None:
    """The reader of standard output has gone: what is still printed, and the interpreter's flush at exit, go to
    /dev/null instead of raising BrokenPipeError again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file descriptor (a test's capture): replace the stream
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - it stands in for stdout until the process exits
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


@contextmanager
def reader_may_leave() -> Iterator[None]:
    """Around the printing of a verdict already reached (a gate's table, a report of files already written): where
    the reader leaves early, the rest of the output is dropped and the command still ends with its own status."""
    try:
        yield
    except BrokenPipeError:
        drop_stdout()


def guarded(body: Callable[[], int], debug: bool, interrupted: str = "interrupted") -> int:
    """``body()``'s exit status, or INTERRUPTED / INTERNAL with one line on stderr."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"\n{interrupted}", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # the reader of standard output left (| head): not a defect, nothing more to say
        drop_stdout()
        return READER_LEFT
    except SystemExit as e:  # never a success, whatever its code
        print(f"internal error: something the command called raised SystemExit({e.code!r})", file=sys.stderr)
        return INTERNAL
    except Exception as e:  # a defect, not bad input
        if debug:
            raise
        print(f"internal error: {type(e).__name__}: {e} (--debug shows where)", file=sys.stderr)
        return INTERNAL
