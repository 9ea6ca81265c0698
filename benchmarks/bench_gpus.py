"""The same work on one device and split over N devices (``nv.gpus``).

    python benchmarks/bench_gpus.py [--devices N] [--copies C] [--size S] [--iters I]
                                    [--rounds R] [--copy-mib M] [--json FILE]

A compute-bound float32 kernel (``I`` multiply-adds per element, in a loop)
runs ``R`` times over ``S`` elements:

* ``one device``: all ``S`` elements on ``nv.gpus[0]``;
* ``N devices, N threads``: ``S / N`` elements on each of ``nv.gpus[0..N-1]``,
  one thread per device inside ``with nv.gpus[i]:``;
* ``N devices, one thread``: the same parts, all launched from the calling
  thread (launches are asynchronous, so the devices overlap too).

Each time is the median of 5 runs after a warm-up, from the first launch to
the last device's synchronize; arrays are on their devices beforehand. The
results are checked against NumPy. It also times a copy of ``M`` MiB from
one device to another, into a new array (``nv.to_device(d, device=...)``)
and into an existing one (``d1.copy_to_device(d0)``), through the host.

``--copies C`` sets ``NUMBA_VULKAN_DEVICE_COPIES``: with one GPU, ``--copies
2`` splits the work over two logical devices of it, which exercises the
code but can only show what two queues of one GPU gain. Defaults: N = every
device ``nv.gpus`` lists (at least 2), sizes smaller on a CPU device.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def work_kernel(nv):
    """A kernel of ``iters`` multiply-adds per element, for the multi-queue benchmarks."""
    @nv.jit
    def work(x, out, iters):
        i = nv.global_id(0)
        if i < x.shape[0]:
            v = x[i]
            acc = np.float32(0.0)
            for _ in range(iters):
                acc = acc * np.float32(0.5) + v
            out[i] = acc
    return work


def expected_work(x, iters):
    """What :func:`work_kernel` computes, in NumPy."""
    acc = np.zeros_like(x)
    for _ in range(iters):
        acc = acc * np.float32(0.5) + x
    return acc


def median_seconds(run, repeats=5):
    """Median wall time of ``repeats`` calls of ``run``, after one untimed call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=None)
    parser.add_argument("--copies", type=int, default=None)
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--copy-mib", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    if args.copies:
        os.environ["NUMBA_VULKAN_DEVICE_COPIES"] = str(args.copies)
    import numba_vulkan as nv

    n = args.devices or max(2, len(nv.gpus))
    if n > len(nv.gpus):
        sys.exit(f"{n} devices asked for, nv.gpus lists {len(nv.gpus)}; "
                 "use --copies to open logical copies")
    devices = [nv.gpus[i].device for i in range(n)]
    cpu = devices[0].info.device_type == "cpu"
    size = args.size or ((1 << 20) if cpu else (1 << 26))
    iters = args.iters or (64 if cpu else 512)
    rounds = args.rounds or (4 if cpu else 20)
    copy_mib = args.copy_mib or (64 if cpu else 256)
    size -= size % n
    work = work_kernel(nv)
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    iters32 = np.int32(iters)

    def on(device, part):
        with device:
            data = nv.to_device(part)
            return data, nv.device_array_like(data)

    whole = on(devices[0], x)
    parts = [on(d, p) for d, p in zip(devices, np.split(x, n))]

    def launch(device, arrays):
        with device:
            for _ in range(rounds):
                work.forall(arrays[0].size)(arrays[0], arrays[1], iters32)

    def finish(device):
        with device:
            nv.synchronize()

    def one():
        launch(devices[0], whole)
        finish(devices[0])

    def threaded():
        def run(device, arrays):
            launch(device, arrays)
            finish(device)
        threads = [threading.Thread(target=run, args=(d, a)) for d, a in zip(devices, parts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def one_thread():
        for device, arrays in zip(devices, parts):
            launch(device, arrays)
        for device in devices:
            finish(device)

    rows = {"one device": median_seconds(one),
            f"{n} devices, {n} threads": median_seconds(threaded),
            f"{n} devices, one thread": median_seconds(one_thread)}
    expected = expected_work(x, iters)
    got = np.concatenate([out.copy_to_host() for _, out in parts])
    assert np.allclose(whole[1].copy_to_host(), expected, rtol=1e-5), "one device: WRONG"
    assert np.allclose(got, expected, rtol=1e-5), "split: WRONG"

    elements = copy_mib << 18
    with devices[0]:
        src = nv.to_device(np.arange(elements, dtype=np.float32))
    copy_s = median_seconds(lambda: nv.to_device(src, device=devices[1]))
    moved = nv.to_device(src, device=devices[1])
    into_s = median_seconds(lambda: moved.copy_to_device(src))
    assert moved.copy_to_host()[-1] == elements - 1

    names = sorted({d.name for d in devices})
    print(f"{n} devices ({', '.join(names)}; copies "
          f"{os.environ.get('NUMBA_VULKAN_DEVICE_COPIES', '1')}), {size} float32, "
          f"{iters} iterations, {rounds} launches; median of 5")
    base = rows["one device"]
    for name, seconds in rows.items():
        print(f"{name:26} {seconds * 1e3:10.2f} ms   speed-up {base / seconds:5.2f}x")
    for name, seconds in (("to_device(d, device=1)", copy_s),
                          ("d1.copy_to_device(d0)", into_s)):
        print(f"{name:26} {seconds * 1e3:10.2f} ms   {copy_mib} MiB device 0 -> 1, "
              f"{(copy_mib << 20) / seconds / 1e9:.2f} GB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"devices": n, "names": names, "size": size, "iters": iters,
                       "rounds": rounds, "seconds": rows, "copy_mib": copy_mib,
                       "to_device_seconds": copy_s, "copy_to_device_seconds": into_s,
                       "copies": int(os.environ.get("NUMBA_VULKAN_DEVICE_COPIES", "1"))},
                      f, indent=1)


if __name__ == "__main__":
    main()
