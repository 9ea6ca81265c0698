// benchmarks/suite.py's SAXPY (y = a * x + y, float32), hand-written in
// GLSL, to tell whether one element per invocation can reach the copy
// bandwidth on a driver, or only several elements per invocation can.
//
// It follows numba_vulkan's binding interface (numba_vulkan/abi.py), so the
// runtime binds and fills it as it does the compiled kernel: x and y at
// bindings 0 and 1; the push constants hold a 16-byte header (workgroup
// counts), then the scalar a, then each array's shape, element stride and
// element offset. Every variant adds the element offsets; the arrays are
// contiguous, so strides are not read (nor are they in our module).
//
// benchmarks/bench_glsl.py compiles one .spv per set of these macros and
// launches ELEMENTS = VEC * X elements per invocation; with none, one
// element per invocation, as our kernel does. a * x + y is never
// contracted, as numba_vulkan's default is:
//   I64       the i < len(x) test in 64 bits (sign-extended shape,
//             zero-extended index), as our module makes it
//   READONLY  x declared readonly restrict, y restrict
//   VEC=v     v (2 or 4) consecutive elements per invocation, read and
//             written as one vec2 or vec4 (where both arrays' offsets are
//             multiples of v and all v are in the array; else one by one)
//   X=m       m such loads per invocation, m apart by the group size (so
//             that each load of a subgroup is still contiguous)
#version 460
#extension GL_EXT_control_flow_attributes : require
#ifdef I64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#ifdef READONLY
#define INPUT readonly restrict
#define OUTPUT restrict
#else
#define INPUT
#define OUTPUT
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef X
#define X 1
#endif
#if VEC == 4
#define VTYPE vec4
#elif VEC == 2
#define VTYPE vec2
#else
#define VTYPE float
#endif

const uint GROUP = 256;

layout(local_size_x = GROUP, local_size_y = 1, local_size_z = 1) in;

struct Array1 {
    int n, stride, offset;
};

layout(push_constant) uniform Push {
    uvec3 groups;
    uint pad;
    float a;
    Array1 x, y;
} p;

layout(set = 0, binding = 0) INPUT buffer BufferX { float x[]; };
layout(set = 0, binding = 1) OUTPUT buffer BufferY { float y[]; };
#if VEC > 1
// The same buffers seen as vectors (aliases of the bindings above).
layout(set = 0, binding = 0) INPUT buffer BufferXV { VTYPE xv[]; };
layout(set = 0, binding = 1) OUTPUT buffer BufferYV { VTYPE yv[]; };
#endif

void main() {
    // The first of this invocation's elements of its first load.
    uint first = (gl_WorkGroupID.x * (GROUP * X) + gl_LocalInvocationID.x) * VEC;
    [[unroll]] for (uint m = 0; m < X; ++m) {
        uint i = first + m * GROUP * VEC;
#if VEC > 1
        if (i + VEC <= uint(p.x.n) && ((p.x.offset | p.y.offset) & (VEC - 1)) == 0) {
            uint vx = (i + uint(p.x.offset)) / VEC;
            uint vy = (i + uint(p.y.offset)) / VEC;
            precise VTYPE r = p.a * xv[vx] + yv[vy];
            yv[vy] = r;
            continue;
        }
        [[unroll]] for (uint j = 0; j < VEC; ++j, ++i) {
#endif
#ifdef I64
            if (int64_t(p.x.n) > int64_t(uint64_t(i))) {
#else
            if (i < uint(p.x.n)) {
#endif
                precise float r = p.a * x[i + uint(p.x.offset)] + y[i + uint(p.y.offset)];
                y[i + uint(p.y.offset)] = r;
            }
#if VEC > 1
        }
#endif
    }
}
