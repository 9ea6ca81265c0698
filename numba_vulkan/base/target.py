"""What a kernel is compiled for: an explicit description of a device class.

A :class:`TargetDescription` is plain data. The compiler reads it, never a
live device, so a build machine without a GPU can build for GPUs it does not
have. The runtime maps a real device to the best description it supports.
"""

from dataclasses import dataclass, replace

#: Vulkan version -> (SPIR-V version, spirv-val target environment). Not
#: 1.1: LLVM's SPIR-V backend has no Vulkan 1.1 (SPIR-V 1.3) target.
_VULKAN_VERSIONS = {
    (1, 2): ("1.5", "vulkan1.2"),
    (1, 3): ("1.6", "vulkan1.3"),
}

#: Loop trips lavapipe (Mesa's llvmpipe) runs per SIMD group, all loops of
#: a kernel together, before it leaves every loop: LP_MAX_TGSI_LOOP_ITERATIONS
#: in Mesa's gallivm, 65535 in every Mesa release so far.
LAVAPIPE_LOOP_LIMIT = 65535


@dataclass(frozen=True)
class TargetDescription:
    """A class of Vulkan devices that a module is compiled for.

    Attributes:
        vulkan: Vulkan version as ``(major, minor)``; 1.2 or later.
        float64: Whether the device computes in float64; if not, float64 is
            narrowed to float32.
        int64: Whether the device computes in int64; if not, int64 is
            narrowed to int32.
        max_push_constants: Bytes of push constants every device of the class
            offers (128 is Vulkan's guaranteed minimum).
        float32_atomic_add: Whether the devices add float32 atomically in
            hardware (``VK_EXT_shader_atomic_float``); if not, a float atomic
            add is a compare-and-swap loop, which works everywhere.
        loop_limit: Loop trips after which the driver leaves every loop of
            an invocation, silently (lavapipe counts 65535 per SIMD group,
            all loops together); 0 for none. Kernels for such a target
            unroll innermost loops and report reaching the limit as a
            LaunchError (see :mod:`numba_vulkan.codegen.looplimit`).
        fused_fma: Whether the devices compute GLSL's ``Fma`` with one
            rounding, as GPUs with a hardware fused multiply-add do (Vulkan
            allows two): ``llvm.fma`` (libclc's math is full of them) is
            then the device's own instruction instead of an emulation.
        nvidia_rsqrt: Whether the devices' float32 ``InverseSqrt`` is
            NVIDIA's reciprocal square root instruction, whose results are
            close enough that one fma correction of ``x * rsqrt(x)`` is the
            correctly rounded root, as numba-cuda's ``sqrt.rn`` relies on
            (checked on every float32 on an H200); other devices' take a
            longer sequence that any reciprocal root within 64 ULP rounds
            correctly (:mod:`numba_vulkan.codegen.mathlib.exact32`).
        float16: Whether the devices compute in float16 (``shaderFloat16``);
            if not, float16 arithmetic is done in float32 and each result
            rounded to float16 (see :mod:`numba_vulkan.codegen.half`).
            float16 arrays need ``storageBuffer16BitAccess`` either way.
        float16_rte: Whether modules may ask the devices to round float16
            arithmetic to nearest, ties to even
            (``shaderRoundingModeRTEFloat16``); without it a target with
            ``float16`` computes float16 additions, subtractions and
            products in float32 too, rounded to float16 in integer arithmetic.
    """

    vulkan: tuple = (1, 2)
    float64: bool = True
    int64: bool = True
    max_push_constants: int = 128
    float32_atomic_add: bool = False
    loop_limit: int = 0
    fused_fma: bool = False
    nvidia_rsqrt: bool = False
    float16: bool = False
    float16_rte: bool = False

    def __post_init__(self):
        if tuple(self.vulkan) not in _VULKAN_VERSIONS:
            known = ", ".join(f"{a}.{b}" for a, b in _VULKAN_VERSIONS)
            raise ValueError(f"Vulkan {'.'.join(map(str, self.vulkan))} is not supported "
                             f"(LLVM's SPIR-V backend compiles for {known}); use one of those")
        if not isinstance(self.loop_limit, int) or self.loop_limit < 0:
            raise ValueError(f"loop_limit must be a non-negative int, not {self.loop_limit!r}")

    @property
    def narrowed(self):
        """The narrowing mode: which 64-bit types become 32-bit ones."""
        return tuple(n for n, has in (("float64", self.float64), ("int64", self.int64)) if not has)

    @property
    def triple(self):
        """The LLVM target triple of the SPIR-V backend."""
        spirv, _ = _VULKAN_VERSIONS[tuple(self.vulkan)]
        major, minor = self.vulkan
        return f"spirv{spirv}-unknown-vulkan{major}.{minor}-compute"

    @property
    def target_env(self):
        """The ``--target-env`` that spirv-val checks modules against."""
        return _VULKAN_VERSIONS[tuple(self.vulkan)][1]

    def key(self):
        """The description as a JSON-compatible list, for cache keys and entries.

        Optional features are appended by name only when present, so the key
        of a description without them is the same as before they existed.
        """
        key = [list(self.vulkan), self.float64, self.int64, self.max_push_constants]
        if self.float32_atomic_add:
            key.append("float32_atomic_add")
        if self.loop_limit:
            key.append(f"loop_limit={self.loop_limit}")
        if self.float16:
            key.append("float16")
        if self.fused_fma:
            key.append("fused_fma")
        if self.float16_rte:
            key.append("float16_rte")
        if self.nvidia_rsqrt:
            key.append("nvidia_rsqrt")
        return key

    @classmethod
    def from_key(cls, key):
        """The description whose :meth:`key` is ``key``; ValueError if malformed."""
        try:
            vulkan, float64, int64, push, *optional = key
            limits = [name for name in optional if str(name).startswith("loop_limit=")]
            flags = ("float32_atomic_add", "float16", "fused_fma", "float16_rte", "nvidia_rsqrt")
            if any(name not in flags for name in optional if name not in limits) \
                    or len(limits) > 1:
                raise ValueError(f"unknown target features {optional}")
            loop_limit = int(limits[0].split("=", 1)[1]) if limits else 0
            return cls(tuple(vulkan), bool(float64), bool(int64), int(push),
                       float32_atomic_add="float32_atomic_add" in optional,
                       loop_limit=loop_limit, float16="float16" in optional,
                       fused_fma="fused_fma" in optional,
                       float16_rte="float16_rte" in optional,
                       nvidia_rsqrt="nvidia_rsqrt" in optional)
        except TypeError as exc:
            raise ValueError(f"not a target description: {key!r}") from exc

    def with_features(self, **changes):
        """A copy with some fields changed."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, target_env, narrow=False):
        """The description for a spirv-val environment such as ``vulkan1.2``."""
        for version, (_, env) in _VULKAN_VERSIONS.items():
            if env == target_env:
                return cls(vulkan=version, float64=not narrow, int64=not narrow)
        known = ", ".join(env for _, env in _VULKAN_VERSIONS.values())
        raise ValueError(f"unknown target environment {target_env!r}; known: {known} (LLVM's "
                         "SPIR-V backend has no Vulkan 1.1 target)")


DEFAULT = TargetDescription()
