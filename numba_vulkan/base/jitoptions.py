"""The options of ``nv.jit``: one table for every part that reads them.

The dispatcher checks a kernel's options against it, the AOT manifest
checks the ``options:`` it may set, and the kernel cache keys, AOT content
keys and device functions keep the options that change the compiled code.
The compiler takes a kernel's options as one :class:`KernelOptions`.
Imports nothing.
"""

from collections import namedtuple
from collections.abc import Mapping

Option = namedtuple("Option", "values description code")
Option.__doc__ = """One ``nv.jit`` option.

Attributes:
    values: ``bool``; :data:`FLAGS`, a bool or a set of :data:`FAST_MATH_FLAGS`
        (or ``"fast"``); or the tuple of strings it takes (the first is the default).
    description: What it does, for messages.
    code: Whether it changes the compiled code (and so belongs in keys).
"""

#: LLVM's fast-math flags, which ``fastmath`` may name instead of ``True``
#: (all of them, and ``fast``), as ``numba.njit`` takes them.
FAST_MATH_FLAGS = frozenset(("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"))
FLAGS = "flags"

OPTIONS = {
    "fastmath": Option(FLAGS, "True, or a set of LLVM's fast-math flags such as {'contract'}: "
                       "float operations the CPU would not do", True),
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


def as_json(options):
    """The code-changing ``options`` as a dict JSON can hold, sorted by name:
    a set of flags as a sorted list."""
    def plain(value):
        if isinstance(value, (set, frozenset)):
            return sorted(str(v) for v in value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        return f"{type(value).__module__}.{type(value).__qualname__}:{value}"
    return {k: plain(v) for k, v in code_options(options).items()}


def check(name, value):
    """``value`` of option ``name`` in its canonical form (a set of flags as
    a frozenset); ValueError saying what it takes if it is not one of its
    values."""
    allowed = OPTIONS[name].values
    if allowed is bool or allowed == FLAGS:
        if isinstance(value, bool):
            return value
        if allowed == FLAGS and isinstance(value, (set, frozenset, list, tuple)) and all(
                isinstance(v, str) and v in FAST_MATH_FLAGS | {"fast"} for v in value):
            return frozenset(value)
        expected = "true or false" if allowed is bool else (
            "true, false or a set of the fast-math flags "
            + ", ".join(repr(f) for f in sorted(FAST_MATH_FLAGS | {"fast"})))
    elif value in allowed:
        return value
    else:
        expected = " or ".join(map(repr, allowed))
    raise ValueError(f"{name} must be {expected}, not {value!r}")


class KernelOptions(Mapping):
    """The ``nv.jit`` options one kernel was given, checked and canonical.

    Frozen and hashable, so that a compile request holding them can key a
    dictionary. It is a mapping of the options given (an option left out is
    not in it, so keys made from it equal those made from the dict it was
    made of); :attr:`fastmath_flags` says what ``fastmath`` allows.

    Raises:
        ValueError: An unknown option, or a value the option does not take.
    """

    __slots__ = ("_given", "_hash")

    def __init__(self, options=None):
        options = dict(options or {})
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; known: "
                             f"{', '.join(OPTIONS)}")
        given = {name: check(name, value) for name, value in sorted(options.items())}
        object.__setattr__(self, "_given", given)
        object.__setattr__(self, "_hash", hash(frozenset(given.items())))

    def __setattr__(self, name, value):
        raise AttributeError("KernelOptions are frozen")

    def __getitem__(self, name):
        return self._given[name]

    def __iter__(self):
        return iter(self._given)

    def __len__(self):
        return len(self._given)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __repr__(self):
        return f"KernelOptions({self._given!r})"

    def __reduce__(self):
        # Pickled for the AOT build's workers: rebuilt from the plain dict.
        return (KernelOptions, (dict(self._given),))

    def code(self):
        """The options that change the compiled code (:data:`CODE_OPTIONS`)."""
        return KernelOptions(code_options(self))

    @property
    def fastmath_flags(self):
        """The fast-math flags ``fastmath`` gives (a frozenset of
        :data:`FAST_MATH_FLAGS`; ``True`` and ``"fast"`` give them all), or
        None where the kernel was not given ``fastmath``."""
        value = self._given.get("fastmath")
        if value is None:
            return None
        if value is True or (value is not False and "fast" in value):
            return FAST_MATH_FLAGS
        return frozenset(value or ())
