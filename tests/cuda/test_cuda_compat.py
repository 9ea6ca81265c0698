"""numba.cuda programs on numba_vulkan through ``from numba_vulkan import cuda``.

The kernels are written as numba.cuda code is (numba.cuda names only),
checked against NumPy; then the host API, launch configuration checks and
device arrays behaving like numba.cuda's.
"""

import io
import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.cuda import libdevice

from tests.helpers import assert_valid_spirv, compiled_kernels

RNG = np.random.default_rng(12)
TPB = 16


# numba.cuda programs -----------------------------------------------------------

@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


def test_vector_add_with_device_arrays():
    n = 100
    a = RNG.random(n).astype(np.float32)
    b = RNG.random(n).astype(np.float32)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_out = cuda.device_array_like(a)
    blocks = (n + TPB - 1) // TPB
    vector_add[blocks, TPB](d_a, d_b, d_out)
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)


@cuda.jit
def scaled_index(out):
    # A grid-stride loop over a 2-d array: grid(2) and gridsize(2) are tuples.
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for x in range(x0, out.shape[0], sx):
        for y in range(y0, out.shape[1], sy):
            out[x, y] = 1000 * x + y


def test_grid_2d_is_a_tuple_of_x_and_y():
    out = np.zeros((13, 9), np.int64)
    scaled_index[(2, 1), (4, 4)](out)
    expected = 1000 * np.arange(13)[:, None] + np.arange(9)[None, :]
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def block_sums(x, total, per_block):
    tile = cuda.shared.array(shape=TPB, dtype=cuda.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        per_block[cuda.blockIdx.x] = tile[0]
        cuda.atomic.add(total, 0, tile[0])


def test_shared_tile_reduction():
    # Small integers as floats: every order of summation is exact.
    x = RNG.integers(0, 10, 70).astype(np.float32)
    blocks = math.ceil(x.size / TPB)
    total = np.zeros(1, np.float32)
    per_block = np.zeros(blocks, np.float32)
    block_sums[blocks, TPB](x, total, per_block)
    padded = np.zeros(blocks * TPB, np.float32)
    padded[:x.size] = x
    np.testing.assert_array_equal(per_block, padded.reshape(blocks, TPB).sum(axis=1))
    assert total[0] == x.sum()


def test_thread_and_block_indices_along_every_axis():
    @cuda.jit
    def where(out):
        x, y, z = cuda.grid(3)
        sx, sy, sz = cuda.gridsize(3)
        k = (z * sy + y) * sx + x
        out[k, 0] = cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.threadIdx.z
        out[k, 1] = cuda.blockIdx.x + 10 * cuda.blockIdx.y + 100 * cuda.blockIdx.z
        out[k, 2] = cuda.blockDim.x + 10 * cuda.blockDim.y + 100 * cuda.blockDim.z
        out[k, 3] = cuda.gridDim.x + 10 * cuda.gridDim.y + 100 * cuda.gridDim.z

    groups, threads = (2, 3, 1), (2, 1, 2)
    out = np.full((24, 4), -1, np.int64)
    where[groups, threads](out)
    gx, gy, gz = (g * t for g, t in zip(groups, threads))
    z, y, x = np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij")
    x, y, z = x.ravel(), y.ravel(), z.ravel()
    np.testing.assert_array_equal(out[:, 0], x % 2 + 10 * (y % 1) + 100 * (z % 2))
    np.testing.assert_array_equal(out[:, 1], x // 2 + 10 * (y // 1) + 100 * (z // 2))
    assert (out[:, 2] == 2 + 10 + 200).all()
    assert (out[:, 3] == 2 + 30 + 100).all()


def test_native_grid_and_gridsize():
    @nv.jit
    def native(out):
        i = nv.grid(1)
        if i < out.shape[0]:
            out[i] = i * nv.gridsize(1)

    out = np.zeros(10, np.int64)
    native[3, 4](out)
    np.testing.assert_array_equal(out, np.arange(10) * 12)


@cuda.jit(device=True)
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@cuda.jit("void(float32[::1], float32[::1])", fastmath=False, debug=False, opt=True)
def clamped(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = clamp(x[i], np.float32(0.25), np.float32(0.75))


def test_signature_compiles_eagerly_and_device_functions_are_called():
    # The signature was compiled when the decorator ran.
    assert len(clamped._compiled) == 1
    x = RNG.random(40).astype(np.float32)
    out = np.zeros_like(x)
    clamped.forall(x.size)(x, out)
    np.testing.assert_array_equal(out, np.clip(x, np.float32(0.25), np.float32(0.75)))


def _fill(a, value):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = value + i


@pytest.mark.parametrize("form", [
    "void(float32[::1], float32)", cuda.void(cuda.float32[::1], cuda.float32),
    (cuda.float32[::1], cuda.float32), [cuda.void(cuda.float32[::1], cuda.float32)],
    [(cuda.float32[::1], cuda.float32)]], ids=["text", "object", "tuple", "[object]", "[tuple]"])
def test_every_signature_form_numba_cuda_takes_compiles_eagerly(form):
    kernel = cuda.jit(form)(_fill)
    assert len(kernel._compiled) == 1
    a = np.zeros(10, np.float32)
    kernel[1, 64](a, np.float32(0.5))
    np.testing.assert_array_equal(a, np.arange(10, dtype=np.float32) + np.float32(0.5))
    assert len(kernel._compiled) == 1


def test_a_signature_that_returns_a_value_is_refused():
    with pytest.raises(TypeError, match="returns float32: a kernel returns nothing"):
        cuda.jit("float32(float32[::1], float32)")(_fill)


def test_eager_compile_reports_typing_errors_at_decoration():
    with pytest.raises(nv.CompilerError):
        @cuda.jit("void(float32[::1])")
        def bad(x):
            x[0] = undefined_name  # noqa: F821


TABLE = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)


@cuda.jit
def atomics(values, out, counters):
    i = cuda.grid(1)
    if i < values.size:
        v = values[i]
        cuda.atomic.add(out, 0, v)
        cuda.atomic.sub(out, 1, v)
        cuda.atomic.max(out, 2, v)
        cuda.atomic.min(out, 3, v)
        cuda.atomic.or_(out, 4, v)
        cuda.atomic.and_(out, 5, v)
        cuda.atomic.xor(out, 6, v)
        table = cuda.const.array_like(TABLE)
        scratch = cuda.local.array(2, cuda.int32)
        scratch[0] = table[i % 8]
        scratch[1] = scratch[0] * 2
        cuda.atomic.add(out, 7, scratch[1])
        # Only the first invocation to arrive finds 0 and stores its index + 1.
        cuda.atomic.compare_and_swap(counters, 0, i + 1)
        cuda.atomic.cas(counters, 1, 0, i + 1)
        cuda.atomic.exch(counters, 2, 7)


def test_atomics_local_and_const_arrays():
    values = RNG.integers(1, 1000, 50).astype(np.int32)
    out = np.array([0, 0, 0, 2**30, 0, -1, 0, 0], np.int32)
    counters = np.zeros(3, np.int32)
    atomics.forall(values.size)(values, out, counters)
    assert out[0] == values.sum()
    assert out[1] == -values.sum()
    assert out[2] == values.max()
    assert out[3] == values.min()
    assert out[4] == np.bitwise_or.reduce(values)
    assert out[5] == np.bitwise_and.reduce(values)
    assert out[6] == np.bitwise_xor.reduce(values)
    assert out[7] == 2 * TABLE[np.arange(values.size) % 8].sum()
    assert 1 <= counters[0] <= values.size and 1 <= counters[1] <= values.size
    assert counters[2] == 7


def test_numba_types_are_numbas():
    from numba.core import types
    assert cuda.float32 is types.float32 and cuda.int64 is types.int64
    assert cuda.void is types.void


# Host API ---------------------------------------------------------------------

def test_device_queries():
    assert cuda.is_available()
    text = io.StringIO()
    assert cuda.detect(file=text)
    device = cuda.get_current_device()
    assert device.info.name in text.getvalue()
    assert cuda.select_device(device.info.index) is device


def test_to_device_into_an_existing_array_and_device_array():
    d = cuda.device_array(5, dtype=np.int32)
    assert d.shape == (5,) and d.dtype == np.int32
    host = np.arange(5, dtype=np.int32)
    assert cuda.to_device(host, to=d) is d
    np.testing.assert_array_equal(d.copy_to_host(), host)
    with pytest.raises(nv.UnsupportedError):
        cuda.device_array((2, 2), order="F")


# Launch configuration ----------------------------------------------------------------

@cuda.jit
def fill_everything(out):
    # No bounds check, on purpose: a launch of n == 0 must not run at all.
    out[cuda.grid(1) % out.size] = 1


def test_forall_zero_launches_nothing():
    out = np.zeros(4, np.int32)
    fill_everything.forall(0)(out)
    np.testing.assert_array_equal(out, 0)
    fill_everything.forall(1)(out)
    assert out.sum() >= 1


def test_forall_negative_is_a_value_error():
    with pytest.raises(ValueError, match="-1"):
        fill_everything.forall(-1)


@pytest.mark.parametrize("config, bad", [(((10.9,), 64), "10.9"), ((2.5, 64), "2.5"),
                                         ((4, (8, 1.5)), "1.5")])
def test_float_launch_sizes_are_type_errors(config, bad):
    with pytest.raises(TypeError, match=bad):
        fill_everything[config]


# Device arrays ----------------------------------------------------------------

def test_device_arrays_read_like_host_arrays():
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    d = cuda.to_device(host)
    np.testing.assert_array_equal(np.asarray(d), host)
    assert np.asarray(d, dtype=np.float32).dtype == np.float32
    assert d[1, 2] == 6.0 and isinstance(d[1, 2], np.float64)
    flat = cuda.to_device(host.ravel())
    assert list(flat) == list(host.ravel())
    assert sum(flat) == host.sum()
    rows = list(d)
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[2].copy_to_host(), host[2])
    assert d.nbytes == host.nbytes and d.strides == host.strides
    assert d.is_c_contiguous() and not d[:, 1].is_c_contiguous()


def test_device_arrays_write_by_index_and_slice():
    d = cuda.to_device(np.zeros(10, np.int32))
    d[2:5] = np.array([7, 8, 9], np.int32)
    d[7] = 3
    d[8:] = -1
    np.testing.assert_array_equal(d.copy_to_host(), [0, 0, 7, 8, 9, 0, 0, 3, -1, -1])
    m = cuda.to_device(np.zeros((3, 4), np.float32))
    m[:, 1] = np.arange(3, dtype=np.float32)
    expected = np.zeros((3, 4), np.float32)
    expected[:, 1] = np.arange(3)
    np.testing.assert_array_equal(np.asarray(m), expected)


def test_copy_to_host_into_a_given_array():
    d = cuda.to_device(np.arange(6, dtype=np.int64))
    out = np.zeros(6, np.int64)
    assert d.copy_to_host(out) is out
    np.testing.assert_array_equal(out, np.arange(6))
    with pytest.raises(nv.LaunchError):
        d.copy_to_host(np.zeros(5, np.int64))


def test_error_hints_name_what_the_cuda_module_has():
    from numba_vulkan.frontend import diagnostics
    for name in diagnostics.CUDA_MODULE_NAMES:
        assert name in cuda.__all__, name
        assert "from numba_vulkan import cuda" in diagnostics.cuda_hint(name)
    assert "from numba_vulkan import cuda" not in diagnostics.cuda_hint("this_grid")


def test_a_missing_cuda_name_is_a_compile_error_with_a_hint():
    def grid_sync(out):
        cuda.cg.this_grid().sync()
        out[0] = 1

    with pytest.raises(nv.CompilerError, match="numba.cuda's cg has no numba_vulkan "
                                               "equivalent"):
        cuda.jit(grid_sync).compile("void(int32[::1])")


@cuda.jit
def lanes(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = cuda.laneid
        out[i, 1] = cuda.warpsize


def test_laneid_and_warpsize_are_the_subgroups():
    out = np.full((64, 2), -1, np.int64)
    lanes[2, 32](out)
    size = cuda.get_current_device().info.subgroup_size
    assert (out[:, 1] == size).all()
    # Which invocations share a subgroup is the driver's choice; the lanes of
    # each workgroup of 32 are those of full subgroups (or of one partial).
    for group in out[:, 0].reshape(2, 32):
        np.testing.assert_array_equal(np.sort(group), np.sort(np.arange(32) % size))


def test_native_lane_id_and_subgroup_size():
    from numba_vulkan.cuda import warpsize

    @nv.jit
    def native(out):
        i = nv.global_id(0)
        if i < out.shape[0]:
            out[i] = nv.lane_id() * 1000 + nv.subgroup_size() + warpsize * 0

    out = np.zeros(16, np.int64)
    native[1, 16](out)
    size = cuda.get_current_device().info.subgroup_size
    assert (out % 1000 == size).all()
    np.testing.assert_array_equal(np.sort(out // 1000), np.sort(np.arange(16) % size))


def test_launches_on_a_stream_and_with_zero_shared_bytes():
    stream = cuda.stream()
    a = np.arange(20, dtype=np.float32)
    b = np.full(20, 0.5, np.float32)
    d_a = cuda.to_device(a, stream=stream)
    d_b = cuda.to_device(b, stream=stream)
    d_out = cuda.device_array(20, np.float32, stream=stream)
    with stream.auto_synchronize():
        vector_add[2, TPB, stream](d_a, d_b, d_out)
    np.testing.assert_array_equal(d_out.copy_to_host(stream=stream), a + b)
    out = cuda.mapped_array(20, np.float32)
    vector_add[2, TPB, cuda.default_stream(), 0](a, a, out)
    cuda.default_stream().synchronize()
    np.testing.assert_array_equal(out, 2 * a)
    with pytest.raises(TypeError, match="stream"):
        vector_add[2, TPB, "s"]


def test_pinned_arrays_are_host_arrays():
    with cuda.pinned():
        host = cuda.pinned_array((3, 2), dtype=np.int32)
    assert host.shape == (3, 2) and host.dtype == np.int32
    host[...] = 4
    np.testing.assert_array_equal(cuda.to_device(host).copy_to_host(), host)
    with pytest.raises(TypeError, match=r"pinned\(\*arrays\): each must be a NumPy array"):
        with cuda.pinned([1, 2]):
            pass
    with pytest.raises(nv.UnsupportedError, match="mapped_array: strides"):
        cuda.mapped_array(4, np.float32, strides=(8,))
    with pytest.raises(TypeError, match="a stream must be"):
        cuda.mapped_array(4, np.float32, stream="s")


def _forbid_copies(monkeypatch):
    from numba_vulkan.runtime import memory, transfer

    def copied(*args, **kwargs):
        raise AssertionError("a copy path was taken")
    for module, name in ((memory, "staged_host_array"), (transfer, "write"),
                         (transfer, "read"), (transfer, "host_copy"),
                         (memory.Buffer, "write"), (memory.Buffer, "read")):
        monkeypatch.setattr(module, name, copied)


def test_mapped_arrays_are_used_in_place(monkeypatch):
    a = cuda.mapped_array(40, np.float32)
    out = nv.mapped_array((2, 20), np.float32, order="F")  # the native name
    a[...] = np.random.default_rng(3).integers(-50, 50, 40)
    before = np.array(a)
    _forbid_copies(monkeypatch)
    vector_add[3, TPB](a, a, out.T.reshape(40))
    # A view of a mapped array is mapped too: a slice, written in place.
    vector_add[1, TPB](a[:10], a[10:20], a[30:])
    cuda.synchronize()
    monkeypatch.undo()
    np.testing.assert_array_equal(out.T.reshape(40), 2 * before)
    np.testing.assert_array_equal(a[30:], before[:10] + before[10:20])
    np.testing.assert_array_equal(a[:30], before[:30])
    assert isinstance(a[30:], nv.runtime.memory.HostArray)
    assert (a + 1).nv_buffer is None  # NumPy's results own other memory


def test_copy_to_host_into_pinned_memory_is_one_device_copy(monkeypatch):
    values = np.arange(24, dtype=np.int32).reshape(4, 6)
    d = cuda.to_device(values)
    pinned = cuda.pinned_array((4, 6), np.int32)
    # As on a discrete GPU, where the host cannot read device memory.
    monkeypatch.setattr(d.buffer, "readable", False)
    _forbid_copies(monkeypatch)
    stream = cuda.stream()
    assert d.copy_to_host(pinned, stream=stream) is pinned
    stream.synchronize()
    np.testing.assert_array_equal(pinned, values)
    pinned[...] = 0
    d[1:3].copy_to_host(pinned[1:3])  # no stream: done on return
    monkeypatch.undo()
    np.testing.assert_array_equal(pinned, np.where((np.arange(4) % 3 != 0)[:, None], values, 0))


def test_unknown_jit_options_are_type_errors():
    with pytest.raises(TypeError, match="max_threads"):
        cuda.jit(max_threads=3)


@cuda.jit
def add_index(m):
    x, y = cuda.grid(2)
    if x < m.shape[0] and y < m.shape[1]:
        m[x, y] += 10 * x + y


def test_reshape_ravel_transpose_and_view_share_memory():
    host = np.arange(24, dtype=np.float32)
    d = cuda.to_device(host)
    m = d.reshape(4, -1)
    assert m.shape == (4, 6)
    np.testing.assert_array_equal(m.copy_to_host(), host.reshape(4, 6))
    t = m.T
    assert t.shape == (6, 4) and t.strides == host.reshape(4, 6).T.strides
    np.testing.assert_array_equal(np.asarray(t), host.reshape(4, 6).T)
    # A kernel writing through the transposed view writes the shared memory.
    add_index[(2, 1), (4, 4)](t)
    expected = (host.reshape(4, 6).T + 10 * np.arange(6)[:, None]
                + np.arange(4)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(d.copy_to_host(), expected.T.ravel())
    np.testing.assert_array_equal(m.ravel().copy_to_host(), expected.T.ravel())
    bits = d.view(np.uint32)
    np.testing.assert_array_equal(bits.copy_to_host(), expected.T.ravel().view(np.uint32))
    halves = d[2:].view(np.uint16)
    np.testing.assert_array_equal(halves.copy_to_host(),
                                  expected.T.ravel()[2:].view(np.uint16))
    with pytest.raises(ValueError):
        d.reshape(5, 5)
    with pytest.raises(nv.UnsupportedError):
        t.ravel()


# cuda.random ---------------------------------------------------------------------

from numba_vulkan.cuda.random import (create_xoroshiro128p_states,  # noqa: E402
                                      xoroshiro128p_normal_float32,
                                      xoroshiro128p_uniform_float32,
                                      xoroshiro128p_uniform_float64)

DRAWS = 3


@cuda.jit
def draw(states, u32, u64, normal):
    i = cuda.grid(1)
    if i < u32.shape[0]:
        for k in range(DRAWS):
            u32[i, k] = xoroshiro128p_uniform_float32(states, i)
            u64[i, k] = xoroshiro128p_uniform_float64(states, i)
            normal[i, k] = xoroshiro128p_normal_float32(states, i)


def _numba_cuda_draws(n, seed):
    """The same draws from numba.cuda's own functions, run on the CPU."""
    random = pytest.importorskip("numba.cuda.random")
    states = np.zeros(n, random.xoroshiro128p_dtype)
    random.init_xoroshiro128p_states_cpu(states, seed, 0)
    out = [np.zeros((n, DRAWS), t) for t in (np.float32, np.float64, np.float32)]
    for i in range(n):
        for k in range(DRAWS):
            out[0][i, k] = random.xoroshiro128p_uniform_float32(states, i)
            out[1][i, k] = random.xoroshiro128p_uniform_float64(states, i)
            out[2][i, k] = random.xoroshiro128p_normal_float32(states, i)
    return states, out


def test_xoroshiro128p_gives_numba_cudas_sequences():
    n, seed = 20, 1234
    states = create_xoroshiro128p_states(n, seed)
    expected_states, expected = _numba_cuda_draws(n, seed)
    # Seeding is exact: the state of every generator after its jumps.
    seeded = states.copy_to_host()
    s0, s1 = _seeded(n, seed)
    np.testing.assert_array_equal(seeded[:, 0], s0)
    np.testing.assert_array_equal(seeded[:, 1], s1)
    u32 = np.zeros((n, DRAWS), np.float32)
    u64 = np.zeros((n, DRAWS), np.float64)
    normal = np.zeros((n, DRAWS), np.float32)
    draw.forall(n)(states, u32, u64, normal)
    # Uniform draws are integer arithmetic and one exact conversion: bit for bit.
    np.testing.assert_array_equal(u32, expected[0])
    np.testing.assert_array_equal(u64, expected[1])
    # Normal draws go through the device's log and cos.
    np.testing.assert_allclose(normal, expected[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(states.copy_to_host()[:, 0], expected_states["s0"])
    np.testing.assert_array_equal(states.copy_to_host()[:, 1], expected_states["s1"])


def _seeded(n, seed):
    random = pytest.importorskip("numba.cuda.random")
    states = np.zeros(n, random.xoroshiro128p_dtype)
    random.init_xoroshiro128p_states_cpu(states, seed, 0)
    return states["s0"], states["s1"]


@cuda.jit
def pi_hits(states, hits, samples):
    i = cuda.grid(1)
    if i < hits.shape[0]:
        inside = 0
        for _ in range(samples):
            x = xoroshiro128p_uniform_float32(states, i)
            y = xoroshiro128p_uniform_float32(states, i)
            if x * x + y * y <= np.float32(1.0):
                inside += 1
        hits[i] = inside


def test_monte_carlo_pi():
    n, samples = 64, 64
    states = create_xoroshiro128p_states(n, seed=7)
    hits = cuda.device_array(n, np.int64)
    pi_hits.forall(n)(states, hits, samples)
    estimate = 4.0 * hits.copy_to_host().sum() / (n * samples)
    assert abs(estimate - math.pi) < 0.1


@cuda.jit
def wrapping_atomics(counters, old):
    i = cuda.grid(1)
    if i < old.shape[0]:
        old[i, 0] = cuda.atomic.inc(counters, 0, np.uint32(4))
        old[i, 1] = cuda.atomic.dec(counters, 1, np.uint32(4))


def test_atomic_inc_and_dec_wrap_as_numba_cudas():
    n = 11
    counters = np.array([0, 2], np.uint32)
    old = np.zeros((n, 2), np.uint32)
    wrapping_atomics.forall(n)(counters, old)
    # inc: 0, 1, 2, 3, 4, then back to 0; dec: 2, 1, 0, then 4, 3, ... 0, 4.
    inc_seq = [k % 5 for k in range(n)]
    dec_seq = [(2 - k) % 5 for k in range(n)]
    assert sorted(old[:, 0]) == sorted(inc_seq) and counters[0] == n % 5
    assert sorted(old[:, 1]) == sorted(dec_seq) and counters[1] == (2 - n) % 5


@cuda.jit
def nan_extremes(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.nanmin(out, 0, x[i])
        cuda.atomic.nanmax(out, 1, x[i])
        cuda.atomic.max(out, 2, x[i])


def test_atomic_nanmin_and_nanmax_ignore_nan():
    x = RNG.random(30)
    x[[3, 17]] = np.nan
    out = np.array([np.nan, np.nan, 0.0])
    nan_extremes.forall(x.size)(x, out)
    assert out[0] == np.nanmin(x) and out[1] == np.nanmax(x)
    ints = np.array([5, -3, 9], np.int64)
    int_out = np.array([0, 0, 0], np.int64)
    nan_extremes.forall(3)(ints, int_out)
    assert list(int_out) == [-3, 9, 9]


def test_events_time_a_kernel():
    start, end = cuda.event(), cuda.event(timing=True)
    x = cuda.to_device(np.ones(64, np.float32))
    out = cuda.device_array_like(x)
    start.record()
    vector_add.forall(64, tpb=32)(x, x, out)
    end.record()
    end.synchronize()
    assert end.query()
    elapsed = cuda.event_elapsed_time(start, end)
    assert 0 <= elapsed == start.elapsed_time(end)
    np.testing.assert_array_equal(out.copy_to_host(), 2)
    with pytest.raises(nv.LaunchError, match="not recorded"):
        cuda.event().elapsed_time(end)
    with pytest.raises(nv.LaunchError, match="timing=False"):
        untimed = cuda.event(timing=False)
        untimed.record()
        start.elapsed_time(untimed)


def test_inspect_llvm_and_asm():
    sig = "void(float32[::1], float32[::1])"
    assert "define" in clamped.inspect_llvm(sig)
    assert "OpEntryPoint GLCompute" in clamped.inspect_asm(sig)
    asm = clamped.inspect_asm()
    assert len(asm) == len(clamped.overloads) >= 1
    assert all("OpEntryPoint" in text for text in asm.values())


@cuda.jit
def vote(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0
    count = cuda.syncthreads_count(v > 5)
    every = cuda.syncthreads_and(v > 0)
    some = cuda.syncthreads_or(v > 8)
    # A second count in the same kernel starts afresh.
    again = cuda.syncthreads_count(v % 2 == 1)
    if i < x.size:
        out[i, 0] = count
        out[i, 1] = every
        out[i, 2] = some
        out[i, 3] = again


def test_counting_barriers():
    x = RNG.integers(0, 10, 3 * TPB).astype(np.int32)
    x[TPB:2 * TPB] = np.clip(x[TPB:2 * TPB], 1, 8)
    out = np.full((x.size, 4), -1, np.int64)
    vote[3, TPB](x, out)
    for b in range(3):
        block = x[b * TPB:(b + 1) * TPB]
        expected = [(block > 5).sum(), (block > 0).all(), (block > 8).any(),
                    (block % 2 == 1).sum()]
        np.testing.assert_array_equal(out[b * TPB:(b + 1) * TPB],
                                      np.tile(np.array(expected, np.int64), (TPB, 1)))


@cuda.jit
def last_block_sum(x, partial, ticket, total):
    # The classic threadfence pattern: each block publishes its sum, fences,
    # takes a ticket; the block with the last ticket sums every block's.
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    tile = cuda.shared.array(TPB, cuda.int64)
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    last = cuda.shared.array(1, cuda.int32)
    if t == 0:
        s = 0
        for k in range(TPB):
            s += tile[k]
        partial[b] = s
        cuda.threadfence()
        last[0] = cuda.atomic.inc(ticket, 0, np.uint32(cuda.gridDim.x - 1)) == cuda.gridDim.x - 1
    cuda.threadfence_block()
    cuda.syncthreads()
    if last[0] and t == 0:
        s = 0
        for k in range(cuda.gridDim.x):
            s += partial[k]
        total[0] = s


def test_threadfence_publishes_before_a_ticket():
    x = RNG.integers(0, 100, 5 * TPB - 3).astype(np.int64)
    blocks = math.ceil(x.size / TPB)
    partial = np.zeros(blocks, np.int64)
    ticket = np.zeros(1, np.uint32)
    total = np.zeros(1, np.int64)
    last_block_sum[blocks, TPB](x, partial, ticket, total)
    assert total[0] == x.sum()
    # inc wrapped the ticket back to 0 for the next launch.
    assert ticket[0] == 0
    # One fence each, with the storage classes Vulkan needs (spirv-val checks).
    fence_kernel = next(iter(last_block_sum.overloads.values())).disassemble()
    assert fence_kernel.count("OpMemoryBarrier") == 2


def test_gpus_select_a_device_inside_a_block():
    assert len(cuda.gpus) == len(nv.list_devices()) >= 1
    current = cuda.get_current_device()
    last = cuda.gpus[len(cuda.gpus) - 1]
    with last as device:
        assert device.info.index == last.id and cuda.get_current_device() is device
        d = cuda.to_device(np.arange(4))
        np.testing.assert_array_equal(d.copy_to_host(), np.arange(4))
    assert cuda.get_current_device() is current and cuda.gpus.current is current
    assert [g.id for g in cuda.gpus] == [info.index for info in nv.list_devices()]
    cuda.close()
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(4))


@cuda.jit
def named_dtypes(out):
    i = cuda.grid(1)
    scratch = cuda.local.array(shape=(2, 3), dtype="int32")
    tile = cuda.shared.array(shape=4, dtype="float64")
    scratch[1, 2] = i * 3
    tile[cuda.threadIdx.x] = 0.5 * i
    cuda.syncthreads()
    if i < out.shape[0]:
        out[i] = scratch[1, 2] + tile[cuda.threadIdx.x]


def test_array_dtypes_by_name():
    out = np.zeros(8)
    named_dtypes[2, 4](out)
    np.testing.assert_array_equal(out, 3.5 * np.arange(8))


# Dynamic shared memory ---------------------------------------------------

@cuda.jit
def dynamic_block_sums(x, out):
    buf = cuda.shared.array(0, cuda.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@nv.jit
def native_dynamic_reverse(x, out):
    tile = nv.shared.array(0, "int32")
    t = nv.local_id(0)
    i = nv.global_id(0)
    tile[t] = x[i]
    nv.barrier()
    out[i] = tile[nv.local_size(0) - 1 - t] + len(tile) * 1000


def test_dynamic_shared_memory_block_reduction():
    x = (np.random.default_rng(12).integers(0, 8, 256)).astype(np.float32)
    out = np.zeros(4, np.float32)
    dynamic_block_sums[4, 64, 0, 64 * 4](x, out)
    # Small integers: every order of summation gives the same float32.
    np.testing.assert_array_equal(out, x.reshape(4, 64).sum(axis=1))
    out[:] = 0
    dynamic_block_sums.forall(256, tpb=64, sharedmem=64 * 4)(x, out)
    np.testing.assert_array_equal(out, x.reshape(4, 64).sum(axis=1))
    assert len(dynamic_block_sums.overloads) == 1  # one variant, reused
    v = np.arange(64, dtype=np.int32)
    got = np.zeros(64, np.int32)
    native_dynamic_reverse[2, 32, 32 * 4](v, got)
    np.testing.assert_array_equal(got, v.reshape(2, 32)[:, ::-1].ravel() + 32 * 1000)
    for kernel in (dynamic_block_sums, native_dynamic_reverse):
        for compiled in compiled_kernels(kernel):
            assert_valid_spirv(compiled)


@cuda.jit(device=True)
def dynamic_word(i):
    return cuda.shared.array(0, cuda.int32)[i]


@cuda.jit
def aliased_views(values, bits, lengths):
    f32 = cuda.shared.array(0, cuda.float32)
    i32 = cuda.shared.array(0, cuda.int32)
    t = cuda.threadIdx.x
    f32[t] = values[t]
    cuda.syncthreads()
    # numba.cuda: every shared.array(0, ...) starts at the same byte.
    bits[t] = i32[t]
    # Separate arrays are slices of one view.
    second = f32[cuda.blockDim.x:]
    second[t] = values[t] * 2
    cuda.syncthreads()
    if t == 0:
        lengths[0] = len(f32)
        lengths[1] = len(second)
        # A device function's shared.array(0, ...) is the kernel's too.
        lengths[2] = dynamic_word(cuda.blockDim.x + 1)


def test_dynamic_shared_arrays_alias_one_block():
    values = np.random.default_rng(5).standard_normal(16).astype(np.float32)
    bits = np.zeros(16, np.int32)
    lengths = np.zeros(3, np.int32)
    aliased_views[1, 16, 0, 40 * 4](values, bits, lengths)
    np.testing.assert_array_equal(bits, values.view(np.int32))
    np.testing.assert_array_equal(lengths, [40, 24, (values[1] * 2).view(np.int32)])
    for compiled in compiled_kernels(aliased_views):
        assert_valid_spirv(compiled)


def test_dynamic_shared_memory_errors_name_the_parameter():
    with pytest.raises(ValueError, match="shared_bytes must not be negative"):
        dynamic_block_sums[1, 64, 0, -4]
    with pytest.raises(TypeError, match="shared_bytes must be an int.*2.5"):
        dynamic_block_sums[1, 64, 0, 2.5]
    with pytest.raises(TypeError, match="sharedmem must be an int"):
        dynamic_block_sums.forall(64, sharedmem="4")
    with pytest.raises(ValueError, match="shared_bytes must not be negative"):
        native_dynamic_reverse[1, 32, -1]


def test_shared_memory_beyond_the_device_is_a_launch_error():
    limit = cuda.get_current_device().info.max_shared_memory
    x = np.zeros(64, np.float32)
    with pytest.raises(nv.LaunchError, match=rf"kernel dynamic_block_sums needs 0 bytes of "
                       rf"static shared memory and {limit + 4} of dynamic.*has {limit} "
                       r"\(maxComputeSharedMemorySize\)"):
        dynamic_block_sums[1, 64, 0, limit + 4](x, np.zeros(1, np.float32))


@cuda.jit
def mixed_item_sizes(out):
    a = cuda.shared.array(0, cuda.float32)
    b = cuda.shared.array(0, cuda.float64)
    out[0] = a[0] + b[0]


def test_dynamic_shared_views_of_two_item_sizes_are_refused():
    with pytest.raises(nv.UnsupportedError, match="elements of one size"):
        mixed_item_sizes[1, 1, 0, 64](np.zeros(1, np.float64))


def test_device_attributes_of_numba_cuda_read_the_devices_limits():
    device = cuda.get_current_device()
    info = device.info
    assert device.MAX_THREADS_PER_BLOCK == info.max_workgroup_invocations
    assert (device.MAX_BLOCK_DIM_X, device.MAX_BLOCK_DIM_Y, device.MAX_BLOCK_DIM_Z) == \
        info.max_workgroup_size
    assert (device.MAX_GRID_DIM_X, device.MAX_GRID_DIM_Y, device.MAX_GRID_DIM_Z) == \
        info.max_workgroup_count
    assert device.MAX_SHARED_MEMORY_PER_BLOCK == info.max_shared_memory
    assert device.WARP_SIZE == info.subgroup_size
    assert device.MULTIPROCESSOR_COUNT == (info.compute_units or 16) > 0
    assert cuda.gpus[0].WARP_SIZE == device.WARP_SIZE
    with pytest.raises(AttributeError, match="no attribute 'MAX_WARPS'"):
        device.MAX_WARPS


def test_memory_info_counts_the_arrays_held():
    import gc
    context = cuda.current_context()
    # Arrays earlier tests left to the collector are freed now, not in the middle.
    gc.collect()
    free, total = context.get_memory_info()
    assert 0 < free <= total
    big = cuda.device_array(16 << 20, np.float32)
    held, total_after = context.get_memory_info()
    assert total_after == total
    if "VK_EXT_memory_budget" not in cuda.get_current_device().extensions_offered:
        # Without the driver's budget, free is what numba_vulkan does not hold.
        assert free - held >= 64 << 20
        del big
        gc.collect()
        assert context.get_memory_info().free - held >= 64 << 20
    with cuda.defer_cleanup():
        pass


def test_device_arrays_are_cuda_arrays_and_other_memory_is_refused():
    d = cuda.to_device(np.arange(4))
    assert cuda.is_cuda_array(d) and not cuda.is_cuda_array(np.arange(4))
    assert cuda.as_cuda_array(d) is d
    with pytest.raises(TypeError, match="cannot be used from Vulkan: pass a NumPy array"):
        cuda.as_cuda_array(np.arange(4))


@cuda.jit
def _intrinsic_math(x, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i, 0] = cuda.fma(x[i], x[i], -c[i])
        out[i, 1] = cuda.cbrt(c[i])
        out[i, 2] = cuda.selp(x[i] > c[i], x[i], c[i])


def test_fma_rounds_once_and_cbrt_and_selp_compute_as_numba_cudas():
    # (1 + 2**-12)**2 - (1 + 2**-11) is 2**-24 rounded once, 0 rounded twice:
    # fma rounds once on every device (emulated where the device's does not).
    x = np.array([1 + 2.0 ** -12, 3, 0.5], np.float32)
    c = np.array([1 + 2.0 ** -11, 8, 27], np.float32)
    out = np.zeros((3, 3), np.float32)
    _intrinsic_math.forall(3)(x, c, out)
    np.testing.assert_array_equal(out[:, 0], [2.0 ** -24, 1, -26.75])
    np.testing.assert_allclose(out[:, 1], np.cbrt(c), rtol=1e-6)
    np.testing.assert_array_equal(out[:, 2], np.maximum(x, c))


@cuda.jit
def _libdevice_calls(out, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = libdevice.expf(x[i])
        out[i, 1] = libdevice.rsqrtf(x[i])
        out[i, 2] = libdevice.fminf(x[i], y[i])
        out[i, 3] = libdevice.roundf(x[i])
        out[i, 4] = libdevice.floorf(x[i])
        out[i, 5] = libdevice.fast_fdividef(x[i], y[i])
        out[i, 6] = libdevice.fmaf(x[i], y[i], x[i])
        out[i, 7] = libdevice.isnanf(y[i])
        out[i, 8] = cuda.libdevice.fmax(np.float64(x[i]), 1.0)


def test_libdevice_functions_compute_as_numba_cudas():
    x = np.array([0.5, 2.5, -2.5, 0.49999997], np.float32)
    y = np.array([1.0, np.nan, 3.0, -1.0], np.float32)
    out = np.zeros((4, 9), np.float32)
    _libdevice_calls.forall(4)(out, x, y)
    np.testing.assert_allclose(out[:, 0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(out[:, 1], 1 / np.sqrt(np.abs(x)) * np.where(x < 0, np.nan, 1),
                               rtol=1e-6)
    np.testing.assert_array_equal(out[:, 2], np.fmin(x, y))
    np.testing.assert_array_equal(out[:, 3], [1, 3, -3, 0])        # ties away from zero
    np.testing.assert_array_equal(out[:, 4], np.floor(x))
    np.testing.assert_allclose(out[:, 5], x / y, rtol=1e-6)
    np.testing.assert_array_equal(out[:, 6], [1, np.nan, -10, 0])
    np.testing.assert_array_equal(out[:, 7], np.isnan(y))
    np.testing.assert_array_equal(out[:, 8], np.fmax(x, 1))


def test_list_devices_and_profiler_brackets():
    assert cuda.list_devices() is cuda.gpus and len(cuda.list_devices()) >= 1
    out = cuda.device_array(16, np.float32)
    ones = cuda.to_device(np.ones(16, np.float32))
    cuda.profile_start()
    with cuda.profiling():
        vector_add.forall(16)(ones, ones, out)
    cuda.profile_stop()
    np.testing.assert_array_equal(out.copy_to_host(), 2)


@cuda.jit(debug=True, opt=False)
def _raises_when_negative(a):
    i = cuda.grid(1)
    if i < a.size:
        if a[i] < 0:
            raise ValueError("negative")
        a[i] = 1


def test_debug_true_reports_a_raise_on_the_host():
    # As numba.cuda with debug=True: the exception reaches the host after
    # the launch, and the other invocations finish.
    a = np.array([2.0, -1.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="negative"):
        _raises_when_negative[1, 4](a)
    np.testing.assert_array_equal(a, [1.0, -1.0, 1.0, 1.0])


def test_a_device_function_called_from_the_host_says_what_it_is():
    with pytest.raises(nv.LaunchError, match="clamp is a device function "
                                             r"\(cuda.jit\(device=True\)\): call it from a kernel"):
        clamp(1.0, 0.0, 2.0)
