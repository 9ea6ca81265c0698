"""The backend child: LLVM's SPIR-V backend serving compile requests.

:mod:`numba_vulkan.codegen.backend` starts this file as a script, not as a
module of the package: it imports only the standard library and llvmlite,
so the child is ready in about a tenth of a second, where importing the
package (and with it Numba and NumPy) took half a second of a cold first
call. It must stay that way: nothing here imports ``numba_vulkan``.

Requests and replies are frames of a 4-byte little-endian length and a
payload. A request is a frame of JSON metadata (``triple``, ``opt``)
followed by the IR text; a reply
starts with ``K`` and the SPIR-V module, ``E`` and an error message, or
``C`` and JSON with the return code and stderr of a compile that crashed.
"""

import json
import os
import struct
import sys
import tempfile

import llvmlite.binding as llvm

HEADER = struct.Struct("<I")

_initialised = False


def initialise():
    """Initialise LLVM's targets once per process."""
    global _initialised
    if not _initialised:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        # Block names grow from Numba's mangled names (one Array type per
        # argument) plus the suffixes of each pass that splits a block; past
        # LLVM's default of 1024 characters a module no longer parses back.
        llvm.set_option("", "-non-global-value-max-name-size=1048576")
        _initialised = True


def target_machine(triple, opt=3):
    """A target machine of LLVM's SPIR-V backend for ``triple``."""
    initialise()
    return llvm.Target.from_triple(triple).create_target_machine(opt=opt)


def compile_ir(text, triple, opt=2):
    """Compile an LLVM IR module to SPIR-V in this process."""
    if "atomicrmw fadd" in text:
        # The backend emits OpAtomicFAddEXT only with its extension allowed;
        # the compiler asks for native float atomics only on targets that
        # have them.
        llvm.set_option("", "--spirv-ext=+SPV_EXT_shader_atomic_float_add")
    module = llvm.parse_assembly(text)
    module.triple = triple
    return target_machine(triple, opt).emit_object(module)


def read_exact(stream, size):
    """``size`` bytes of ``stream``, or None where it ends first."""
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def send(stream, payload):
    """Write one frame."""
    stream.write(HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def receive(stream):
    """Read one frame; None at the end of the stream."""
    header = read_exact(stream, HEADER.size)
    if header is None:
        return None
    return read_exact(stream, HEADER.unpack(header)[0])


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
    initialise()
    forking = hasattr(os, "fork")
    while True:
        request = receive(stdin)
        if request is None:
            return
        meta_size = HEADER.unpack(request[:HEADER.size])[0]
        meta = json.loads(request[HEADER.size:HEADER.size + meta_size])
        text = request[HEADER.size + meta_size:].decode()
        send(stdout, _reply_from_fork(text, meta) if forking else _reply(text, meta))
        if not forking:
            # Without fork, a fresh process per module is the only clean state.
            return


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
