"""Python processes for the kill tests, forked from one that has already imported memlink.

A new Python process spends half a second importing memlink before it does anything; the
kill tests start hundreds. Here one server process per test process imports memlink once
and forks a child per command: a real process of its own, with its own argv, environment,
working folder and standard streams, that can be killed like any other. Only what a
script may set up from its environment at import (tests/crash_worker.py) is not imported
ahead.

``run`` is ``subprocess.run(argv, capture_output=True)`` and ``Popen`` is
``subprocess.Popen`` for argv ``[python, script, ...]``, ``[python, "-m", module, ...]``
or ``[python, "-c", code, ...]``. For a process some other library starts (the MCP
client), ``command(argv)`` is a command line that runs ``argv`` forked the same way, on
that process's own standard streams."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRELOAD = ("engine", "engine.index", "engine.extract.batch", "engine.review.actions", "engine.lint.memo",
           "memlink_tui.cli")
SOCKET = "MEMLINK_TEST_FORK_SERVER"  # (for ``command``: the server to ask)

class Server:
    """A server process; ``prefix`` starts it inside another command (``unshare`` and a
    mount, say: what it forks then runs there too)."""

    def __init__(self, prefix: tuple[str, ...] = (), preload: tuple[str, ...] = PRELOAD) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="memlink-fork-"), "socket")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
        self.process = subprocess.Popen([*prefix, sys.executable, __file__, self.path, *preload], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, env=env, cwd=HERE.parent)
        assert self.process.stdout is not None and self.process.stdout.readline() == b"ready\n"
        atexit.register(self.close)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)  # (the socket's own folder)

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return run(argv, server=self.path, **kwargs)


_server: Server | None = None
_lock = threading.Lock()


def _address() -> str:
    """The server's socket, started on first use (again if it died)."""
    global _server
    if os.environ.get(SOCKET):
        return os.environ[SOCKET]
    with _lock:
        if _server is None or _server.process.poll() is not None:
            _server = Server(preload=(*PRELOAD, "memlink_mcp.server"))  # (the one the MCP tests use too)
        return _server.path


class Popen:
    """A forked child; ``stdout``/``stderr`` as subprocess.PIPE, DEVNULL, None or a file."""

    def __init__(self, argv: list[str], *, stdin=None, stdout=None, stderr=None, env: dict | None = None,
                 cwd: str | Path | None = None, text: bool = False, server: str | None = None) -> None:
        ends, mine = [], []
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (stdin, stdout, stderr):
            if target == subprocess.PIPE:
                r, w = os.pipe()
                ends.append(w)
                mine.append(os.fdopen(r, "r" if text else "rb"))
            else:
                ends.append(devnull if target in (None, subprocess.DEVNULL) else target.fileno())
                mine.append(None)
        self.stdout, self.stderr = mine[1], mine[2]
        self.args, self.returncode = argv, None
        self._conn = socket.socket(socket.AF_UNIX)
        self._conn.connect(server or _address())
        request = {"argv": argv[1:], "env": dict(os.environ if env is None else env), "cwd": str(cwd or os.getcwd())}
        socket.send_fds(self._conn, [json.dumps(request).encode() + b"\n"], ends)
        for fd, target in zip(ends, mine, strict=True):
            if target is not None:
                os.close(fd)
        os.close(devnull)
        self._got = b""
        self.pid = int(self._line())

    def _line(self) -> bytes:
        """The server's next line: the child's pid, then how it ended (a timeout of the
        socket's leaves what was read for the next call)."""
        while b"\n" not in self._got:
            data = self._conn.recv(64)
            if not data:
                raise RuntimeError("the fork server went away")
            self._got += data
        line, self._got = self._got.split(b"\n", 1)
        return line

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                line = self._line()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            self.returncode = int(line)
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # it ended by itself meanwhile
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None):
        out = self.stdout.read() if self.stdout else None
        err = self.stderr.read() if self.stderr else None
        self.wait(timeout)
        return out, err


def run(argv: list[str], *, env: dict | None = None, cwd: str | Path | None = None, text: bool = False,
        timeout: float | None = None, capture_output: bool = True, server: str | None = None) -> subprocess.CompletedProcess:
    """Run to the end with stdout and stderr captured (in files: no pipe fills up)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd, server=server)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        got = []
        for f in (out, err):
            f.seek(0)
            data = f.read()
            got.append(data.decode() if text else data)
    return subprocess.CompletedProcess(argv, proc.returncode, *got)


def command(argv: list[str], env: dict | None = None) -> tuple[list[str], dict]:
    """A command line and its environment that run ``argv`` forked from the server."""
    return [sys.executable, __file__, "exec", *argv[1:]], {**(os.environ if env is None else env), SOCKET: _address()}


def _exec(argv: list[str]) -> None:
    """``command``'s process: the forked child runs on this one's streams; a signal to
    stop is passed on, and the child's exit code is this one's."""
    env = {k: v for k, v in os.environ.items() if k != SOCKET}
    proc = Popen([sys.executable, *argv], stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr, env=env)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: proc.send_signal(number))
    code = proc.wait()
    sys.exit(128 - code if code < 0 else code)


# -- the server ------------------------------------------------------------------------------
def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the process the request describes, run it, exit."""
    import atexit as child_exit
    import runpy

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = request["argv"]
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = request["cwd"]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(argv)
            sys.path[0] = str(Path(argv[0]).resolve().parent)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    child_exit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _waiter(conn: socket.socket) -> None:
    """A process per request: forks the child, says its pid, then how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while not message.endswith(b"\n"):
        message += conn.recv(1 << 20)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(json.loads(message), fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(b"%d\n" % pid)
    _, status = os.waitpid(pid, 0)
    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
    os._exit(0)


def serve(path: str, preload: list[str]) -> None:
    import importlib

    for name in preload:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the system
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    parent = os.getppid()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:  # (the test process gone, e.g. killed: so is the server)
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.setblocking(True)
        if os.fork() == 0:
            listener.close()
            _waiter(conn)
        conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "exec":
        _exec(sys.argv[2:])
    else:
        serve(sys.argv[1], sys.argv[2:])
