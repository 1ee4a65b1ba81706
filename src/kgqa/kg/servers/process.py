"""Server processes by pid: started in a session of their own, found again from a recorded pid, stopped as a group.

A server started here and one found again from a state file written by another kgqa command are the same kind of object
(:class:`ServerProcess`): only the pid and the server's directory are needed to tell whether it still runs and to
stop it, so a server may outlive the command that started it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kgqa.errors import ConfigError

__all__ = ["ServerProcess", "choose_port", "find_executable", "free_port", "port_free", "tail_log"]

#: how long :attr:`ServerProcess.running` reads an empty command line again before it takes the pid for another process
_CMDLINE_WAIT_S = 1.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now. SO_REUSEADDR as the servers set it, so a port in TIME_WAIT
    after a stop still counts as free (a restarted endpoint keeps its URL)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(host: str, *preferred: int | None) -> int:
    """The first of the ``preferred`` ports that is free on ``host`` now, else one the OS picks."""
    for candidate in preferred:
        if candidate and port_free(host, candidate):
            return candidate
    return free_port()


def find_executable(name: str, hint: str) -> str:
    """The path of executable ``name``: on PATH, else beside the running Python (a venv's ``bin`` that is not on PATH,
    where ``pip install oxigraph`` puts its binary), else a ConfigError saying how to install it."""
    path = shutil.which(name)
    if path is not None:
        return path
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise ConfigError(f"the {name!r} executable was not found on PATH nor beside {sys.executable}; {hint}")


def tail_log(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a server's log, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


class ServerProcess:
    """A process known by its pid: a server in a session of its own (so it stops as one process group), or a loader.

    ``marker`` is text its command line contains (the server's directory): a pid read back from a state file may belong
    to an unrelated process by now, and only the marker tells the server from it.
    """

    def __init__(self, pid: int, marker: str) -> None:
        self.pid = pid
        self.marker = marker
        #: The exit status, once collected (only a child of this Python process has one to collect).
        self.returncode: int | None = None

    def __repr__(self) -> str:
        return f"ServerProcess(pid={self.pid}, marker={self.marker!r})"

    @classmethod
    def spawn(cls, argv: Sequence[str], log: Path, marker: str) -> ServerProcess:
        """Start ``argv`` in a new session, stdin from /dev/null and output appended to ``log``. Only the pid is kept,
        so the server may outlive this process (``posix_spawn`` rather than ``Popen``, whose object would warn when
        dropped while the server runs)."""
        log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            file_actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                            (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]
            pid = os.posix_spawn(argv[0], list(argv), dict(os.environ), file_actions=file_actions, setsid=True)
        finally:
            os.close(log_fd)
        return cls(pid, marker)

    def _collect(self) -> bool:
        """Collect the exit status of our own exited child, so that it does not stay a zombie; False when the process
        is not our child (one found again from a pid recorded by another command)."""
        if self.returncode is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)
        return True

    @property
    def exited(self) -> bool:
        """Whether the process has ended and released its files and ports."""
        if self._collect():
            # Our child: waitpid reports it only once all its threads are gone. A zombie leader in /proc says less: its
            # other threads may still hold the listening socket.
            return self.returncode is not None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # it exists, under another user
        return _is_zombie(self.pid)

    @property
    def running(self) -> bool:
        """Whether the process still runs and is the one meant (its command line contains the marker)."""
        if self.exited:
            return False
        cmdline = _command_line(self.pid)
        deadline = time.monotonic() + _CMDLINE_WAIT_S
        while not cmdline and time.monotonic() < deadline and not _is_zombie(self.pid):
            # Right after posix_spawn returns, the new program's arguments may not be mapped yet and the kernel shows an
            # empty command line (a start-up check once took a starting Virtuoso for dead): read again, briefly.
            time.sleep(0.01)
            cmdline = _command_line(self.pid)
        return bool(cmdline) and self.marker in cmdline

    def poll(self) -> int | None:
        """As :meth:`subprocess.Popen.poll`: None while the process runs, else its exit status (0 when this process
        could not collect it, as Popen says of a child whose status is lost: only a parent learns it)."""
        if not self.exited:
            return None
        return self.returncode if self.returncode is not None else 0

    def how_it_ended(self) -> str:
        """For a message about a process that has ended: with its exit status when it was collected."""
        return "exited" if self.returncode is None else f"exited with code {self.returncode}"

    def terminate(self, timeout: float = 60.0, *, group: bool = True) -> None:
        """SIGTERM (the process's whole group, or with ``group=False`` the process alone), then SIGKILL if it has not
        exited within ``timeout`` seconds."""
        send = os.killpg if group else os.kill
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                send(self.pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.exited:
                    return
                time.sleep(0.1)
