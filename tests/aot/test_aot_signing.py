"""Signed AOT directories: keygen, build --sign, verify --public-key, and the loader.

With a public key configured (``nv.aot.register(..., public_key=)`` or
``NUMBA_VULKAN_AOT_PUBLIC_KEY``), a directory whose index was changed, that
another key signed, or that is not signed is refused like a damaged one: a
JIT compile with a warning, or an ``AOTError`` in strict mode.
"""

import importlib.util
import json
import os
import shutil
import stat
import sys

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.aot import __main__ as cli
from numba_vulkan.aot.build import builder as build
from numba_vulkan.aot.build.signing import signer
from numba_vulkan.aot.loader import index, lookup, signing
from numba_vulkan.api.dispatcher import VulkanDispatcher
from numba_vulkan.base.errors import AOTWarning
from numba_vulkan.runtime.device import current_device
from tests.helpers import run_python

pytest.importorskip("cryptography")

# Refusals warn before they raise in strict mode; the tests check the outcome.
pytestmark = pytest.mark.filterwarnings("ignore::numba_vulkan.base.errors.AOTWarning")

KERNELS = '''
import numba_vulkan as nv


@nv.jit
def scale(a, x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = a * x[i]
'''

MANIFEST = '''
version: 1
output: aot
kernels:
  - function: signkern:scale
    signatures: ["void(float32, float32[:])"]
    threads: [[64]]
'''

SIG = ("float32", "float32[1d,A]")
THREADS = (64, 1, 1)
#: The command line, run in a child process.
AOT = ("-m", "numba_vulkan.aot")


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A project built with ``--sign``; returns (project, keys folder)."""
    base = tmp_path_factory.mktemp("signing")
    root, keys = base / "project", base / "keys"
    root.mkdir()
    keys.mkdir()
    (root / "signkern.py").write_text(KERNELS)
    (root / "kernels.yaml").write_text(MANIFEST)
    for name in ("ours", "theirs"):
        run_python(*AOT, "keygen", keys / f"{name}.pem", keys / f"{name}.pub", cwd=base,
                   timeout=300)
    run_python(*AOT, "build", "kernels.yaml", "--quiet", "--sign", keys / "ours.pem", cwd=root,
               path=[root], timeout=300)
    return root, keys


@pytest.fixture(scope="module")
def kernel_module(signed):
    spec = importlib.util.spec_from_file_location("signkern_copy", signed[0] / "signkern.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clean_lookup(monkeypatch):
    """No search path but what a test registers; strict unless a test says otherwise."""
    monkeypatch.setattr(lookup, "_warned", set())
    monkeypatch.setattr(lookup, "_registered", [])
    monkeypatch.setattr(lookup, "_env_directories", {})
    monkeypatch.setattr(lookup, "_environment_keys", {})
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PATH", raising=False)
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", raising=False)
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")


def copy_of(signed, tmp_path):
    target = tmp_path / "aot"
    shutil.copytree(signed[0] / "aot", target)
    return target


def find(kernel_module):
    """A lookup of the shipped kernel: the kernel, or our error in strict mode."""
    dispatcher = VulkanDispatcher(kernel_module.scale.py_func)
    try:
        return lookup.find(dispatcher, SIG, THREADS, current_device().target)
    except nv.AOTError as exc:
        return exc


def test_keygen_writes_a_private_key_only_its_owner_reads(signed, tmp_path):
    _, keys = signed
    assert stat.S_IMODE(os.stat(keys / "ours.pem").st_mode) == 0o600
    assert (keys / "ours.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert (keys / "ours.pem").read_bytes() != (keys / "theirs.pem").read_bytes()
    before = (keys / "ours.pem").read_bytes()
    result = run_python(*AOT, "keygen", keys / "ours.pem", tmp_path / "new.pub", cwd=tmp_path,
                        timeout=300, check=False)
    assert result.returncode == 1 and "never overwrites" in result.stderr
    assert (keys / "ours.pem").read_bytes() == before
    assert not (tmp_path / "new.pub").exists()


def test_a_good_signature_hits_and_computes_right(signed, kernel_module, clean_lookup, rng):
    root, keys = signed
    assert (root / "aot" / signing.SIGNATURE).stat().st_size == 64
    lookup.register(str(root / "aot"), public_key=str(keys / "ours.pub"))
    assert isinstance(find(kernel_module), nv.CompiledKernel)
    # The PEM text works as well as its path.
    lookup._registered[:] = []
    lookup.register(str(root / "aot"), public_key=(keys / "ours.pub").read_text())
    x = rng.random(100, dtype=np.float32)
    want = np.float32(2.5) * x
    before = lookup.stats()["hits"]
    kernel_module.scale[2, 64](np.float32(2.5), x)
    np.testing.assert_array_equal(x, want)
    assert lookup.stats()["hits"] == before + 1
    result = run_python(*AOT, "verify", root / "aot", "--public-key", keys / "ours.pub",
                        cwd=root, timeout=300, check=False)
    assert result.returncode == 0 and "signed by the public key" in result.stdout


def _tamper(directory):
    data = json.loads((directory / index.INDEX).read_text())
    data["entries"][0]["fingerprint"] = "0" * 16
    (directory / index.INDEX).write_bytes(index.dumps(data))


def _resign_with_theirs(keys):
    def damage(directory):
        text = (directory / index.INDEX).read_bytes()
        sign = signer(str(keys / "theirs.pem"))
        (directory / signing.SIGNATURE).write_bytes(sign(text))
    return damage


def _unsign(directory):
    (directory / signing.SIGNATURE).unlink()


def _garble(directory):
    (directory / signing.SIGNATURE).write_bytes(b"\0" * 63)


@pytest.mark.parametrize("damage, message", [
    ("tampered", "not signed by the public key"),
    ("other key", "not signed by the public key"),
    ("unsigned", "is not signed"),
    ("short signature", "not signed by the public key"),
])
def test_a_directory_not_signed_by_the_key_is_refused(signed, kernel_module, clean_lookup,
                                                      tmp_path, monkeypatch, damage, message):
    root, keys = signed
    directory = copy_of(signed, tmp_path)
    {"tampered": _tamper, "other key": _resign_with_theirs(keys), "unsigned": _unsign,
     "short signature": _garble}[damage](directory)
    lookup.register(str(directory), public_key=str(keys / "ours.pub"))
    found = find(kernel_module)
    assert isinstance(found, nv.AOTError) and message in str(found), found
    # Without strict mode: a warning, and the JIT compiles the kernel.
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "0")
    monkeypatch.setattr(lookup, "_warned", set())
    with pytest.warns(AOTWarning, match=message):
        assert find(kernel_module) is None
    result = run_python(*AOT, "verify", directory, "--public-key", keys / "ours.pub",
                        cwd=tmp_path, timeout=300, check=False)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    # Without a key, only the tampered index's module digests are still checked.
    assert build.verify(str(directory))[1] == []


def test_the_environment_key_applies_to_every_directory(signed, kernel_module, clean_lookup,
                                                        tmp_path, monkeypatch):
    root, keys = signed
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(root / "aot"))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", str(keys / "ours.pub"))
    assert isinstance(find(kernel_module), nv.CompiledKernel)
    monkeypatch.setattr(lookup, "_env_directories", {})
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", str(keys / "theirs.pub"))
    assert "not signed by the public key" in str(find(kernel_module))
    # A registered directory too, unless it names its own key.
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PATH")
    lookup.register(str(root / "aot"))
    assert "not signed by the public key" in str(find(kernel_module))
    lookup.register(str(root / "aot"), public_key=str(keys / "ours.pub"))
    assert isinstance(find(kernel_module), nv.CompiledKernel)


def test_an_unusable_environment_key_refuses_every_directory(signed, kernel_module,
                                                             clean_lookup, tmp_path,
                                                             monkeypatch):
    root, keys = signed
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(root / "aot"))
    for bad in (tmp_path / "missing.pub", keys / "ours.pem"):
        monkeypatch.setattr(lookup, "_env_directories", {})
        monkeypatch.setattr(lookup, "_environment_keys", {})
        monkeypatch.setenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", str(bad))
        found = find(kernel_module)
        assert isinstance(found, nv.AOTError), found
        assert "NUMBA_VULKAN_AOT_PUBLIC_KEY" in str(found)


@pytest.mark.parametrize("key", ["no such file", "-----BEGIN PUBLIC KEY-----\nxx\n", 42])
def test_register_refuses_a_key_that_is_not_one(signed, clean_lookup, key):
    with pytest.raises(nv.AOTError, match="public key"):
        lookup.register(str(signed[0] / "aot"), public_key=key)
    assert lookup._registered == []


def test_a_private_key_is_refused_as_a_public_one_and_back(signed, tmp_path):
    root, keys = signed
    with pytest.raises(nv.AOTError, match="not a PEM public key"):
        signing.PublicKey(str(keys / "ours.pem"))
    with pytest.raises(nv.AOTError, match="not an unencrypted PEM private key"):
        signer(str(keys / "ours.pub"))
    result = run_python(*AOT, "build", "kernels.yaml", "--sign", keys / "ours.pub",
                        "-o", tmp_path / "out", cwd=root, path=[root], timeout=300, check=False)
    assert result.returncode == 2 and "private key" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_rebuilding_a_signed_directory_replaces_its_signature(signed, tmp_path):
    root, keys = signed
    project = tmp_path / "project"
    shutil.copytree(root, project, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(project))
    try:
        result = build.build(str(project / "kernels.yaml"), sign=str(keys / "theirs.pem"))
        assert result.reused == 1 and not result.failures
        assert build.verify(str(project / "aot"), str(keys / "theirs.pub"))[1] == []
        assert build.verify(str(project / "aot"), str(keys / "ours.pub"))[1] != []
        # An unsigned build leaves no stale signature behind.
        result = build.build(str(project / "kernels.yaml"))
        assert result.reused == 1 and not result.failures
    finally:
        sys.path.remove(str(project))
    assert not (project / "aot" / signing.SIGNATURE).exists()
    count, problems = build.verify(str(project / "aot"), str(keys / "theirs.pub"))
    assert any("is not signed" in p for p in problems), problems


_NO_CRYPTOGRAPHY = """
import sys
import numba_vulkan as nv
from numba_vulkan.aot.loader import lookup
nv.aot.register(sys.argv[1])
for directory in lookup.directories():
    directory.entries("x")
    assert directory.problem is None, directory.problem
print("cryptography" in sys.modules)
"""


def test_the_loader_imports_cryptography_only_with_a_key(signed):
    root, _ = signed
    result = run_python("-c", _NO_CRYPTOGRAPHY, root / "aot", timeout=120, check=False,
                        env={"NUMBA_VULKAN_AOT_PUBLIC_KEY": None})
    assert result.returncode == 0 and result.stdout.strip() == "False", result.stderr
