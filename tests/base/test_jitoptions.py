"""One table of ``nv.jit`` options, and the cache files it and the libclc cache write."""

import os
import stat

import pytest

import numba_vulkan as nv
from numba_vulkan.api import dispatcher
from numba_vulkan.base import jitoptions
from numba_vulkan.codegen import libclc
from numba_vulkan.aot.build import manifest
from numba_vulkan.store import keys


def _kernel(x):
    x[0] = 1


def test_every_part_reads_the_one_table():
    assert list(dispatcher.OPTIONS) == list(jitoptions.OPTIONS)
    assert set(manifest._OPTIONS) == set(jitoptions.CODE_OPTIONS) == (
        set(jitoptions.OPTIONS) - {"cache"})
    options = {"cache": True, "fastmath": True, "boundscheck": False}
    assert jitoptions.code_options(options) == {"boundscheck": False, "fastmath": True}
    with pytest.raises(TypeError, match="known: fastmath, error_model, boundscheck, inline"):
        nv.jit(fastmth=True)


def _values(name):
    values = jitoptions.OPTIONS[name].values
    if values == jitoptions.FLAGS:
        return (False, True, {"contract"}, {"contract", "nnan"})
    return (False, True) if values is bool else values


@pytest.mark.parametrize("name", [n for n in jitoptions.CODE_OPTIONS
                                  if jitoptions.OPTIONS[n].values == jitoptions.FLAGS])
def test_each_set_of_flags_has_a_key_of_its_own(name):
    found = {keys.content_key(nv.jit(**{name: value})(_kernel)) for value in _values(name)}
    assert len(found) == len(_values(name))
    assert keys.content_key(nv.jit(**{name: ["nnan", "contract"]})(_kernel)) == \
        keys.content_key(nv.jit(**{name: {"contract", "nnan"}})(_kernel))


@pytest.mark.parametrize("name", jitoptions.CODE_OPTIONS)
def test_each_code_option_changes_the_content_key_and_cache_does_not(name):
    first, second = _values(name)[:2]
    key = keys.content_key(nv.jit(**{name: first})(_kernel))
    assert keys.content_key(nv.jit(**{name: second})(_kernel)) != key
    assert keys.content_key(nv.jit(**{name: first}, cache=True)(_kernel)) == key


def test_kernel_options_are_frozen_hashable_and_key_as_their_dict():
    given = {"fastmath": ["nnan", "contract"], "cache": True, "error_model": "python"}
    options = jitoptions.KernelOptions(given)
    canonical = {"cache": True, "error_model": "python",
                 "fastmath": frozenset({"contract", "nnan"})}
    assert options == canonical and dict(options) == canonical
    assert hash(options) == hash(jitoptions.KernelOptions(canonical))
    with pytest.raises(AttributeError):
        options.fastmath = True
    # The kernel cache keys them as the dict they were made of.
    assert jitoptions.code_options(options) == jitoptions.code_options(canonical)
    assert options.code() == {"error_model": "python",
                              "fastmath": frozenset({"contract", "nnan"})}
    import pickle
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(ValueError, match="unknown option.*fastmth"):
        jitoptions.KernelOptions({"fastmth": True})
    with pytest.raises(ValueError, match="error_model must be"):
        jitoptions.KernelOptions({"error_model": "c"})


@pytest.mark.parametrize("value, flags", [
    (None, None), (False, frozenset()), (True, jitoptions.FAST_MATH_FLAGS),
    ({"fast"}, jitoptions.FAST_MATH_FLAGS), ({"contract"}, frozenset({"contract"}))])
def test_fastmath_flags_say_what_the_option_allows(value, flags):
    given = {} if value is None else {"fastmath": value}
    assert jitoptions.KernelOptions(given).fastmath_flags == flags


def test_prepared_libclc_files_are_readable_by_the_cache_group(cache_dir, monkeypatch):
    """The prepared library is written like every other cache file: with the
    umask's permissions (was mkstemp's 0600), atomically, no temporary left."""
    monkeypatch.setattr(libclc, "_loaded", {})
    monkeypatch.setattr(libclc, "prepare", lambda path: "; prepared\n")
    old = os.umask(0o022)
    try:
        library = libclc.library()
    finally:
        os.umask(old)
    written = sorted((cache_dir / "libclc").iterdir())
    assert [p.suffix for p in written] == [".json", ".ll"]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert library is not None
