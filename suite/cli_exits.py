"""How the commands end (suite.run, suite.merge): the exit status of an interrupt or of a defect, in one line.

0, 1 and 2 are each command's own (ok; a failed row or regression; a usage or input error). Here: 130 for Ctrl-C,
141 where the reader of standard output left early (``| head``), as a shell reports a writer that SIGPIPE ended, and 3
for an internal error (an exception that is not one of the command's own refusals, or a SystemExit past argument
parsing, which only a kernel or plugin raises): one line, the traceback only with ``debug``.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

INTERRUPTED = 130
INTERNAL = 3
READER_LEFT = 141  # 128 + SIGPIPE


def stdout_reader_left() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll's POLLERR on the write end): a
    BrokenPipeError is that reader's going only then, not a worker's pipe breaking."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file descriptor (a test's capture)
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


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
    """``body()``'s exit status, or INTERRUPTED / INTERNAL with one line on stderr, or READER_LEFT quietly."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"\n{interrupted}", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError as e:
        if not stdout_reader_left():  # another pipe (a worker's): a defect
            return _internal(e, debug)
        drop_stdout()  # the reader of standard output left (| head): nothing more to say
        return READER_LEFT
    except SystemExit as e:  # never a success, whatever its code
        print(f"internal error: something the command called raised SystemExit({e.code!r})", file=sys.stderr)
        return INTERNAL
    except Exception as e:  # a defect, not bad input
        return _internal(e, debug)


def _internal(e: Exception, debug: bool) -> int:
    if debug:
        raise e
    print(f"internal error: {type(e).__name__}: {e} (--debug shows where)", file=sys.stderr)
    return INTERNAL
