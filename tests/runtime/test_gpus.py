"""Several devices in one process: ``nv.gpus``, the current device per thread,
arrays that belong to their device, copies between devices, one compile
shared by devices of one target, a pipeline cache file per device and the
AOT profile per device.

On a machine with one GPU (lavapipe here) the tests open the same physical
device several times (``NUMBA_VULKAN_DEVICE_COPIES``): every code path runs,
only the speed-up of real GPUs does not show. Where there are two physical
devices, ``A`` and ``B`` are two real ones.
"""

import json
import os
import sys
import threading
import time

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime import device as rt
from numba_vulkan.runtime import pipeline_cache, vk
from numba_vulkan.runtime.pipeline import Pipeline
from tests.helpers import ROOT, run_python



@nv.jit
def add_one(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] + 1.0


@pytest.fixture(scope="module")
def gpus():
    """``(A, B, N)``: two devices for the tests, and a third logical device
    opened with float64 and int64 masked (a narrow target), always a
    logical copy so that no real device stays masked."""
    physical = len(nv.list_devices())
    copies = -(-2 // physical) + 1
    saved = {k: os.environ.get(k) for k in ("NUMBA_VULKAN_DEVICE_COPIES",
                                             "NUMBA_VULKAN_MASK_FEATURES")}
    os.environ["NUMBA_VULKAN_DEVICE_COPIES"] = str(copies)
    a, b = nv.gpus[0].device, nv.gpus[1].device
    os.environ["NUMBA_VULKAN_MASK_FEATURES"] = "float64,int64"
    narrow = nv.gpus[len(nv.gpus) - 1].device
    os.environ.pop("NUMBA_VULKAN_MASK_FEATURES")
    yield a, b, narrow
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_importing_opens_no_device_and_listing_opens_none():
    script = ("import sys, numba_vulkan as nv\n"
              "assert 'vulkan' not in sys.modules\n"
              "from numba_vulkan.runtime import device\n"
              "n = len(nv.list_devices())\n"
              "assert len(nv.gpus) == 2 * n, (len(nv.gpus), n)\n"
              "assert [g.id for g in nv.gpus] == list(range(2 * n))\n"
              "assert nv.gpus[n].name == nv.gpus[0].name and nv.gpus[-1].id == 2 * n - 1\n"
              "assert device._devices == {}, device._devices\n"
              "from numba_vulkan import cuda\n"
              "assert cuda.gpus is nv.gpus\n"
              "print('ok')\n")
    result = run_python("-c", script, cwd=ROOT, env={"NUMBA_VULKAN_DEVICE_COPIES": "2"})
    assert result.stdout.strip() == "ok", result.stderr


def test_gpus_index_errors_and_settings(gpus, monkeypatch):
    count = len(nv.gpus)
    with pytest.raises(IndexError, match=f"there are {count} device"):
        nv.gpus[count]
    with pytest.raises(nv.DriverError, match=f"no Vulkan device {count}"):
        nv.select_device(count)
    monkeypatch.setenv("NUMBA_VULKAN_DEVICE_COPIES", "0")
    with pytest.raises(ValueError, match="NUMBA_VULKAN_DEVICE_COPIES"):
        len(nv.gpus)


def test_arrays_and_kernels_on_each_device(gpus):
    a, b, _ = gpus
    before = nv.get_current_device()
    x = np.arange(100, dtype=np.float32)
    for device, k in ((a, 1), (b, 2)):
        with nv.gpus[device.id] as entered:
            assert entered is device and nv.get_current_device() is device
            assert nv.gpus.current is device
            dx = nv.to_device(x * k)
            out = nv.device_array_like(dx)
            assert dx.device is device and out.device is device
            add_one.forall(x.size)(dx, out)
            host = np.zeros_like(x)
            add_one.forall(x.size)(x * k, host)      # a NumPy argument, staged on this device
            assert np.array_equal(out.copy_to_host(), x * k + 1)
            assert np.array_equal(host, x * k + 1)
        assert nv.get_current_device() is before
    # Nested blocks, and a Device as its own context manager.
    with nv.gpus[a.id]:
        with b:
            assert nv.get_current_device() is b
        assert nv.get_current_device() is a
    assert nv.get_current_device() is before


def test_one_compile_shared_one_pipeline_per_device(gpus):
    a, b, _ = gpus
    assert a.target == b.target
    x = np.ones(10, np.float32)
    for device in (a, b):
        with device:
            add_one.forall(x.size)(nv.to_device(x), nv.device_array_like(x))
    sig = ("float32[1d,C]", "float32[1d,C]")
    plans = {device: plan for (s, _, device), plan in add_one._plans.items() if s == sig}
    assert a in plans and b in plans
    assert plans[a].kernel is plans[b].kernel
    assert [k for k in add_one._compiled if k[0] == sig and k[2] == a.target] != []
    assert len([k for k in add_one._compiled if k[0] == sig and k[2] == a.target]) == 1
    assert plans[a].pipeline is not plans[b].pipeline
    assert plans[a].pipeline.device is a and plans[b].pipeline.device is b


def test_launch_mixing_devices_names_the_parameter(gpus):
    a, b, _ = gpus
    x = np.arange(8, dtype=np.float32)
    with a:
        da = nv.to_device(x)
    with b:
        out = nv.device_array_like(x)
        with pytest.raises(nv.LaunchError, match=r"add_one\(\): parameter 'x' lives on another "
                                                 rf"device: it is an array of device {a.id} "):
            add_one.forall(x.size)(da, out)
    with a:
        with pytest.raises(nv.LaunchError, match=f"parameter 'out' lives on another device.*"
                                                 f"launch runs on device {a.id}"):
            add_one.forall(x.size)(da, out)


def test_copies_between_devices(gpus, rng):
    a, b, narrow = gpus
    x = rng.random((6, 50)).astype(np.float32)
    with a:
        da = nv.to_device(x)
    db = nv.to_device(da, device=b)
    assert db.device is b and np.array_equal(db.copy_to_host(), x)
    back = nv.device_array(x.shape, np.float32, device=nv.gpus[a.id])
    back.copy_to_device(db)
    assert np.array_equal(back.copy_to_host(), x)
    # Views that are not contiguous, both ways.
    strided = nv.device_array((6, 25), np.float32, device=b)
    strided.copy_to_device(da[:, ::2])
    assert np.array_equal(strided.copy_to_host(), x[:, ::2])
    da[:, 1::2].copy_to_device(db[:, ::2])
    expect = x.copy()
    expect[:, 1::2] = x[:, ::2]
    assert np.array_equal(da.copy_to_host(), expect)
    # A device storing float64 as float32 and one storing it whole.
    y = rng.random(40)
    full = nv.to_device(y, device=a)
    narrowed = nv.to_device(full, device=narrow)
    assert narrowed.storage == np.float32 and narrowed.dtype == np.float64
    assert np.array_equal(narrowed.copy_to_host(), y.astype(np.float32).astype(np.float64))
    with pytest.raises(nv.LaunchError, match="shape mismatch"):
        db.copy_to_device(nv.device_array(3, np.float32, device=a))
    # numba.cuda's spelling: to the calling thread's current device.
    from numba_vulkan import cuda
    with cuda.gpus[b.id]:
        moved = cuda.to_device(da)
    assert moved.device is b and np.array_equal(moved.copy_to_host(), expect)


def test_copy_between_unmapped_devices_goes_a_chunk_at_a_time(gpus, monkeypatch, rng):
    """The path of discrete GPUs, whose memory the host cannot map: taken on
    lavapipe by making the buffers look unmapped, so that reads and writes
    go through staging and the device's copies."""
    from numba_vulkan.runtime import transfer
    a, b, _ = gpus
    x = rng.random(10_001).astype(np.float32)
    src = nv.to_device(x, device=np.int64(a.id))
    dst = nv.device_array(x.shape, np.float32, device=b)
    monkeypatch.setattr(transfer, "CHUNK", 4096)
    monkeypatch.setattr(src.buffer, "readable", False)
    monkeypatch.setattr(dst.buffer, "mapped", None)
    reads, writes = [], []
    monkeypatch.setattr(src.buffer, "read", lambda out, offset=0: reads.append(out.size)
                        or type(src.buffer).read(src.buffer, out, offset))
    monkeypatch.setattr(dst.buffer, "write", lambda data, offset=0: writes.append(len(data))
                        or type(dst.buffer).write(dst.buffer, data, offset))
    dst.copy_to_device(src)
    assert reads == writes == [4096] * 9 + [x.nbytes - 9 * 4096]
    monkeypatch.undo()
    assert np.array_equal(dst.copy_to_host(), x)


def test_current_device_is_per_thread_and_launches_run_from_two_threads(gpus):
    a, b, _ = gpus
    main = nv.get_current_device()
    both_inside = threading.Barrier(2, timeout=60)
    n, rounds = 4096, 20
    results, seen, errors = {}, {}, []

    def work(device, k, select):
        try:
            if select:
                nv.select_device(device.id)
                context = nv.gpus[device.id]   # entering it again changes nothing
            else:
                context = nv.gpus[device.id]
            with context:
                both_inside.wait()
                seen[k] = nv.get_current_device()
                data = nv.to_device(np.full(n, k, np.float32))
                out = nv.device_array_like(data)
                for _ in range(rounds):
                    add_one.forall(n)(data, out)
                    add_one.forall(n)(out, data)
                nv.synchronize()
                both_inside.wait()
                results[k] = data.copy_to_host()
        except Exception as exc:   # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(d, k, k == 2))
               for d, k in ((a, 1), (b, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen == {1: a, 2: b}
    for k in (1, 2):
        assert np.array_equal(results[k], np.full(n, k + 2 * rounds, np.float32))
    # The thread's select_device made b the default of threads that chose none.
    assert rt._default is b
    nv.select_device(main)
    assert nv.get_current_device() is main


@nv.jit
def spin(out, trips):
    i = nv.global_id(0)
    if i < out.shape[0]:
        acc = np.float32(0.0)
        for _ in range(trips):
            acc = acc * np.float32(0.5) + np.float32(1.0)
        out[i] = acc


def test_a_launch_on_one_device_does_not_wait_for_another(gpus):
    """While one thread's long launch runs on A (lavapipe runs it inside the
    submission, a GPU while the thread waits), a launch and synchronize on B
    from another thread finishes: nothing serialises devices, and the GIL is
    released while the driver works."""
    a, b, _ = gpus
    with a:
        long = nv.device_array(1 << 14, np.float32)
    with b:
        short = nv.device_array(64, np.float32)
        spin.forall(short.size)(short, np.int32(4))
        nv.synchronize()
    v = vk.module()
    counter = v.ffi.new("uint64_t*")

    def finished_on_a():
        """A's finished submissions, read past the queue's lock, which a
        waiting thread holds."""
        vk.check(v.lib.vkGetSemaphoreCounterValue(a.handle, a.stream._semaphore_handle,
                                                  counter), "vkGetSemaphoreCounterValue")
        return counter[0]

    trips = 4000
    # At most 64000 trips where loops have a limit (lavapipe's is far above);
    # a GPU finishes those before B's launch starts, so it may go to 16M.
    for _ in range(3 if a.target.loop_limit else 7):
        started = threading.Event()
        target = a.stream._submitted + 1

        def run_long():
            with a:
                started.set()
                spin.forall(long.size)(long, np.int32(trips))
                nv.synchronize()

        worker = threading.Thread(target=run_long)
        worker.start()
        started.wait()
        time.sleep(0.01)    # A's launch is in the driver by now
        with b:
            spin.forall(short.size)(short, np.int32(4))
            nv.synchronize()
        overlapped = finished_on_a() < target
        worker.join()
        if overlapped:
            break
        trips *= 4          # A finished first: make it longer and try again
    assert overlapped, "the launch on B waited for A's"
    assert np.array_equal(short.copy_to_host(), np.full(64, 1.875, np.float32))
    assert np.allclose(long.copy_to_host(), 2.0)


def test_each_device_has_its_own_pipeline_cache_file(gpus, monkeypatch, cache_dir):
    a, b, narrow = gpus
    monkeypatch.setenv("NUMBA_VULKAN_PIPELINE_CACHE", "1")
    caches = [pipeline_cache.for_device(d) for d in (a, b, narrow)]
    paths = [c.path for c in caches]
    assert len(set(paths)) == 3
    for device, path in zip((a, b, narrow), paths):
        assert os.path.basename(path) == pipeline_cache.file_name(
            device.info, pipeline_cache.twin(device))
    assert os.path.basename(paths[0]) == pipeline_cache.file_name(a.info)
    if a.info.index == b.info.index:
        assert pipeline_cache.twin(b) == 1 and paths[1].endswith("-1.bin")
    kernel = add_one.compile("void(float32[::1], float32[::1])")
    for device, cache in zip((a, b), caches):
        Pipeline(device, kernel.spirv, kernel.params, kernel.push_size, cache=cache)
    for device, path in zip((a, b), paths[:2]):
        with open(path, "rb") as f:
            assert pipeline_cache.unpack(device.info, f.read())
    assert not os.path.exists(paths[2])


@pytest.fixture(scope="module")
def aot_project(tmp_path_factory):
    """A kernel built ahead of time for the full and the narrow profile."""
    root = tmp_path_factory.mktemp("gpus-aot")
    (root / "gpus_aot_kernels.py").write_text(
        "import numba_vulkan as nv\n\n\n@nv.jit\ndef triple(x, out):\n"
        "    i = nv.global_id(0)\n    if i < x.shape[0]:\n        out[i] = x[i] * 3.0\n")
    (root / "kernels.yaml").write_text(
        "version: 1\noutput: aot\nprofiles:\n  - name: full\n  - name: narrow\n"
        "    narrow: true\nkernels:\n  - function: gpus_aot_kernels:triple\n"
        "    signatures: [\"void(float32[::1], float32[::1])\"]\n")
    sys.path.insert(0, str(root))
    try:
        from numba_vulkan.aot.build import builder as build
        result = build.build(str(root / "kernels.yaml"))
        assert not result.failures and result.built == 2
        import gpus_aot_kernels
    finally:
        sys.path.remove(str(root))
    return root, gpus_aot_kernels


def test_aot_lookup_picks_the_profile_of_each_device(gpus, aot_project, monkeypatch):
    a, _, narrow = gpus
    root, module = aot_project
    assert narrow.target.narrowed == ("float64", "int64") and not a.target.narrowed
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(root / "aot"))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")     # a miss would be an error
    x = np.arange(64, dtype=np.float32)
    profiles = {}
    for device in (a, narrow):
        with device:
            out = np.zeros_like(x)
            module.triple.forall(x.size)(x, out)
            assert np.array_equal(out, x * 3)
            plan = module.triple._plans[(("float32[1d,C]", "float32[1d,C]"),
                                         (256, 1, 1), device)]
            profiles[device] = plan.kernel.metadata["aot"]["profile"]
    assert profiles == {a: "full", narrow: "narrow"}


def test_split_work_benchmark_runs_and_checks_its_results(tmp_path):
    """benchmarks/bench_gpus.py, at a tiny size, so that it still runs when a
    machine with several GPUs is there to measure."""
    out = tmp_path / "gpus.json"
    result = run_python(os.path.join(ROOT, "benchmarks", "bench_gpus.py"), "--copies", "2",
                        "--devices", "2", "--size", "4096", "--iters", "4", "--rounds", "1",
                        "--copy-mib", "1", "--json", out, cwd=ROOT,
                        env={"NUMBA_VULKAN_DEVICE_COPIES": None})
    assert "2 devices, 2 threads" in result.stdout and "GB/s" in result.stdout
    figures = json.loads(out.read_text())
    assert figures["devices"] == 2 and figures["copies"] == 2 and figures["size"] == 4096
    assert all(s > 0 for s in figures["seconds"].values())
