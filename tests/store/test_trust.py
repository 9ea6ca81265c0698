"""What a reader trusts (issue 25): the team key, the trust mode, settings
that must say what is wrong with them, and the public names the
specification promises. The attacks themselves are in test_attacks.py."""

import os
import re
import stat

import numpy as np
import pytest

from numba_vulkan import store
from numba_vulkan.base import config
from numba_vulkan.base.errors import AOTError, CacheWarning, ConfigError
from numba_vulkan.store import keys, remote, trust

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "spec",
                    "kernelcache-api.txt")


def _key(tmp_path, mode=0o600, text="s" * 64):
    path = tmp_path / "team.key"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def unconfigured(monkeypatch):
    for name in ("NUMBA_VULKAN_REMOTE_KEY", "NUMBA_VULKAN_REMOTE_TRUST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", "redis://127.0.0.1:9/0")
    remote.forget()
    yield monkeypatch
    remote.forget()


def test_a_value_sealed_with_the_key_opens_and_any_change_is_refused(tmp_path, unconfigured):
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_KEY", str(_key(tmp_path)))
    name = keys.remote_key("kernels", "ab" * 32)
    sealed = trust.seal(name, b"entry bytes")
    assert sealed.startswith(trust.MAGIC)
    assert trust.open_value("kernels", name, sealed) == b"entry bytes"
    for bad in (b"entry bytes", sealed[:-1] + b"X", sealed.replace(b"entry", b"Entry")):
        with pytest.raises(ValueError, match="MAC"):
            trust.open_value("kernels", name, bad)
    # Sealed under one key, moved to another: refused.
    with pytest.raises(ValueError, match="MAC"):
        trust.open_value("kernels", keys.remote_key("kernels", "cd" * 32), sealed)
    # Another team's key.
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_KEY", str(_key(tmp_path, text="o" * 64)))
    with pytest.raises(ValueError, match="does not match"):
        trust.open_value("kernels", name, sealed)


def test_without_a_key_the_server_is_ignored_with_one_warning(unconfigured):
    tier = store.lookup.REMOTE
    with pytest.warns(CacheWarning, match="NUMBA_VULKAN_REMOTE_KEY"):
        assert not tier.usable()
    assert not tier.usable()
    remote.forget()
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_TRUST", "unsigned")
    assert tier.usable()
    # Unsigned mode reads what anyone wrote, but never for the aot section.
    assert trust.open_value("kernels", "k", b"raw") == b"raw"
    with pytest.raises(ValueError, match="authenticated entries only"):
        trust.open_value("aot", "k", b"raw")
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_TRUST", "maybe")
    with pytest.raises(ConfigError, match="NUMBA_VULKAN_REMOTE_TRUST='maybe'"):
        config.remote_trust()


@pytest.mark.parametrize("mode,text,message", [
    (0o644, "s" * 64, "readable or writable by every user"),
    (0o600, "short", "fewer than 16"),
])
def test_an_unusable_key_turns_the_tier_off_saying_why(tmp_path, unconfigured, mode, text,
                                                       message):
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_KEY", str(_key(tmp_path, mode, text)))
    with pytest.warns(CacheWarning, match=message):
        assert not store.lookup.REMOTE.usable()


def test_an_empty_key_setting_is_an_error(unconfigured):
    unconfigured.setenv("NUMBA_VULKAN_REMOTE_KEY", "")
    with pytest.raises(ConfigError, match="NUMBA_VULKAN_REMOTE_KEY is set but empty"):
        trust.team_key()


def test_keygen_writes_a_private_key(tmp_path):
    path = tmp_path / "new.key"
    trust.keygen(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", path.read_text())
    with pytest.raises(FileExistsError):
        trust.keygen(path)


@pytest.mark.parametrize("value,expected", [
    ("1.5G", 3 << 29), ("1e9", 10**9), ("0x100", 256), ("500M", 500 << 20), ("2GiB", 2 << 30),
    ("0", 0), (" 1024 ", 1024), (".5k", 512),
])
def test_cache_sizes_in_every_usual_spelling(monkeypatch, value, expected):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", value)
    assert config.cache_max_bytes() == expected


@pytest.mark.parametrize("value", ["abc", "-5", "1.5.5", "G", "0x", "1e"])
def test_a_bad_cache_size_names_the_variable_and_what_it_accepts(monkeypatch, value):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", value)
    with pytest.raises(ConfigError, match="NUMBA_VULKAN_CACHE_MAX_BYTES=.*1.5G"):
        config.cache_max_bytes()


def test_a_compile_under_a_bad_cache_size_says_so(cache_dir, monkeypatch):
    import numba_vulkan as nv

    @nv.jit
    def bad_size(x):
        x[0] = 1.0

    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", "1.5Q")
    with pytest.raises(ConfigError) as caught:
        bad_size[1, 1](np.zeros(1, np.float32))
    assert "NUMBA_VULKAN_CACHE_MAX_BYTES='1.5Q'" in str(caught.value)
    assert "internal error" not in str(caught.value)


def test_an_empty_public_key_setting_is_an_error_not_unset(monkeypatch):
    from numba_vulkan.aot.loader import lookup
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", "")
    with pytest.raises(ConfigError, match="NUMBA_VULKAN_AOT_PUBLIC_KEY is set but empty"):
        lookup._environment_key()
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", "  ")
    with pytest.raises(ConfigError):
        config.aot_public_key()


def test_a_world_readable_private_key_is_refused(tmp_path):
    pytest.importorskip("cryptography")
    from numba_vulkan.aot.build import signing
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    signing.keygen(private, public)
    assert signing.signer(str(private))(b"index")
    private.chmod(0o644)
    with pytest.raises(AOTError, match="readable or writable by every user"):
        signing.signer(str(private))


def test_the_cache_directory_of_the_specification(cache_dir):
    """The specification puts entries in kernels/ below
    numba_vulkan.libclc.cache_directory; it must exist and say where."""
    with open(SPEC, encoding="utf-8") as f:
        spec = f.read()
    assert "kernels/ below numba_vulkan.libclc.cache_directory" in spec
    import numba_vulkan.libclc
    assert callable(numba_vulkan.libclc.cache_directory)
    assert numba_vulkan.libclc.cache_directory() == str(cache_dir)
    name = "ef" * 32
    store.store(name, {"x": 1})
    assert os.path.isfile(os.path.join(numba_vulkan.libclc.cache_directory(), "kernels",
                                       name + ".entry"))
