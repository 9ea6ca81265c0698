"""LLVM's SPIR-V backend, run in a child process.

The backend aborts the whole process on some inputs it does not support.
Running it in a long-lived child keeps such an abort from killing the
user's interpreter: the parent sees the child die, raises
:class:`~numba_vulkan.base.errors.ToolError` with what it printed, and starts a
new child for the next module.

The child is :mod:`numba_vulkan.codegen.backend_child`, started as a script
so that it loads only llvmlite. :func:`start` starts it ahead of the first
module, while Numba types the kernel; :func:`spares` starts children for
processes about to be forked (build workers), which :func:`adopt` one each.
Run as a program this module is a one-shot compiler of an IR file, which is
what a failure's reproduce command runs.
"""

import atexit
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading

from numba_vulkan.base import config
from numba_vulkan.codegen import backend_child
from numba_vulkan.codegen.backend_child import compile_ir
from numba_vulkan.base.errors import ToolError

# Run as a script by path, not as a module of the package: importing the
# package would load Numba in the child.
_CHILD_COMMAND = (sys.executable, "-c", "import runpy; runpy.run_path({!r}, run_name='__main__')"
                  .format(os.path.abspath(backend_child.__file__)))


class _Child:
    """One backend child process and the file that collects its stderr."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            _CHILD_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=config.child_environment())
        self.owner = os.getpid()
        self.lost = False

    def adopted(self):
        """Whether this process serves from a child another one started
        (:func:`adopt`), which it cannot poll or wait for."""
        return os.getpid() != self.owner

    def alive(self):
        if self.adopted():
            return not self.lost and _running(self.process.pid)
        return self.process.poll() is None

    def error_output(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def forget(self):
        """Close this process's copies of the child's pipes and output file:
        another process serves from it, and it ends when that one closes them."""
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass

    def close(self):
        if self.adopted():
            self.forget()
            return
        if self.alive():
            self.process.stdin.close()
            self.process.wait()
        self.stderr.close()


_lock = threading.Lock()
_child = None


def _running(pid):
    """Whether process ``pid``, a child of another process, still runs (not
    a zombie): an adopted child that died between modules is replaced, as an
    own child found dead is, instead of failing the next module."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # The state follows the parenthesised command name.
            return f.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _save_for_reproduction(text):
    fd, path = tempfile.mkstemp(prefix="numba_vulkan_", suffix=".ll")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def start():
    """Start the backend child now, if none runs, without waiting for it.

    A compile calls this before Numba runs: the child then starts on
    another core while the kernel is typed and lowered, and the first
    module finds it ready.
    """
    global _child
    if config.llc():
        return
    with _lock:
        if _child is None or not _child.alive():
            _child = _Child()


def emit(text, triple, opt=2):
    """Compile an LLVM IR module to SPIR-V in the backend child.

    Raises:
        ToolError: The backend failed or its process died; the message holds
            its stderr and a command that reproduces the failure.
    """
    llc = config.llc()
    if llc:
        return _emit_with_llc(llc, text, triple, opt)
    global _child
    meta = json.dumps({"triple": triple, "opt": opt}).encode()
    request = backend_child.HEADER.pack(len(meta)) + meta + text.encode()
    with _lock:
        if _child is None or not _child.alive():
            _child = _Child()
        child = _child
        try:
            backend_child.send(child.process.stdin, request)
            reply = backend_child.receive(child.process.stdout)
        except (BrokenPipeError, OSError):
            reply = None
        if reply is None:
            child.lost = True
            if not child.adopted():
                child.process.wait()
            stderr = child.error_output()
            child.close()
            _child = None
            path = _save_for_reproduction(text)
            raise ToolError(
                "LLVM SPIR-V backend", child.process.returncode, stderr,
                reproduce=f"{shlex.quote(sys.executable)} -m numba_vulkan.codegen.backend "
                          f"--triple {triple} {shlex.quote(path)}")
    if reply[:1] == b"K":
        return reply[1:]
    if reply[:1] == b"C":
        crash = json.loads(reply[1:])
        returncode, stderr = crash["returncode"], crash["stderr"]
    else:
        returncode, stderr = 1, reply[1:].decode()
    path = _save_for_reproduction(text)
    raise ToolError("LLVM SPIR-V backend", returncode, stderr,
                    reproduce=f"{shlex.quote(sys.executable)} -m numba_vulkan.codegen.backend "
                              f"--triple {triple} {shlex.quote(path)}")


def _emit_with_llc(llc, text, triple, opt):
    path = _save_for_reproduction(text)
    out = path[:-3] + ".spv"
    command = [llc, f"-mtriple={triple}", f"-O{opt}", "-filetype=obj", path, "-o", out]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolError(os.path.basename(llc), result.returncode, result.stderr,
                        reproduce=shlex.join(command))
    with open(out, "rb") as f:
        data = f.read()
    os.unlink(out)
    os.unlink(path)
    return data


def spares(count):
    """Start backend children for ``count`` processes about to be forked from
    this one (build workers), each to take one with :func:`adopt`.

    Started now, they load LLVM on cores the forking process leaves idle
    while it prepares the forks, instead of beside every new process's
    first module. None with ``NUMBA_VULKAN_LLC`` set. This process lets go
    of them with :func:`release`.
    """
    if config.llc():
        return []
    return [_Child() for _ in range(count)]


def adopt(children, k):
    """In a process forked after :func:`spares`: serve this process's modules
    from ``children[k]`` and close its copies of the others' pipes."""
    global _child
    for i, child in enumerate(children):
        if i != k:
            child.forget()
    # Forked after release(), it would find the pipes closed: it starts its own.
    if 0 <= k < len(children) and not children[k].process.stdin.closed:
        _child = children[k]


def release(children, wait=False):
    """In the process that started ``children`` (:func:`spares`): close its
    copies of their pipes once every process taking one has forked, so that
    each ends with the process it serves; with ``wait``, wait for them to."""
    for child in children:
        child.forget()
        if wait:
            child.process.wait()


def shutdown():
    """Stop the backend child, if one runs."""
    global _child
    with _lock:
        if _child is not None:
            _child.close()
            _child = None


atexit.register(shutdown)


def _after_fork():
    """In a forked process: forget the parent's child, which serves the
    parent; the next module starts this process's own."""
    global _child, _lock
    _lock = threading.Lock()
    if _child is not None:
        # Closing the copies of its pipes lets it see its input end when the
        # parent closes its own; it is not this process's to wait for.
        _child.forget()
        _child = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m numba_vulkan.codegen.backend",
                                     description="Compile an LLVM IR file to SPIR-V.")
    parser.add_argument("--triple", default="spirv1.5-unknown-vulkan1.2-compute")
    parser.add_argument("-o", "--output", help="SPIR-V file to write (default: IR file with .spv)")
    parser.add_argument("file", nargs="?")
    args = parser.parse_args(argv)
    if not args.file:
        parser.error("an IR file is required")
    with open(args.file) as f:
        data = compile_ir(f.read(), args.triple)
    output = args.output or os.path.splitext(args.file)[0] + ".spv"
    with open(output, "wb") as f:
        f.write(data)
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
