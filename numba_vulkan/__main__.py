"""``python -m numba_vulkan info``: what the system provides (each part of
``docs/install.md``) and the Vulkan devices and what they support;
``python -m numba_vulkan cache``: the on-disk kernel cache."""

import argparse
import sys


def _parts():
    """``[(part, where it was found or None, why not)]`` of docs/install.md's parts."""
    import os

    from numba_vulkan.base import config
    from numba_vulkan.base import libclcfile
    from numba_vulkan.base.errors import DriverError
    from numba_vulkan.runtime import vk
    from numba_vulkan.runtime.device import list_devices
    from numba_vulkan.spirv import tools
    out = []
    try:
        loader = vk.module()
        out.append(("loader", f"found (through the vulkan package "
                               f"{getattr(loader, '__version__', '')})", None))
    except DriverError as exc:
        out.append(("loader", None, str(exc).split(". To get")[0]))
    if out[0][1] is None:
        out.append(("driver", None, "needs the loader"))
    else:
        try:
            devices = list_devices()
            out.append(("driver", f"{len(devices)} device(s): "
                        + ", ".join(d.name for d in devices), None))
        except DriverError as exc:
            out.append(("driver", None, str(exc).split(". To get")[0]))
    validator = tools.find(config.spirv_val())
    out.append(("spirv-val", validator, f"{config.spirv_val()} is not on PATH"))
    libclc = libclcfile.path_in_use()
    out.append(("libclc", libclc if libclc and os.path.isfile(libclc) else None,
                f"NUMBA_VULKAN_LIBCLC names {libclc}, which is not a file" if libclc else
                "no nvptx64--.bc in " + ", ".join(libclcfile.SEARCH_DIRS)))
    return out


def info():
    import platform

    import numba_vulkan
    from numba_vulkan.base import system
    print(f"numba_vulkan {numba_vulkan.__version__}, Python {platform.python_version()} "
          f"({sys.implementation.cache_tag}), {platform.system()} {platform.machine()}")
    parts = _parts()
    for part, found, why in parts:
        title = system.PARTS[part].title
        if found:
            print(f"  {title}: {found}")
        else:
            print(f"  {title}: MISSING ({why}); needed for {system.PARTS[part].needed}. "
                  f"{system.how_to_get(part)}")
    if not any(part == "driver" and found for part, found, _ in parts):
        return 1
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
    sub.add_parser("info", help="report what the system provides (docs/install.md) and list "
                                "Vulkan devices and the features that matter")
    sub.add_parser("cache", help="show or clear the on-disk kernel cache (cache --help)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return 2


if __name__ == "__main__":
    from numba_vulkan.base import cli
    cli.run(main)
