"""``python -m numba_vulkan info``: the Vulkan devices and what they support;
``python -m numba_vulkan cache``: the on-disk kernel cache."""

import argparse
import sys


def info():
    from numba_vulkan.runtime.device import list_devices, queue_families
    for d in list_devices():
        major, minor, patch = d.api_version
        print(f"[{d.index}] {d.name}")
        print(f"    type: {d.device_type}, Vulkan {major}.{minor}.{patch}, "
              f"vendor 0x{d.vendor_id:04x}, device 0x{d.device_id:04x}")
        for feature in ("float64", "int64", "float16", "float16_rte", "int16", "int8", "storage8",
                        "storage16", "int64_atomics"):
            print(f"    {feature + ':':15} {'yes' if feature in d.features else 'no'}")
        print(f"    subgroup size:  {d.subgroup_size}")
        operations = [f[len("subgroup_"):] for f in sorted(d.features) if f.startswith("subgroup_")]
        print(f"    subgroup ops:   basic, {', '.join(operations)}")
        print(f"    workgroup:      {d.max_workgroup_invocations} invocations, "
              f"size {list(d.max_workgroup_size)}, count {list(d.max_workgroup_count)}")
        print(f"    shared memory:  {d.max_shared_memory} bytes")
        print(f"    push constants: {d.max_push_constants} bytes")
        families = [f"{count} {'+'.join(kinds) or 'other'} (family {k})"
                    for k, (kinds, count, _) in enumerate(queue_families(d.index))]
        print(f"    queues:         {'; '.join(families)}")
        target = d.target()
        print(f"    compiles for:   {target.target_env}"
              + (f", narrowing {', '.join(target.narrowed)}" if target.narrowed else ""))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["cache"]:
        from numba_vulkan.store import cli
        return cli.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m numba_vulkan")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="list Vulkan devices and the features that matter")
    sub.add_parser("cache", help="show or clear the on-disk kernel cache (cache --help)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return 2


if __name__ == "__main__":
    from numba_vulkan.base import cli
    cli.run(main)
