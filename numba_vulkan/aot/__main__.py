"""``python -m numba_vulkan.aot``: build, check and inspect AOT directories.

Commands::

    build MANIFEST [-o DIR] [-j N] [--sign PRIVATE] [--remote URL] [--scheduler ADDRESS]
          [--quiet | --json]
    verify DIR [--public-key PUBLIC]
    keygen PRIVATE PUBLIC
    list DIR
    inspect DIR KERNEL [--signature S]
    explain DIR module:kernel --signature S [--threads X[,Y[,Z]]]
    record -o MANIFEST -- COMMAND...

Exit status: 0 on success, 1 when a kernel fails to build or a directory
fails a check, 2 for a usage or manifest error (printed as
``file:line: problem``, without a traceback).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import types

from numba_vulkan.base import config
from numba_vulkan.base.errors import AOTError, ManifestError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _error(message):
    print(f"error: {message}", file=sys.stderr)


class _Progress:
    """A one-line progress bar on a terminal."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, done, total, label):
        width = 30
        filled = width * done // max(total, 1)
        line = f"\r[{'=' * filled}{' ' * (width - filled)}] {done}/{total} {label}"
        self.stream.write(line[:100].ljust(100))
        self.stream.flush()

    def finish(self):
        self.stream.write("\r" + " " * 100 + "\r")
        self.stream.flush()


class _Lines:
    """Progress off a terminal (a CI log): one line per module."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, done, total, label):
        self.stream.write(f"[{done}/{total}] {label}\n")
        self.stream.flush()

    def finish(self):
        pass


def _size(n):
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def build_command(args):
    from numba_vulkan.aot.build import builder as build
    if args.jobs < 1:
        _error(f"-j {args.jobs}: the number of jobs must be at least 1")
        return EXIT_USAGE
    bar = None
    if not (args.quiet or args.json):
        bar = _Progress(sys.stderr) if sys.stderr.isatty() else _Lines(sys.stderr)
    try:
        result = build.build(args.manifest, args.output, args.jobs, bar, args.sign,
                             args.remote, args.scheduler)
    finally:
        if bar:
            bar.finish()
    for failure in result.failures:
        _error(failure.describe(args.manifest))
    if args.json:
        print(json.dumps(result.summary(), indent=1, sort_keys=True))
    elif not args.quiet or result.failures:
        outcome = ("output unchanged" if result.failures
                   else f"{_size(result.bytes)} in "
                   f"{args.output or os.path.relpath(result.output)}")
        remote = f" ({result.remote} from the remote cache)" if result.remote else ""
        print(f"built {result.built}, reused {result.reused}{remote}, failed "
              f"{len(result.failures)}: {outcome} ({result.seconds:.1f} s)",
              file=sys.stderr if result.failures else sys.stdout)
    return EXIT_FAILED if result.failures else EXIT_OK


def _directory(path):
    if not os.path.isdir(path):
        raise ManifestError(f"{path} is not a directory")
    return path


def verify_command(args):
    from numba_vulkan.aot.build import builder as build
    count, problems = build.verify(_directory(args.directory), args.public_key)
    for problem in problems:
        _error(problem)
    if problems:
        print(f"{args.directory}: {len(problems)} problem(s) in {count} entries",
              file=sys.stderr)
        return EXIT_FAILED
    signed = ", the index is signed by the public key" if args.public_key else ""
    print(f"{args.directory}: {count} entries, every module matches its digest and "
          f"passes spirv-val{signed}")
    return EXIT_OK


def keygen_command(args):
    from numba_vulkan.aot.build import signing as keys
    fingerprint = keys.keygen(args.private, args.public)
    print(f"wrote the private key {args.private} (keep it secret) and the public key "
          f"{args.public} (ship it with the app), fingerprint {fingerprint}")
    return EXIT_OK


def _entries(directory):
    from numba_vulkan.base import files
    from numba_vulkan.aot.loader import index
    path = os.path.join(_directory(directory), index.INDEX)
    try:
        data = files.read_regular(path, index.INDEX_LIMIT)
    except FileNotFoundError:
        # A folder that is not an AOT directory: the command was misused.
        raise ManifestError(f"{directory} is not an AOT directory: it has no {index.INDEX} "
                            "(build one with python -m numba_vulkan.aot build MANIFEST)") \
            from None
    except OSError as exc:
        raise AOTError(f"{path} cannot be read: {exc.strerror or exc} (is {directory} an "
                       "AOT directory? build one with python -m numba_vulkan.aot build "
                       "MANIFEST)") from None
    return index.parse(data, directory)["entries"]


def list_command(args):
    entries = _entries(args.directory)
    rows = [("KERNEL", "SIGNATURE", "THREADS", "PROFILE", "VULKAN", "BYTES", "SHA-256")]
    for e in entries:
        threads = "x".join(str(t) for t in e["threads"])
        if "shared_bytes" in e:
            threads += f" +{e['shared_bytes']} B shared"
        rows.append((e["kernel"], e["numba_signature"], threads, e["profile"], e["vulkan"],
                     str(e["size"]), e["sha256"][:12]))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return EXIT_OK


def _same_signature(wanted, entry):
    compact = wanted.replace(" ", "")
    return compact in (entry["numba_signature"].replace(" ", ""), ",".join(entry["signature"]))


def inspect_command(args):
    from numba_vulkan.aot.loader import index
    from numba_vulkan.spirv import tools as validate
    entries = [e for e in _entries(args.directory)
               if args.kernel in (e["kernel"], e["kernel"].partition(":")[2])
               and (args.signature is None or _same_signature(args.signature, e))]
    if not entries:
        names = sorted({e["kernel"] for e in _entries(args.directory)})
        raise ManifestError(f"{args.directory} has no entry for {args.kernel}"
                            + (f" with signature {args.signature}" if args.signature else "")
                            + f"; kernels: {', '.join(names)}")
    for e in entries:
        with open(os.path.join(args.directory, e["spirv"]), "rb") as f:
            data = f.read()
        index.check_module(data, e, args.directory)
        print(f"; {e['kernel']} {e['numba_signature']} threads {e['threads']} "
              f"profile {e['profile']} ({e['spirv']})")
        print(validate.disassemble(data))
    return EXIT_OK


def explain_command(args):
    """Look a kernel up in one directory as a strict launch would, and say why it misses."""
    from numba_vulkan.aot.build import manifest
    from numba_vulkan.aot.loader import index, lookup
    from numba_vulkan.base.target import TargetDescription
    directory = os.path.abspath(_directory(args.directory))
    module_name, _, qualname = args.kernel.partition(":")
    if not module_name or not qualname:
        raise ManifestError(f"{args.kernel}: name the kernel as module:qualname")
    where = types.SimpleNamespace(directory=os.getcwd(), path=None)
    spec = types.SimpleNamespace(function=args.kernel, line=None)
    dispatcher = manifest._import(where, spec)
    sig = manifest._signature(where, spec, dispatcher, args.signature, None)
    try:
        threads = (tuple(int(t) for t in args.threads.split(",")) + (1, 1))[:3]
    except ValueError:
        raise ManifestError(f"--threads {args.threads}: expected X, X,Y or X,Y,Z") from None
    entries = [e for e in _entries(directory) if e["kernel"] == args.kernel]
    target = (index.target_of(entries[0]) if entries else TargetDescription())
    search = [lookup.Directory(directory, pathlib.Path(directory))]
    try:
        lookup.find(dispatcher, sig, threads, target, search=search, strict=True)
    except AOTError as exc:
        print(str(exc))
        print("NUMBA_VULKAN_AOT_STRICT is set here: such a launch fails" if config.aot_strict()
              else "NUMBA_VULKAN_AOT_STRICT is not set here: such a launch compiles the kernel "
                   "by JIT (with a warning); with it set, the launch fails")
        return EXIT_FAILED
    print(f"{args.kernel} {args.signature} threads {threads} is in {args.directory}")
    return EXIT_OK


def record_command(args):
    from numba_vulkan.aot.build import manifest
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ManifestError("record needs a command to run: record -o MANIFEST -- COMMAND...")
    fd, path = tempfile.mkstemp(prefix="numba-vulkan-record-", suffix=".jsonl")
    os.close(fd)
    try:
        env = config.child_environment(**{config.AOT_RECORD: path})
        try:
            status = subprocess.run(command, env=env).returncode
        except OSError as exc:
            raise ManifestError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
        records, seen = [], set()
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                ident = json.dumps(record, sort_keys=True)
                if ident in seen:
                    continue
                seen.add(ident)
                module, _, qualname = record["function"].partition(":")
                if module == "__main__" or "<" in qualname:
                    _error(f"{record['function']} is not importable by name (a kernel of a "
                           "script run as a file, one defined inside a function, or one "
                           "generated for a lambda, such as nv.reduce(lambda a, b: a + b)'s); "
                           "it is not recorded: run the script with python -m, define "
                           "kernels at module level, and name a reduction's lambda by the "
                           "module attribute that holds it (docs/ufuncs.md)")
                    continue
                records.append(record)
    finally:
        os.unlink(path)
    added, dropped_comments = manifest.merge_records(args.output, records)
    print(f"recorded {len(records)} kernel compile(s), {added} new, into {args.output}")
    if dropped_comments:
        print(f"note: {args.output} was rewritten without its comments", file=sys.stderr)
    return EXIT_OK if status == 0 else EXIT_FAILED


def parser():
    """The command line parser."""
    p = argparse.ArgumentParser(prog="python -m numba_vulkan.aot",
                                description="Build, check and inspect ahead-of-time "
                                            "directories of numba_vulkan kernels.")
    sub = p.add_subparsers(dest="command_name", required=True)
    b = sub.add_parser("build", help="compile every kernel of a manifest")
    b.add_argument("manifest")
    b.add_argument("-o", "--output", help="output directory (default: the manifest's)")
    b.add_argument("-j", "--jobs", type=int, default=1, help="modules to compile at once")
    b.add_argument("--sign", metavar="PRIVATE",
                   help="sign the index with this Ed25519 private key (PEM, from keygen)")
    b.add_argument("--remote", metavar="URL",
                   help="a Redis server (redis://host:port/db) to take modules any build "
                        "already made from, and to send this build's to (default: "
                        "NUMBA_VULKAN_REMOTE_CACHE)")
    b.add_argument("--scheduler", metavar="ADDRESS",
                   help="compile on this Dask distributed cluster (tcp://host:8786) "
                        "instead of local processes")
    quiet = b.add_mutually_exclusive_group()
    quiet.add_argument("--quiet", action="store_true", help="print only errors")
    quiet.add_argument("--json", action="store_true", help="print the summary as JSON")
    b.set_defaults(run=build_command)
    v = sub.add_parser("verify", help="recheck digests, format version and spirv-val")
    v.add_argument("directory")
    v.add_argument("--public-key", metavar="PUBLIC",
                   help="also check that this Ed25519 public key (PEM) signed the index")
    v.set_defaults(run=verify_command)
    k = sub.add_parser("keygen", help="write an Ed25519 key pair for signing directories")
    k.add_argument("private", help="the private key's file (PEM, created 0600)")
    k.add_argument("public", help="the public key's file (PEM)")
    k.set_defaults(run=keygen_command)
    ls = sub.add_parser("list", help="list the entries of a directory")
    ls.add_argument("directory")
    ls.set_defaults(run=list_command)
    i = sub.add_parser("inspect", help="disassemble a kernel's modules")
    i.add_argument("directory")
    i.add_argument("kernel", help="module:name, or the name alone")
    i.add_argument("--signature", help="only this signature (as in the manifest)")
    i.set_defaults(run=inspect_command)
    e = sub.add_parser("explain", help="say why a kernel's launch misses a directory")
    e.add_argument("directory")
    e.add_argument("kernel", help="module:qualname")
    e.add_argument("--signature", required=True, help="as in the manifest")
    e.add_argument("--threads", default="256", help="the workgroup size, X[,Y[,Z]] "
                                                    "(default 256)")
    e.set_defaults(run=explain_command)
    r = sub.add_parser("record", help="run a program and add the kernels it compiled "
                                      "to a manifest")
    r.add_argument("-o", "--output", required=True, help="the manifest to write or extend")
    r.add_argument("command", nargs=argparse.REMAINDER)
    r.set_defaults(run=record_command)
    return p


def main(argv=None):
    """Run a command; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ManifestError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except AOTError as exc:
        _error(str(exc))
        return EXIT_FAILED


if __name__ == "__main__":
    from numba_vulkan.base import cli
    cli.run(main)
