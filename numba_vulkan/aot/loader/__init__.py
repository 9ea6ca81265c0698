"""The run-time side of AOT directories: what a shipped app runs.

* :mod:`~numba_vulkan.aot.loader.index`: the directory format, reading and
  checking the index and each module against its entry;
* :mod:`~numba_vulkan.aot.loader.lookup`: the search path
  (``register``, ``NUMBA_VULKAN_AOT_PATH``) and finding a launch's kernel;
* :mod:`~numba_vulkan.aot.loader.signing`: checking the index's signature.

A kernel's entry is found by its content key
(:func:`numba_vulkan.store.keys.content_key`).

It sits below the dispatcher, which asks it before compiling anything, and
imports neither Numba, the dispatcher, nor the build side
(:mod:`numba_vulkan.aot.build.builder`, :mod:`~numba_vulkan.aot.build.manifest`,
:mod:`~numba_vulkan.aot.build.signing` and the command line), which sit on top of it.
"""
