"""``python -m numba_vulkan cache {info,clear}``: the cache's size, entries
and hit rates, and emptying it."""

import argparse
import os
import sys

from numba_vulkan.base import config
from numba_vulkan.store import counters, disk, remote, trust
from numba_vulkan.store import entry as entries
from numba_vulkan.store.entry import SECTIONS, SUFFIX
from numba_vulkan.store.lookup import ENV_VAR, enabled


def _size(path):
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _rate(counts):
    looked = counts["hits"] + counts["misses"] + counts["rejected"]
    if not looked:
        return "no lookups yet"
    return (f"{counts['hits']} hits, {counts['misses']} misses, {counts['rejected']} "
            f"rejected: hit rate {100 * counts['hits'] / looked:.0f}%; {counts['stores']} "
            f"stores, {counts['evicted']} evicted")


def _describe(section, name):
    """One line of ``info --verbose`` about an entry file."""
    try:
        found = entries.decode(section, name, disk.read(section, name))
    except entries.DAMAGED as exc:
        return f"  {name[:16]}  damaged, will be rebuilt ({exc})"
    kernel = found.get("kernel")
    if isinstance(kernel, dict):
        kernel = f"{kernel.get('name')}({', '.join(kernel.get('signature', []))})"
    size = len(found.get("spirv") or b"")
    return f"  {name[:16]}  {size:>8} bytes  {kernel}"


def info(verbose=False, out=None):
    """Print the cache's location and cap, and per section its entries, size
    and hit rate (over every process, from ``stats.json``)."""
    out = out or sys.stdout
    counters.flush_stats()
    cap = config.cache_max_bytes()
    print(f"cache directory: {config.cache_dir()}"
          + ("" if enabled() else f" (off: {ENV_VAR}=0)"), file=out)
    print(f"size cap: {f'{cap / (1 << 20):.0f} MiB' if cap else 'none'} "
          "(NUMBA_VULKAN_CACHE_MAX_BYTES), least recently used entries evicted", file=out)
    totals = counters.read_totals(config.cache_dir())
    for section in SECTIONS:
        paths = disk.listing(section)
        names = [os.path.basename(p)[:-len(SUFFIX)] for p in paths if p.endswith(SUFFIX)]
        size = sum(_size(p) for p in paths)
        print(f"{section}/: {len(names)} entries, {size / 1e6:.2f} MB; "
              f"{_rate(totals[section])}", file=out)
        if verbose:
            for name in names:
                print(_describe(section, name), file=out)
    _remote_info(totals[counters.REMOTE], out)
    return 0


def _remote_info(counts, out):
    where = remote.url()
    if where is None:
        print("remote: none (NUMBA_VULKAN_REMOTE_CACHE)", file=out)
    else:
        print(f"remote: {where}: {remote.ping()}", file=out)
    looked = counts["hits"] + counts["misses"] + counts["rejected"]
    if not looked and not counts["stores"] and not counts["errors"]:
        print("  no lookups yet", file=out)
        return
    rate = f": hit rate {100 * counts['hits'] / looked:.0f}%" if looked else ""
    print(f"  {counts['hits']} hits, {counts['misses']} misses, {counts['rejected']} "
          f"rejected{rate}; {counts['errors']} errors; {counts['stores']} stores, "
          f"{counts['dropped']} dropped; {counts['bytes_read'] / 1e6:.2f} MB read, "
          f"{counts['bytes_written'] / 1e6:.2f} MB written", file=out)


def main(argv=None):
    """``python -m numba_vulkan cache {info,clear,keygen}``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m numba_vulkan cache",
                                     description="Show or clear the on-disk kernel cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("info", help="location, entries and size of each section")
    show.add_argument("-v", "--verbose", action="store_true", help="list every entry")
    empty = sub.add_parser("clear", help="delete the cached kernels")
    empty.add_argument("--tier", choices=SECTIONS,
                       help="only this section (default: both)")
    make_key = sub.add_parser("keygen", help="write a new team key for the remote cache "
                                             "(NUMBA_VULKAN_REMOTE_KEY)")
    make_key.add_argument("path", help="the key file to create (mode 0600)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info(args.verbose)
    if args.command == "keygen":
        try:
            trust.keygen(args.path)
        except OSError as exc:
            print(f"cannot write the key {args.path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote the team key {args.path}: give it to the machines that may write to "
              "the remote cache, and set NUMBA_VULKAN_REMOTE_KEY to it (docs/remote.md)")
        return 0
    try:
        removed = disk.clear((args.tier,) if args.tier else SECTIONS)
    except OSError as exc:
        print(f"cannot clear the cache: {exc}", file=sys.stderr)
        return 1
    print(f"removed {removed} files from {config.cache_dir()}")
    return 0
