"""The options of ``nv.jit``: one table for every part that reads them.

The dispatcher checks a kernel's options against it, the AOT manifest
checks the ``options:`` it may set, and the kernel cache keys, AOT content
keys and device functions keep the options that change the compiled code.
Imports nothing.
"""

from collections import namedtuple

Option = namedtuple("Option", "values description code")
Option.__doc__ = """One ``nv.jit`` option.

Attributes:
    values: ``bool``, or the tuple of strings it takes (the first is the default).
    description: What it does, for messages.
    code: Whether it changes the compiled code (and so belongs in keys).
"""

OPTIONS = {
    "fastmath": Option(bool, "allow float reassociation and contraction the CPU would not do",
                       True),
    "error_model": Option(("numpy", "python"),
                          "'numpy' (default) or 'python': how integer division by zero "
                          "behaves", True),
    "boundscheck": Option(bool, "check array indices", True),
    "inline": Option(("never", "always"),
                     "'never' (default) or 'always': inline calls at Numba's IR level", True),
    "cache": Option(bool, "keep compiled kernels on disk across processes", False),
}

#: Names of the options that change the compiled code, in the table's order.
CODE_OPTIONS = tuple(name for name, option in OPTIONS.items() if option.code)


def code_options(options):
    """The options of a kernel (a dict) that change its code, sorted by name."""
    return {k: options[k] for k in sorted(options or {}) if k in CODE_OPTIONS}
