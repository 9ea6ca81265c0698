"""Streams and events: work on one stream runs in order, streams wait for
each other only through events and the default stream, and streams with
queues of their own overlap.

Lavapipe has one queue, on which every stream runs in submission order. The
``queues`` fixture also runs the tests with streams on queue objects of
their own (three compute "queues" and a transfer-only one, sharing the one
VkQueue where the device has no more), so that every wait between queues is
made as it is on a GPU and the results still checked.
"""

import json
import threading
import time

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.runtime.queue import Lane, Stream


@nv.jit
def axpb(x, a, b):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = a * x[i] + b


@nv.jit
def add_into(out, x, y):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] + y[i]


@nv.jit
def spin(out, n):
    acc = np.float32(0)
    for _ in range(n):
        acc = acc * np.float32(0.5) + np.float32(1)
    out[0] = acc


N = 1000
GROUPS, THREADS = 4, 256


@pytest.fixture(params=["one queue", "queues of their own"])
def queues(request, monkeypatch):
    """Streams made in the test share the default stream's queue, or have
    queues of their own (of a family of their own, as with
    NUMBA_VULKAN_ASYNC_COMPUTE); yields the list of (stream, its waits) of
    every submission that waited for something."""
    device = nv.get_current_device()
    base = device.lanes[0]
    if request.param == "one queue":
        monkeypatch.setattr(device, "stream_lanes", [base])
        monkeypatch.setattr(device, "copy_lanes", [])
    elif len(device.stream_lanes) < 2 or base in device.stream_lanes or not device.copy_lanes:
        def lane(transfer_only, family):
            made = Lane(device, base.family, base.index, transfer_only, base.timestamp_bits)
            made.lock = base.lock       # the same VkQueue
            # Told apart as another family's queues are: a launch records a
            # command buffer for each (from the one pool there is).
            made.family = family
            return made
        monkeypatch.setattr(device, "stream_lanes", [lane(False, -1), lane(False, -1)])
        monkeypatch.setattr(device, "copy_lanes", [lane(True, -2)])
    waited = []
    general = Stream._general_info

    def spy(self, command_buffer, number, waits, lane):
        if waits:
            waited.append((self, list(waits)))
        return general(self, command_buffer, number, waits, lane)
    monkeypatch.setattr(Stream, "_general_info", spy)
    yield waited
    nv.synchronize()


def _as_on_a_gpu(monkeypatch, *arrays):
    """Make the device copy into and out of ``arrays``, as on a GPU whose
    memory the host cannot map (lavapipe's it can)."""
    for ary in arrays:
        monkeypatch.setattr(ary.buffer, "mapped", None)
        monkeypatch.setattr(ary.buffer, "readable", False)


def test_each_stream_runs_its_copies_and_launches_in_order(queues, rng, monkeypatch):
    """Three streams, each a chain of copies in, launches, a copy into the
    middle of the chain and a copy out, submitted in turn."""
    streams = [nv.stream() for _ in range(3)]
    starts = [rng.integers(-20, 20, N).astype(np.float32) for _ in streams]
    extras = [rng.integers(-20, 20, N).astype(np.float32) for _ in streams]
    xs = [nv.device_array(N, np.float32) for _ in streams]
    ys = [nv.device_array(N, np.float32) for _ in streams]
    _as_on_a_gpu(monkeypatch, *xs, *ys)
    for x, start, s in zip(xs, starts, streams):
        x.copy_to_device(start, stream=s)      # through staging memory
    outs = [nv.pinned_array(N, np.float32) for _ in streams]
    for k, (s, x) in enumerate(zip(streams, xs)):
        axpb[GROUPS, THREADS, s](x, np.float32(2), np.float32(k))
    for s, y, extra in zip(streams, ys, extras):
        y.copy_to_device(extra, stream=s)
    for s, x, y in zip(streams, xs, ys):
        add_into[GROUPS, THREADS, s](x, x, y)
        axpb.forall(N, stream=s)(x, np.float32(-1), np.float32(3))
    for s, x, out in zip(streams, xs, outs):
        x.copy_to_host(out, stream=s)
    for s in streams:
        s.synchronize()
    for k, (start, extra, out) in enumerate(zip(starts, extras, outs)):
        np.testing.assert_array_equal(out, -(2 * start + k + extra) + 3)
    if any(s.copy_lane is not s.lane for s in streams):
        # A stream's copies on the transfer queue and launches on its own:
        # each hop waited for the stream's previous submission.
        assert any(any(w is s for w, _ in waits) for s, waits in queues)


def test_an_event_makes_another_stream_wait(queues, rng):
    first, second = nv.stream(), nv.stream()
    x = nv.to_device(rng.integers(-9, 9, N).astype(np.float32), stream=first)
    expected = x.copy_to_host(stream=first) * 3 + 1
    out = nv.device_array(N, np.float32)
    axpb[GROUPS, THREADS, first](x, np.float32(3), np.float32(1))
    done = nv.event(timing=False)
    done.record(first)
    second.wait_event(done)
    add_into[GROUPS, THREADS, second](out, x, x)
    result = nv.pinned_array(N, np.float32)
    out.copy_to_host(result, stream=second)
    second.synchronize()
    np.testing.assert_array_equal(result, 2 * expected)
    assert any(s is second and (first, done._where[1]) in waits for s, waits in queues)
    # numba.cuda's spelling, and an event never recorded is no wait.
    cuda.event().wait(second)
    done.wait(second)
    axpb[GROUPS, THREADS, second](out, np.float32(1), np.float32(1))
    np.testing.assert_array_equal(out.copy_to_host(stream=second), 2 * expected + 1)


def test_the_default_stream_waits_for_every_stream_and_they_for_it(queues, rng):
    """numba.cuda's legacy default stream: work on it runs after the work
    submitted before on every stream, and work on a stream after the
    default stream's."""
    mine = nv.stream()
    x = nv.to_device(rng.integers(-9, 9, N).astype(np.float32))
    before = x.copy_to_host()
    axpb[GROUPS, THREADS, mine](x, np.float32(2), np.float32(0))
    axpb[GROUPS, THREADS](x, np.float32(1), np.float32(5))     # the default stream
    axpb[GROUPS, THREADS, mine](x, np.float32(-1), np.float32(0))
    np.testing.assert_array_equal(x.copy_to_host(), -(2 * before + 5))
    axpb[GROUPS, THREADS, mine](x, np.float32(1), np.float32(5))   # the default's launch
    np.testing.assert_array_equal(x.copy_to_host(), -2 * before)
    default = nv.default_stream()
    if mine.lane.family != default.lane.family:
        # One recorded launch, a command buffer for each queue family.
        plan = axpb._plans[(("float32[1d,C]", "float32", "float32"), (THREADS, 1, 1),
                            nv.get_current_device())]
        assert any(len(entry[0]) == 2 for entry in plan.pipeline._recorded.values())
    assert default is cuda.default_stream() is nv.get_current_device().stream
    if mine.lane is not default.lane:
        assert any(s is default and any(w is mine for w, _ in waits) for s, waits in queues)
        assert any(s is mine and any(w is default for w, _ in waits) for s, waits in queues)
    else:
        # On the default stream's own queue its order needs no waits.
        assert not any((s is default and any(w is mine for w, _ in waits))
                       or (s is mine and any(w is default for w, _ in waits))
                       for s, waits in queues)


def test_streams_of_several_threads_and_the_default_stream_at_once(queues, rng):
    """Threads each run a chain on a stream of their own while the main
    thread launches on the default stream: every chain's result is right."""
    starts = [rng.integers(-20, 20, N).astype(np.float32) for _ in range(4)]
    results = [None] * len(starts)

    def chain(k):
        s = nv.stream()
        x = nv.to_device(starts[k], stream=s)
        for step in range(6):
            axpb[GROUPS, THREADS, s](x, np.float32(1), np.float32(step))
        results[k] = x.copy_to_host(stream=s)

    threads = [threading.Thread(target=chain, args=(k,)) for k in range(len(starts))]
    for t in threads:
        t.start()
    mine = nv.to_device(starts[0])
    for _ in range(20):
        axpb[GROUPS, THREADS](mine, np.float32(1), np.float32(1))
    for t in threads:
        t.join()
    for start, result in zip(starts, results):
        np.testing.assert_array_equal(result, start + 15)
    np.testing.assert_array_equal(mine.copy_to_host(), starts[0] + 20)


def test_a_stream_pipeline_in_numba_cuda_style(queues):
    """A numba.cuda program, unchanged but for the import: chunks copied in,
    computed and copied out on two streams, through pinned memory."""
    @cuda.jit
    def scale_add(x, a, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + 1

    n, chunks, tpb = 4096, 8, 128
    data = np.arange(n, dtype=np.float32)
    host_in = cuda.pinned_array(n, dtype=np.float32)
    host_in[:] = data
    host_out = cuda.pinned_array(n, dtype=np.float32)
    streams = [cuda.stream() for _ in range(2)]
    step = n // chunks
    for k in range(chunks):
        stream = streams[k % 2]
        part = slice(k * step, (k + 1) * step)
        d_in = cuda.to_device(host_in[part], stream=stream)
        d_out = cuda.device_array(step, dtype=np.float32, stream=stream)
        scale_add[(step + tpb - 1) // tpb, tpb, stream](d_in, np.float32(2), d_out)
        d_out.copy_to_host(host_out[part], stream=stream)
    for stream in streams:
        stream.synchronize()
    np.testing.assert_array_equal(host_out, 2 * data + 1)
    start, end = cuda.event(), cuda.event()
    start.record(streams[0])
    with streams[0].auto_synchronize():
        d = cuda.to_device(data, stream=streams[0])
        scale_add.forall(n, stream=streams[0])(d, np.float32(-1), d)
        end.record(streams[0])
    assert end.query() and streams[0].query()
    assert cuda.event_elapsed_time(start, end) >= 0
    np.testing.assert_array_equal(d.copy_to_host(), 1 - data)


def test_synchronize_and_query(rng):
    s = cuda.stream()
    assert s.query()                       # nothing submitted
    values = rng.integers(0, 9, N).astype(np.float32)
    x = nv.to_device(values)
    axpb[GROUPS, THREADS, s](x, np.float32(2), np.float32(1))
    s.synchronize()
    assert s.query()
    np.testing.assert_array_equal(x.copy_to_host(stream=s), 2 * values + 1)
    ev = cuda.event(timing=False)
    assert ev.query()                      # never recorded: done, as in numba.cuda
    ev.record(s)
    ev.synchronize()
    assert ev.query()
    with pytest.raises(TypeError, match="stream"):
        axpb[GROUPS, THREADS, "s"]
    with pytest.raises(TypeError, match="stream"):
        nv.to_device(np.zeros(4), stream=1)
    with pytest.raises(TypeError, match="stream"):
        x.copy_to_host(stream="s")


@nv.jit(boundscheck=True)
def checked_copy(x, out, n):
    i = nv.global_id(0)
    if i < n:
        out[i] = x[i]


def test_numpy_arguments_and_error_checks_on_a_stream(queues):
    """A launch on a stream with NumPy arrays copies them in and back on the
    stream, and one with error checks raises what the kernel reported."""
    s = nv.stream()
    x = np.arange(N, dtype=np.float32)
    axpb.forall(N, stream=s)(x, np.float32(2), np.float32(1))
    np.testing.assert_array_equal(x, 2 * np.arange(N, dtype=np.float32) + 1)
    out = nv.device_array(8, np.float32)
    checked_copy[1, 8, s](nv.to_device(x[:8], stream=s), out, 8)
    np.testing.assert_array_equal(out.copy_to_host(stream=s), x[:8])
    with pytest.raises(IndexError, match="out of bounds"):
        checked_copy[1, 16, s](x[:8], out, 16)


def _timed_spin(s, trips):
    """Four events recorded around a launch of 256 `spin`s on `s`: the
    interval with the work in it, the one after it, the whole, and an empty
    one (ms)."""
    out = nv.device_array(1, np.float32)
    a, b, c, d = (nv.event() for _ in range(4))
    a.record(s)
    spin[4, 64, s](out, np.int32(trips))
    b.record(s)
    c.record(s)
    d.record(s)
    d.synchronize()
    assert out.copy_to_host()[0] == 2                  # 1 + 1/2 + 1/4 + ... in float32
    return a.elapsed_time(b), b.elapsed_time(c), a.elapsed_time(c), c.elapsed_time(d)


def test_events_time_on_the_device_clock():
    """Timestamps of three events: the two intervals add up to the whole,
    and the interval with the work in it is longer than an empty one.
    Each record may be a submission of its own, and on a loaded machine
    lavapipe's queue thread can wait milliseconds between two of them, so
    the comparison gets three tries: timestamps taken on the host when
    record() is called would fail all three, as the launch returns before
    its work is done."""
    spin[1, 1](nv.device_array(1, np.float32), np.int32(10))
    s = nv.stream()
    tries = []
    for _ in range(3):
        first, rest, whole, empty = _timed_spin(s, 500_000)
        assert first > 0 and rest >= 0 and empty >= 0
        assert whole == pytest.approx(first + rest, rel=1e-6, abs=1e-6)
        tries.append((first, empty))
        if first > empty:
            break
    assert any(first > empty for first, empty in tries), tries
    a = nv.event()
    a.record(s)
    a.synchronize()
    with pytest.raises(nv.LaunchError, match="not recorded"):
        nv.event().elapsed_time(a)
    untimed = nv.event(timing=False)
    untimed.record(s)
    with pytest.raises(nv.LaunchError, match="timing=False"):
        a.elapsed_time(untimed)


def test_copies_on_a_stream_into_and_out_of_pinned_memory_return_at_once(monkeypatch, rng):
    """As on a GPU, whose memory the host cannot map: copy_to_device from a
    pinned array and copy_to_host into one are each one device copy on the
    stream, and neither waits."""
    values = rng.integers(-50, 50, N).astype(np.float32)
    d = nv.device_array(N, np.float32)
    pinned_in, pinned_out = nv.pinned_array(N, np.float32), nv.pinned_array(N, np.float32)
    pinned_in[:] = values
    _as_on_a_gpu(monkeypatch, d)
    s = nv.stream()
    waits = []
    real = Stream.wait_for
    monkeypatch.setattr(Stream, "wait_for",
                        lambda self, n: (self is s and waits.append(n), real(self, n)))
    from numba_vulkan.runtime import transfer
    monkeypatch.setattr(transfer, "write", None)       # no staged copy either
    monkeypatch.setattr(transfer, "read", None)
    d.copy_to_device(pinned_in, stream=s)
    axpb[GROUPS, THREADS, s](d, np.float32(3), np.float32(0))
    d.copy_to_host(pinned_out, stream=s)
    assert waits == []
    s.synchronize()
    np.testing.assert_array_equal(pinned_out, 3 * values)


def _spin_seconds(streams, n, out):
    start = time.perf_counter()
    for s in streams:
        spin[1, 1, s](out, np.int32(n))
    nv.synchronize()
    return time.perf_counter() - start


def test_streams_with_queues_of_their_own_overlap():
    device = nv.get_current_device()
    if len(device.stream_lanes) < 2:
        pytest.skip(f"device {device.name} has {len(device.lanes)} compute queue(s) open "
                    "(lavapipe has one): streams share them, and run one after another")
    a, b = nv.stream(), nv.stream()
    assert a.lane is not b.lane
    outs = [nv.device_array(1, np.float32) for _ in range(2)]
    n = 1 << 20
    while _spin_seconds([a], n, outs[0]) < 0.02 and n < 1 << 28:
        n *= 2                 # long enough that launching costs little
    for _ in range(3):
        one = _spin_seconds([a, a], n, outs[0])
        start = time.perf_counter()
        spin[1, 1, a](outs[0], np.int32(n))
        spin[1, 1, b](outs[1], np.int32(n))
        nv.synchronize()
        two = time.perf_counter() - start
        if two < 0.75 * one:
            break
    assert two < 0.75 * one, f"two streams took {two:.4f} s, one stream {one:.4f} s"
    np.testing.assert_array_equal(outs[0].copy_to_host(), outs[1].copy_to_host())


def test_the_streams_benchmark_runs_and_checks_its_results(tmp_path):
    """benchmarks/bench_streams.py at a tiny size, so that it still runs when
    the GPU is there to measure it."""
    from benchmarks import bench_streams
    figures = bench_streams.main(["--size", "4096", "--chunks", "2", "--iters", "2",
                                  "--repeats", "1", "--out", str(tmp_path)])
    written, = tmp_path.glob("streams_*.json")
    assert json.loads(written.read_text()) == json.loads(json.dumps(figures))
    assert figures["size"] == 4096 and figures["chunks"] == 2
    assert set(figures["seconds"]) == {"one stream", "two streams", "copies only",
                                       "kernels only"}
    assert all(s > 0 for s in figures["seconds"].values())
    one, two = figures["seconds"]["one stream"], figures["seconds"]["two streams"]
    assert figures["speedup"] == pytest.approx(one / two)


def test_a_copy_on_one_stream_overlaps_a_kernel_on_another():
    """Copies of user streams go to a transfer-only queue (a GPU's copy
    engines): a copy into the device runs while another stream's kernel does."""
    device = nv.get_current_device()
    if not device.copy_lanes:
        pytest.skip(f"device {device.name} has no transfer-only queue open (lavapipe has "
                    "none): copies run on the compute queues")
    a, b = nv.stream(), nv.stream()
    host = nv.pinned_array(1 << 26, np.float32)
    host[:] = 1.5
    d = nv.device_array_like(host)
    out = nv.device_array(1, np.float32)

    def copy_seconds():
        start = time.perf_counter()
        d.copy_to_device(host, stream=b)
        b.synchronize()
        return time.perf_counter() - start

    copy = min(copy_seconds() for _ in range(3))
    n = 1 << 16
    while _spin_seconds([a], n, out) < copy and n < 1 << 28:
        n *= 2                 # a kernel at least as long as the copy
    for _ in range(3):
        kernel = _spin_seconds([a], n, out)
        start = time.perf_counter()
        spin[1, 1, a](out, np.int32(n))
        d.copy_to_device(host, stream=b)
        nv.synchronize()
        both = time.perf_counter() - start
        if both < 0.8 * (kernel + copy):
            break
    assert both < 0.8 * (kernel + copy), (f"a kernel of {kernel:.4f} s and a copy of "
                                          f"{copy:.4f} s took {both:.4f} s together")
    assert d[12345] == 1.5 and out.copy_to_host()[0] == 2


def test_info_lists_the_queue_families(capsys):
    from numba_vulkan.__main__ import info
    from numba_vulkan.runtime.device import queue_families
    device = nv.get_current_device()
    assert info() == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "queues:" in line]
    line, families = lines[device.info.index], queue_families(device.info.index)
    assert line.count("(family") == len(families)
    kinds, count, _ = families[device.queue_family]
    assert "compute" in kinds and f"{count} {'+'.join(kinds)}" in line


@nv.jit
def first_into(src, out):
    out[0] = src[0]


def test_callbacks_run_in_order_and_later_work_waits_for_them(queues):
    """numba.cuda's add_callback: after the stream's earlier work, one at a
    time, and the stream's later work (and its synchronize) after them."""
    s = cuda.stream()
    flag = cuda.mapped_array(1, np.float32)
    flag[0] = 0
    out = nv.device_array(1, np.float32)
    release, calls = threading.Event(), []

    def slow(stream, status, arg):
        release.wait(10)
        flag[0] = arg
        calls.append((stream, status, arg))

    axpb[GROUPS, THREADS, s](nv.device_array(N, np.float32), np.float32(0), np.float32(0))
    s.add_callback(slow, 7.0)
    s.add_callback(lambda stream, status, arg: calls.append((stream, status, arg)), "second")
    first_into[1, 1, s](flag, out)         # submitted at once, run after both
    assert not s.query()                   # the first callback is waiting
    release.set()
    s.synchronize()
    assert calls == [(s, 0, 7.0), (s, 0, "second")]
    assert out.copy_to_host()[0] == 7 and s.query()
    with pytest.raises(TypeError, match="callable"):
        s.add_callback(None)


def test_async_done_resolves_to_the_stream():
    import asyncio
    s = nv.stream()
    x = nv.to_device(np.arange(N, dtype=np.float32))

    async def work():
        axpb[GROUPS, THREADS, s](x, np.float32(2), np.float32(0))
        return await s.async_done()

    assert asyncio.run(work()) is s
    np.testing.assert_array_equal(x.copy_to_host(), 2 * np.arange(N, dtype=np.float32))
