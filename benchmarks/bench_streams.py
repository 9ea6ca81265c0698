"""Copies and launches on two streams against the same work on one stream.

    python benchmarks/bench_streams.py [--size S] [--chunks C] [--iters I]
                                       [--repeats R] [--out DIR]

``S`` float32 elements in pinned host memory (``nv.pinned_array``) are
processed in ``C`` chunks; each chunk is copied to the device
(``copy_to_device(pinned, stream=s)``), run through a compute-bound kernel
(``I`` multiply-adds per element, in a loop) and copied back into pinned
memory (``copy_to_host(pinned, stream=s)``):

* ``one stream``: every chunk on one ``nv.stream()``, so each step waits
  for the one before;
* ``two streams``: chunks alternate between two streams, so one stream's
  copies may run while the other's kernel does;
* ``copies only`` and ``kernels only``: the copies, and the launches, of
  all chunks alone on one stream, to show what overlap could hide.

Each time is the median of ``R`` runs after a warm-up, from the first
submission to the last stream's synchronize; device arrays are allocated
beforehand and the results are checked against NumPy. ``speedup`` is one
stream's time over two streams'; ``hidden`` is the part of the shorter of
copies and kernels that two streams hid behind the longer, ``(one - two) /
min(copies, kernels)``: 1 for perfect overlap, 0 for none. On a device with
one queue (lavapipe) streams run one after another, and copies into and out
of its memory are host copies, so it shows about 1x and 0. Defaults: 2^26
elements in 8 chunks with 2048 multiply-adds on a GPU, 2^18 in 4 with 16 on
a CPU device. ``--out DIR`` writes ``DIR/streams_<device>.json``.
"""

import argparse
import json
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.bench_gpus import expected_work, median_seconds, work_kernel  # noqa: E402


def measure(size=None, chunks=None, iters=None, repeats=None):
    """Time the variants; return the figures as a dict (see the module's
    description)."""
    import numba_vulkan as nv

    device = nv.get_current_device()
    cpu = device.info.device_type == "cpu"
    size = size or ((1 << 18) if cpu else (1 << 26))
    chunks = chunks or (4 if cpu else 8)
    iters = iters or (16 if cpu else 2048)
    repeats = repeats or (3 if cpu else 7)
    size -= size % chunks
    step = size // chunks
    work = work_kernel(nv)
    threads = min(256, device.info.max_workgroup_invocations)
    groups = -(-step // threads)
    iters32 = np.int32(iters)
    host_in = nv.pinned_array(size, np.float32)
    host_in[:] = np.random.default_rng(0).random(size, dtype=np.float32)
    host_out = nv.pinned_array(size, np.float32)
    parts = [slice(k * step, (k + 1) * step) for k in range(chunks)]
    ins = [nv.device_array(step, np.float32) for _ in parts]
    outs = [nv.device_array(step, np.float32) for _ in parts]
    streams = [nv.stream(), nv.stream()]

    def pipeline(count, copies=True, kernels=True):
        def run():
            for k, part in enumerate(parts):
                s = streams[k % count]
                if copies:
                    ins[k].copy_to_device(host_in[part], stream=s)
                if kernels:
                    work[groups, threads, s](ins[k], outs[k], iters32)
                if copies:
                    outs[k].copy_to_host(host_out[part], stream=s)
            for s in streams[:count]:
                s.synchronize()
        return run

    # Every 1021st element: NumPy would take minutes for the whole of a GPU's size.
    sample = slice(None, None, 1021)
    expected = expected_work(np.asarray(host_in)[sample], iters)
    seconds = {}
    for name, run, checked in (("one stream", pipeline(1), True),
                               ("two streams", pipeline(2), True),
                               ("copies only", pipeline(1, kernels=False), False),
                               ("kernels only", pipeline(1, copies=False), False)):
        host_out[:] = np.nan
        seconds[name] = median_seconds(run, repeats)
        if checked:
            assert np.allclose(host_out[sample], expected, rtol=1e-5), f"{name}: WRONG"
    one, two = seconds["one stream"], seconds["two streams"]
    shorter = min(seconds["copies only"], seconds["kernels only"])
    return {
        "device": device.name, "device_type": device.info.device_type,
        "compute_queues": len(device.lanes), "transfer_queues": len(device.copy_lanes),
        "stream_queue_family": device.stream_lanes[0].family,
        "async_compute": device.stream_lanes[0].family != device.queue_family,
        "streams_on_own_queues": streams[0].lane is not streams[1].lane,
        "size": size, "chunks": chunks, "iters": iters, "repeats": repeats,
        "bytes_each_way": size * 4, "seconds": seconds,
        "speedup": one / two, "hidden": (one - two) / shorter if shorter else 0.0,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="float32 elements in all")
    parser.add_argument("--chunks", type=int, default=None)
    parser.add_argument("--iters", type=int, default=None, help="multiply-adds per element")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=None, help="write streams_<device>.json here")
    args = parser.parse_args(argv)
    figures = measure(args.size, args.chunks, args.iters, args.repeats)
    print(f"{figures['device']}: {figures['compute_queues']} compute queue(s), "
          f"{figures['transfer_queues']} transfer queue(s); {figures['size']} float32 in "
          f"{figures['chunks']} chunks, {figures['iters']} multiply-adds each")
    gb = figures["bytes_each_way"] / 1e9
    for name, s in figures["seconds"].items():
        rate = f"  {2 * gb / s:7.2f} GB/s copied" if name == "copies only" else ""
        print(f"  {name:<13} {s * 1e3:10.3f} ms{rate}")
    print(f"  speedup (one / two streams) {figures['speedup']:.2f}x, hidden "
          f"{figures['hidden']:.2f}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stem = re.sub(r"[^a-z0-9]+", "_", figures["device"].lower()).strip("_")
        path = os.path.join(args.out, f"streams_{stem}.json")
        with open(path, "w") as f:
            json.dump(figures, f, indent=1)
        print(f"wrote {path}")
    return figures


if __name__ == "__main__":
    main()
