"""LLVM's SPIR-V backend, run in a child process.

The backend aborts the whole process on some inputs it does not support.
Running it in a long-lived child keeps such an abort from killing the
user's interpreter: the parent sees the child die, raises
:class:`~numba_vulkan.errors.ToolError` with what it printed, and starts a
new child for the next module.

Run as a program it is either that child (``--serve``) or a one-shot
compiler of an IR file, which is what a failure's reproduce command runs.
"""

import atexit
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import threading

from numba_vulkan import config
from numba_vulkan.errors import ToolError

_HEADER = struct.Struct("<I")


def compile_ir(text, triple, opt=2):
    """Compile an LLVM IR module to SPIR-V in this process."""
    from numba_vulkan.codegen.optimize import target_machine
    import llvmlite.binding as llvm
    if "atomicrmw fadd" in text:
        # The backend emits OpAtomicFAddEXT only with its extension allowed;
        # the compiler asks for native float atomics only on targets that
        # have them.
        llvm.set_option("", "--spirv-ext=+SPV_EXT_shader_atomic_float_add")
    module = llvm.parse_assembly(text)
    module.triple = triple
    return target_machine(triple, opt).emit_object(module)


def _read_exact(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _send(stream, payload):
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _receive(stream):
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    return _read_exact(stream, _HEADER.unpack(header)[0])


def _reply(text, meta):
    try:
        return b"K" + compile_ir(text, meta["triple"], meta.get("opt", 2))
    except Exception as exc:  # reported to the parent, which raises
        return b"E" + f"{type(exc).__name__}: {exc}".encode()


def _reply_from_fork(text, meta):
    """Compile in a fork of this process, which dies after one module.

    The backend keeps state between modules: a process that compiled one
    module can emit another with duplicate ids, or differently on each run.
    A fork of a process that has loaded LLVM but compiled nothing starts
    clean every time, in milliseconds. An abort kills only the fork; its
    stderr goes back to the parent with an exit status.
    """
    errors = tempfile.TemporaryFile()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.dup2(errors.fileno(), 2)
        with os.fdopen(write_end, "wb") as out:
            out.write(_reply(text, meta))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as source:
        reply = source.read()
    _, status = os.waitpid(pid, 0)
    if reply and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return reply
    errors.seek(0)
    returncode = (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                  else os.WEXITSTATUS(status))
    return b"C" + json.dumps({"returncode": returncode,
                              "stderr": errors.read().decode(errors="replace")}).encode()


def serve(stdin, stdout):
    """Answer compile requests until standard input closes."""
    from numba_vulkan.codegen.optimize import initialise
    initialise()
    forking = hasattr(os, "fork")
    while True:
        request = _receive(stdin)
        if request is None:
            return
        meta_size = _HEADER.unpack(request[:_HEADER.size])[0]
        meta = json.loads(request[_HEADER.size:_HEADER.size + meta_size])
        text = request[_HEADER.size + meta_size:].decode()
        _send(stdout, _reply_from_fork(text, meta) if forking else _reply(text, meta))
        if not forking:
            # Without fork, a fresh process per module is the only clean state.
            return


class _Child:
    """One backend child process and the file that collects its stderr."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "numba_vulkan.codegen.backend", "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=_child_env())

    def alive(self):
        return self.process.poll() is None

    def error_output(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self):
        if self.alive():
            self.process.stdin.close()
            self.process.wait()
        self.stderr.close()


def _child_env():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = config.child_environment()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


_lock = threading.Lock()
_child = None


def _save_for_reproduction(text):
    fd, path = tempfile.mkstemp(prefix="numba_vulkan_", suffix=".ll")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


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
    request = _HEADER.pack(len(meta)) + meta + text.encode()
    with _lock:
        if _child is None or not _child.alive():
            _child = _Child()
        child = _child
        try:
            _send(child.process.stdin, request)
            reply = _receive(child.process.stdout)
        except (BrokenPipeError, OSError):
            reply = None
        if reply is None:
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


def shutdown():
    """Stop the backend child, if one runs."""
    global _child
    with _lock:
        if _child is not None:
            _child.close()
            _child = None


atexit.register(shutdown)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m numba_vulkan.codegen.backend",
                                     description="Compile an LLVM IR file to SPIR-V.")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--triple", default="spirv1.5-unknown-vulkan1.2-compute")
    parser.add_argument("-o", "--output", help="SPIR-V file to write (default: IR file with .spv)")
    parser.add_argument("file", nargs="?")
    args = parser.parse_args(argv)
    if args.serve:
        serve(sys.stdin.buffer, sys.stdout.buffer)
        return 0
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
