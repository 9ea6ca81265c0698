"""Accesses through a pointer that may point into one of several arrays: an
element of one of two arguments chosen per thread (LLVM merges the two
loads into one load through a select or phi of the two pointers), an array
argument chosen at run time, stores in the two arms of an `if`, and choices
between buffer, workgroup and private arrays in a loop. Vulkan cannot choose
between buffers through a pointer; the compiler reads each candidate and
selects the value, or branches to the store."""

import numpy as np

import numba_vulkan as nv

N = 16
X = np.arange(N, dtype=np.float32) * 0.5 - 3.0
FLAGS = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1], np.int32)


@nv.jit
def element_of_either(out, x, y, c):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] if c[i] > 0 else y[N - 1 - i]


@nv.jit
def either_array(out, x, y, c):
    i = nv.global_id(0)
    a = x if c > 0 else y
    if i < out.shape[0]:
        out[i] = a[i]


@nv.jit
def store_in_either_arm(x, y, c, v):
    i = nv.global_id(0)
    if c[i] > 0:
        x[i] = v[i]
    else:
        y[i] = v[i] * 2


@nv.jit
def update_chosen_array(x, y, c):
    i = nv.global_id(0)
    a = x if c[i] > 0 else y
    a[i] = i
    a[i] += 1


@nv.jit
def mixed_kinds(out, x, c):
    i = nv.global_id(0)
    sm = nv.shared.array(N, np.int32)
    loc = nv.local.array(4, np.int32)
    for k in range(4):
        loc[k] = k * 10 + i
    sm[i] = i * 100
    nv.barrier()
    s = 0
    for k in range(4):
        s += loc[k] if c[i] > k else sm[(i + k) % N]
        s += x[k] if c[i] == k else loc[(i + k) % 4]
    out[i] = s


def test_element_of_either_argument():
    out = np.zeros(N, np.float32)
    element_of_either[1, N](out, X, X * 7, FLAGS)
    np.testing.assert_array_equal(out, np.where(FLAGS > 0, X, (X * 7)[::-1]))


def test_array_argument_chosen_at_run_time():
    out = np.zeros(N, np.float32)
    for c, expected in ((1, X), (0, -X)):
        either_array[1, N](out, X, -X, c)
        np.testing.assert_array_equal(out, expected)


def test_stores_to_either_argument():
    x, y = np.full(N, -1, np.float32), np.full(N, -1, np.float32)
    v = np.arange(N, dtype=np.float32)
    store_in_either_arm[1, N](x, y, FLAGS, v)
    np.testing.assert_array_equal(x, np.where(FLAGS > 0, v, -1))
    np.testing.assert_array_equal(y, np.where(FLAGS > 0, -1, 2 * v))
    update_chosen_array[1, N](x, y, FLAGS)
    i = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(x, np.where(FLAGS > 0, i + 1, -1))
    np.testing.assert_array_equal(y, np.where(FLAGS > 0, -1, i + 1))


def test_buffer_workgroup_and_private_arrays_chosen_in_a_loop():
    c = np.array([0, 1, 2, 3, 4, 1, 2, 3] * 2, np.int32)
    x = np.arange(N, dtype=np.int32) + 1000
    out = np.zeros(N, np.int32)
    mixed_kinds[1, N](out, x, c)
    expected = []
    for i in range(N):
        loc, s = [k * 10 + i for k in range(4)], 0
        for k in range(4):
            s += loc[k] if c[i] > k else ((i + k) % N) * 100
            s += x[k] if c[i] == k else loc[(i + k) % 4]
        expected.append(s)
    np.testing.assert_array_equal(out, expected)
