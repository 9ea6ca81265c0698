// The tiled matrix product of benchmarks/suite.py (MATMUL), hand-written in
// GLSL, to tell which of its SPIR-V's traits costs time on a driver.
//
// It follows numba_vulkan's binding interface (numba_vulkan/abi.py), so the
// runtime binds and fills it as it does the compiled kernel: arrays a, b, c
// at bindings 0, 1, 2; a 16-byte header (workgroup counts), then each
// array's shape, element strides and element offset in the push constants.
//
// benchmarks/bench_glsl.py compiles one .spv per set of these macros:
//   PRECISE         no contraction of a * b + acc (numba_vulkan's default;
//                   without it the driver may fuse, as NVVM does)
//   VEC4            ta is a tile of vec4: a row of ta is read as four
//                   128-bit shared loads instead of sixteen 32-bit ones
//   I64             the tile counter and the k < n tests in 64 bits, as
//                   Numba's intp makes them in our kernel
//   BUFFER_BARRIER  the barrier also orders storage buffer memory
//                   (semantics 0x148, our kernel's) instead of barrier()'s
//                   workgroup memory only (0x108)
//   BASE            each invocation's element offsets in a and b computed
//                   once and stepped per tile, instead of from row, k and
//                   the strides each tile
//   READONLY        a and b declared readonly restrict (NonWritable,
//                   Restrict), which our kernel's arrays are not
//   FLAT            ta and tb as flat arrays of 256 floats indexed as our
//                   module indexes them: ta at (ty << 4) | j, tb at
//                   tx + 16 * j, instead of ta[ty][j] and tb[j][tx]
//                   (not with VEC4)
#version 460
#extension GL_EXT_control_flow_attributes : require
#ifdef I64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define INDEX int64_t
#else
#define INDEX int
#endif
#ifdef BUFFER_BARRIER
#extension GL_KHR_memory_scope_semantics : require
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

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

struct Array2 {
    int rows, cols, stride0, stride1, offset;
};

layout(push_constant) uniform Push {
    uvec3 groups;
    uint pad;
    Array2 a, b, c;
} p;

layout(set = 0, binding = 0) INPUT buffer BufferA { float a[]; };
layout(set = 0, binding = 1) INPUT buffer BufferB { float b[]; };
layout(set = 0, binding = 2) buffer BufferC { float c[]; };

#if defined(VEC4)
shared vec4 ta[16][4];
#elif defined(FLAT)
shared float ta[256];
#else
shared float ta[16][16];
#endif
#ifdef FLAT
shared float tb[256];
#define TA(i, j) ta[((i) << 4) | (j)]
#define TB(i, j) tb[(j) + 16 * (i)]
#else
shared float tb[16][16];
#define TA(i, j) ta[i][j]
#define TB(i, j) tb[i][j]
#endif

// A macro, not a function: the module then has one function, as ours has.
#ifdef BUFFER_BARRIER
#define SYNC() controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, \
                              gl_StorageSemanticsShared | gl_StorageSemanticsBuffer, \
                              gl_SemanticsAcquireRelease)
#else
#define SYNC() barrier()
#endif

void main() {
    int tx = int(gl_LocalInvocationID.x);
    int ty = int(gl_LocalInvocationID.y);
    int col = int(gl_GlobalInvocationID.x);
    int row = int(gl_GlobalInvocationID.y);
    int n = p.a.cols;
    ACC acc = 0.0;
#ifdef BASE
    int ia = p.a.offset + row * p.a.stride0 + tx * p.a.stride1;
    int ib = p.b.offset + ty * p.b.stride0 + col * p.b.stride1;
    int step_a = 16 * p.a.stride1;
    int step_b = 16 * p.b.stride0;
#endif
    INDEX tiles = (INDEX(n) + 15) / 16;
    for (INDEX tile = 0; tile < tiles; ++tile) {
        INDEX k = tile * 16 + tx;
        float va = 0.0;
        if (row < p.a.rows && k < n) {
#ifdef BASE
            va = a[ia];
#else
            va = a[p.a.offset + row * p.a.stride0 + int(k) * p.a.stride1];
#endif
        }
#ifdef VEC4
        ta[ty][tx >> 2][tx & 3] = va;
#else
        TA(ty, tx) = va;
#endif
        k = tile * 16 + ty;
        float vb = 0.0;
        if (col < p.b.cols && k < n) {
#ifdef BASE
            vb = b[ib];
#else
            vb = b[p.b.offset + int(k) * p.b.stride0 + col * p.b.stride1];
#endif
        }
        TB(ty, tx) = vb;
#ifdef BASE
        ia += step_a;
        ib += step_b;
#endif
        SYNC();
#ifdef VEC4
        [[unroll]] for (int j = 0; j < 4; ++j) {
            vec4 v = ta[ty][j];
            acc += v.x * TB(4 * j, tx);
            acc += v.y * TB(4 * j + 1, tx);
            acc += v.z * TB(4 * j + 2, tx);
            acc += v.w * TB(4 * j + 3, tx);
        }
#else
        [[unroll]] for (int j = 0; j < 16; ++j) {
            acc += TA(ty, j) * TB(j, tx);
        }
#endif
        SYNC();
    }
    if (row < p.c.rows && col < p.c.cols) {
        c[p.c.offset + row * p.c.stride0 + col * p.c.stride1] = acc;
    }
}
