"""A command's own peak resident memory and CPU time, measured from outside.

`ru_maxrss` of a child that a large process started is not the child's alone: Linux
records, at `exec`, the high-water mark of the memory the child had before it (the
parent's, copied by fork or shared by vfork as `subprocess` starts it) into the same
figure, so a child of a 150 MiB test process "peaks" at 150 MiB whatever it does.
`Alone` runs the command under a small launcher (an interpreter without `site`, ~10 MiB)
that forks, execs the command, waits for it with `wait4` and writes the rusage it got to
a file: the command's own peak (or the launcher's, if that were larger) and its CPU time,
exactly, with no sampling.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

_LAUNCH = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, use = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{use.ru_maxrss} {use.ru_utime} {use.ru_stime} {os.getpid()} {pid}")
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


class Usage(NamedTuple):
    """What the command used: its peak resident bytes and CPU seconds (user + system)."""

    peak: int
    cpu: float


class Alone:
    """`command` (an executable's path first) as `argv` to run under the launcher; once
    it ended, `usage()` reads what it used."""

    def __init__(self, command: list[str]) -> None:
        fd, self._path = tempfile.mkstemp(prefix="peak-rss-")
        os.close(fd)
        self.argv = [sys.executable, "-S", "-c", _LAUNCH, self._path, *command]

    def usage(self) -> Usage:
        text = Path(self._path).read_text()
        os.unlink(self._path)
        maxrss, utime, stime, _, _ = text.split()
        return Usage(int(maxrss) * 1024, float(utime) + float(stime))

    def command_pid(self, launcher: int) -> int | None:
        """The command's process id, the launcher's only child (None before the fork)."""
        try:
            children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None
