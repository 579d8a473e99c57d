"""Process-group lifecycle, free ports, bounded waits and component errors for the local stack.

Every server runs as the leader of its own process group, so stopping it also reaps whatever it
forked (postgres backends, JVM helpers). A watchdog process holds the other end of a pipe and
kills every still-registered group when the pipe closes, so nothing outlives the Python process
even when it is killed outright (SIGKILL, or SIGTERM, which skips atexit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

LOG_TAIL_LINES = 20


class StackError(RuntimeError):
    """A component failed to install, start or stop; names it and quotes its log."""

    def __init__(self, component: str, message: str, log_path: Path | None = None) -> None:
        self.component = component
        self.log_path = log_path
        text = f"{component}: {message}"
        if log_path is not None:
            text += f"\n  log file: {log_path}\n  last lines:\n{tail(log_path)}"
        super().__init__(text)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        content = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"    <unreadable: {exc}>"
    return "\n".join("    " + line for line in content[-lines:]) or "    <empty>"


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for an unused port on `host` (racy only against other port pickers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


_WATCHDOG_CODE = """
import os, shutil, signal, sys
groups, dirs = set(), set()
for line in sys.stdin:
    command, _, arg = line.rstrip("\\n").partition(" ")
    if command == "add":
        groups.add(int(arg))
    elif command == "remove":
        groups.discard(int(arg))
    elif command == "add-dir":
        dirs.add(arg)
    elif command == "remove-dir":
        dirs.discard(arg)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
for path in dirs:
    shutil.rmtree(path, ignore_errors=True)
"""


class _Watchdog:
    """Started on first use; one per Python process, shared by every stack in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None

    def send(self, command: str, arg: object) -> None:
        with self._lock:
            if self._proc is None:
                self._proc = subprocess.Popen(
                    [sys.executable, "-c", _WATCHDOG_CODE],
                    stdin=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # a Ctrl-C to our terminal must not reach it
                )
            assert self._proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.write(f"{command} {arg}\n")
                self._proc.stdin.flush()


WATCHDOG = _Watchdog()


def run_logged(
    component: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
    timeout: float = 900.0,
) -> None:
    """Run a setup command to completion, appending its output to the component's log."""
    with log_path.open("ab") as log:
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        try:
            proc = subprocess.run(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                user=user,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StackError(component, f"{argv[0]} failed: {exc}", log_path) from exc
    if proc.returncode != 0:
        raise StackError(component, f"{argv[0]} exited with {proc.returncode}", log_path)


class ManagedProcess:
    """One long-running server in its own process group, with idempotent stop."""

    def __init__(
        self,
        component: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.component = component
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.user = user
        self.stop_signal = stop_signal
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.alive():
            return
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                    cwd=self.cwd,
                    user=self.user,
                    start_new_session=True,
                )
            except OSError as exc:
                raise StackError(self.component, f"cannot launch: {exc}", self.log_path) from exc
        WATCHDOG.send("add", self._proc.pid)

    def stop(self, *, graceful: bool = True, timeout: float = 30.0) -> None:
        """Stop the leader (gracefully if asked), then kill whatever is left in its group."""
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid  # leader of a new session: pgid == pid
        if proc.poll() is None:
            if graceful:
                _signal_pid(proc.pid, self.stop_signal)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=timeout)
            _kill_group(pgid, signal.SIGKILL)
            proc.wait()
        _kill_group(pgid, signal.SIGKILL)
        WATCHDOG.send("remove", pgid)
        self._proc = None

    def exit_code(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_until(
    process: ManagedProcess,
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
) -> None:
    """Poll `ready` until true; fail fast if the process dies, with its log, on timeout too."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        if not process.alive():
            raise StackError(
                process.component,
                f"exited with code {process.exit_code()} before {what}",
                process.log_path,
            )
        try:
            if ready():
                return
        except Exception as exc:  # readiness probes fail in many ways while a server boots
            last_error = f" (last probe error: {exc!r})"
        if time.monotonic() >= deadline:
            raise StackError(
                process.component, f"not {what} after {timeout:.0f}s{last_error}", process.log_path
            )
        time.sleep(interval)
