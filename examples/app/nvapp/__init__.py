"""An example app whose wheel carries its kernels, compiled ahead of time.

Importing the package registers the AOT directory it carries as package
data, so its kernels launch without compiling anything.
"""

import numba_vulkan as nv

nv.aot.register(__name__)
