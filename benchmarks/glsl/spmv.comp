// The sparse matrix-vector product of benchmarks/suite.py (SPMV: CSR, one
// row per invocation), hand-written in GLSL, to tell which of its SPIR-V's
// traits costs time on a driver, or whether none does.
//
// It follows numba_vulkan's binding interface (numba_vulkan/abi.py), so the
// runtime binds and fills it as it does the compiled kernel: indptr,
// indices, data, x, y at bindings 0-4; a 16-byte header (workgroup counts),
// then each array's shape, element stride and element offset in the push
// constants. Every variant adds the element offsets, as the interface
// requires; the arrays are contiguous, so strides are not read (nor are
// they in our module).
//
// benchmarks/bench_glsl.py compiles one .spv per set of these macros; with
// none, it is the loop as one would write it in GLSL (int indices, no
// wraparound, the loop left to the driver to unroll):
//   PRECISE      no contraction of data * x + acc (numba_vulkan's default)
//   WRAP         Numba's negative-index wraparound: k + offset, plus the
//                array's shape where k < 0, for data[k], indices[k] and
//                x[indices[k]], as our module selects it
//   I64          the row < len(y) test in 64 bits (sign-extended shape,
//                zero-extended row), as our module makes it
//   GUARD        a never-taken path around each loop on the number of
//                workgroups along x (the structurizer's lavapipe guard,
//                which our GPU module has too)
//   UNROLL_OURS  the loop as our module has it: the n % 4 remainder first,
//                then a loop of four steps in program order, counting down
//                the nonzeros left
//   UNROLL4      a loop of four steps that loads the four indices and data
//                first, then the four x, then accumulates; the remainder
//                after
//   NO_UNROLL    the plain loop marked [[dont_unroll]]
//   VEC4         indices and data read four at a time, as one 128-bit load
//                each, from the first k that is a multiple of 4 (one by
//                one before it and after the last whole four, and for the
//                whole row where their offsets are not multiples of 4)
//   UINT         every index and offset unsigned: indptr and indices read
//                as uint, uint loop counters and address arithmetic
//   READONLY     indptr, indices, data and x declared readonly restrict
//                (NonWritable, Restrict), which our kernel's arrays are not
// GLSL indexes arrays with 32-bit integers only, so numba-cuda's 64-bit
// address arithmetic has no counterpart here; our module's is 32-bit too
// (its only 64-bit operations are the row < len(y) test of I64).
#version 460
#extension GL_EXT_control_flow_attributes : require
#ifdef I64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#ifdef PRECISE
#define ACC precise float
#else
#define ACC float
#endif
#ifdef READONLY
#define INPUT readonly restrict
#else
#define INPUT
#endif
#ifdef UINT
#define INT uint
#else
#define INT int
#endif

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

struct Array1 {
    int n, stride, offset;
};

layout(push_constant) uniform Push {
    uvec3 groups;
    uint pad;
    Array1 indptr, indices, data, x, y;
} p;

layout(set = 0, binding = 0) INPUT buffer BufferIndptr { INT indptr[]; };
layout(set = 0, binding = 1) INPUT buffer BufferIndices { INT indices[]; };
layout(set = 0, binding = 2) INPUT buffer BufferData { float data[]; };
layout(set = 0, binding = 3) INPUT buffer BufferX { float x[]; };
layout(set = 0, binding = 4) buffer BufferY { float y[]; };
#ifdef VEC4
// The same buffers seen as vectors (aliases of the bindings above).
#ifdef UINT
#define INT4 uvec4
#else
#define INT4 ivec4
#endif
layout(set = 0, binding = 1) INPUT buffer BufferIndices4 { INT4 indices4[]; };
layout(set = 0, binding = 2) INPUT buffer BufferData4 { vec4 data4[]; };
#endif

// The element index of k in array A. Macros, not functions: the module
// then has one function, as ours has.
#if defined(UINT)
#define AT(A, k) ((k) + uint(p.A.offset))
#elif defined(WRAP)
// mix() with a bool selector is OpSelect, as in our module; glslang makes
// a ?: into branches.
#define AT(A, k) ((k) + p.A.offset + mix(0, p.A.n, (k) < 0))
#else
#define AT(A, k) ((k) + p.A.offset)
#endif

#define STEP(k) acc += data[AT(data, k)] * x[AT(x, indices[AT(indices, k)])]

#ifdef GUARD
#define GUARDED(loop) if (p.groups.x == 0u) { acc = 0.0; } else { loop }
#else
#define GUARDED(loop) { loop }
#endif

void main() {
    INT row = INT(gl_GlobalInvocationID.x);
#ifdef I64
    if (int64_t(p.y.n) > int64_t(uint64_t(gl_GlobalInvocationID.x))) {
#else
    if (row < INT(p.y.n)) {
#endif
        INT start = indptr[AT(indptr, row)];
        INT end = indptr[AT(indptr, row + 1)];
        ACC acc = 0.0;
#if defined(UNROLL_OURS)
        INT n = end - start;
        if (n >= 1) {
            INT k = start;
            INT rem = n & 3;
            if (rem != 0) {
                GUARDED(
                    [[dont_unroll]] for (INT i = 0; i < rem; ++i) {
                        STEP(k);
                        ++k;
                    })
            }
            // n >= 4, as our module tests it: start - end <= -4, unsigned.
            if (uint(start - end) <= 0xFFFFFFFCu) {
                GUARDED(
                    INT left = n - rem;
                    [[dont_unroll]] while (true) {
                        STEP(k);
                        STEP(k + 1);
                        STEP(k + 2);
                        STEP(k + 3);
                        k += 4;
                        if (!(left > 4)) {
                            break;
                        }
                        left -= 4;
                    })
            }
        }
#elif defined(UNROLL4)
        INT k = start;
        GUARDED(
            [[dont_unroll]] for (; k + 4 <= end; k += 4) {
                INT j0 = indices[AT(indices, k)];
                INT j1 = indices[AT(indices, k + 1)];
                INT j2 = indices[AT(indices, k + 2)];
                INT j3 = indices[AT(indices, k + 3)];
                float d0 = data[AT(data, k)];
                float d1 = data[AT(data, k + 1)];
                float d2 = data[AT(data, k + 2)];
                float d3 = data[AT(data, k + 3)];
                float x0 = x[AT(x, j0)];
                float x1 = x[AT(x, j1)];
                float x2 = x[AT(x, j2)];
                float x3 = x[AT(x, j3)];
                acc += d0 * x0;
                acc += d1 * x1;
                acc += d2 * x2;
                acc += d3 * x3;
            })
        GUARDED(
            [[dont_unroll]] for (; k < end; ++k) {
                STEP(k);
            })
#elif defined(VEC4)
        INT k = start;
        if (((p.indices.offset | p.data.offset) & 3) == 0) {
            GUARDED(
                [[dont_unroll]] for (; k < end && (k & 3) != 0; ++k) {
                    STEP(k);
                })
            GUARDED(
                [[dont_unroll]] for (; k + 4 <= end; k += 4) {
                    INT4 j = indices4[AT(indices, k) >> 2];
                    vec4 d = data4[AT(data, k) >> 2];
                    acc += d.x * x[AT(x, j.x)];
                    acc += d.y * x[AT(x, j.y)];
                    acc += d.z * x[AT(x, j.z)];
                    acc += d.w * x[AT(x, j.w)];
                })
        }
        GUARDED(
            [[dont_unroll]] for (; k < end; ++k) {
                STEP(k);
            })
#elif defined(NO_UNROLL)
        GUARDED(
            [[dont_unroll]] for (INT k = start; k < end; ++k) {
                STEP(k);
            })
#else
        GUARDED(
            for (INT k = start; k < end; ++k) {
                STEP(k);
            })
#endif
        y[AT(y, row)] = acc;
    }
}
