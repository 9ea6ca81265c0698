"""Explained misses: a strict-mode AOTError says what differs from the nearest shipped entry."""

import linecache
import types

import pytest

import numba_vulkan as nv
from numba_vulkan.aot.loader import lookup
from numba_vulkan.runtime.device import current_device
from numba_vulkan.store import keys
from tests.helpers import run_python

KERNELS = '''
import numba_vulkan as nv

SCALE = 2.0


@nv.jit
def helper(v):
    return v + 1.0


@nv.jit
def kern(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = helper(x[i]) * SCALE
'''

MANIFEST = '''
version: 1
output: aot
kernels:
  - function: explkern:kern
    signatures: ["void(float32[:])"]
    threads: [[64]]
'''

SIG = ("float32[1d,A]",)
THREADS = (64, 1, 1)

pytestmark = pytest.mark.filterwarnings("ignore::numba_vulkan.base.errors.AOTWarning")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain") / "project"
    root.mkdir()
    (root / "explkern.py").write_text(KERNELS)
    (root / "kernels.yaml").write_text(MANIFEST)
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--quiet", cwd=root,
               path=[root])
    return root / "aot"


@pytest.fixture
def strict(shipped, monkeypatch):
    monkeypatch.setattr(lookup, "_warned", set())
    monkeypatch.setattr(lookup, "_env_directories", {})
    monkeypatch.setattr(lookup, "_registered", [])
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(shipped))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PUBLIC_KEY", raising=False)


def kernel(source=KERNELS):
    """The kernel of a (changed) copy of the shipped module, under its name.

    Its source is in :mod:`linecache`, as an imported module's is."""
    module = types.ModuleType("explkern")
    filename = f"<explkern {len(linecache.cache)} {hash(source)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module.kern


def miss(dispatcher, sig=SIG, threads=THREADS):
    with pytest.raises(nv.AOTError) as info:
        lookup.find(dispatcher, sig, threads, current_device().target)
    return str(info.value)


def test_the_unchanged_kernel_hits(strict):
    found = lookup.find(kernel(), SIG, THREADS, current_device().target)
    assert isinstance(found, nv.CompiledKernel)


@pytest.mark.parametrize("old, new, says", [
    ("SCALE = 2.0", "SCALE = 3.0", "global SCALE changed"),
    ("return v + 1.0", "return v + 2.0", "callee helper changed"),
    ("x[i] = helper(x[i]) * SCALE", "x[i] = helper(x[i]) * SCALE * SCALE",
     "the kernel's own code changed"),
    ("* SCALE\n", "* SCALE + OFFSET\n", "global OFFSET is new"),
    ("x[i] = helper(x[i]) * SCALE", "x[i] = x[i] * SCALE",
     "callee helper is no longer read"),
])
def test_a_code_change_is_named(strict, old, new, says):
    source = KERNELS.replace(old, new)
    if "OFFSET" in new:
        source = source.replace("SCALE = 2.0", "SCALE = 2.0\nOFFSET = 1.0")
    message = miss(kernel(source))
    assert "built from other code: " in message and says in message, message
    # Only what changed is named.
    others = {"global SCALE", "callee helper", "the kernel's own code"} - {says.rsplit(" ", 1)[0]}
    if "is new" not in says and "no longer" not in says:
        assert not any(o + " changed" in message for o in others), message


def test_a_launch_that_differs_is_named(strict):
    message = miss(kernel(), threads=(128, 1, 1))
    assert "built from this code, but the nearest entry differs: it was built for threads " \
           "(64, 1, 1)" in message, message
    message = miss(kernel(), sig=("float64[1d,A]",))
    assert "it was built for argument types (float32[1d,A])" in message, message


def test_a_python_float_for_a_float32_entry_suggests_numpy_scalars():
    entry = {"signature": ["float32", "float32[1d,C]"]}
    advice = lookup._scalar_advice(("float64", "float32[1d,C]"), entry["signature"])
    assert "argument 1 is float64 (as a Python float is)" in advice
    assert "pass np.float32(value)" in advice
    assert lookup._scalar_advice(("float64[1d,C]",), ["float32[1d,C]"]) == ""


def test_key_parts_do_not_change_the_key():
    dispatcher = kernel()
    key, parts = keys.content_key_parts(dispatcher)
    assert key == keys.content_key(dispatcher)
    assert set(parts) == {"code", "options", "callee helper", "global SCALE",
                          "global nv.global_id"}, parts
    changed = kernel(KERNELS.replace("SCALE = 2.0", "SCALE = 3.0"))
    other = keys.content_key_parts(changed)[1]
    assert {p for p in parts if parts[p] != other[p]} == {"global SCALE"}


def test_aot_explain_says_the_same(shipped, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "explkern.py").write_text(KERNELS.replace("SCALE = 2.0", "SCALE = 3.0"))
    # No bytecode cache: the two versions of the module have the same size.
    env = {"PYTHONDONTWRITEBYTECODE": "1", "NUMBA_VULKAN_AOT_PATH": None,
           "NUMBA_VULKAN_AOT_STRICT": None}
    explain = ("-m", "numba_vulkan.aot", "explain", shipped, "explkern:kern",
               "--signature", "void(float32[:])")
    result = run_python(*explain, "--threads", "64", cwd=project, env=env, timeout=300,
                        check=False)
    assert result.returncode == 1 and "global SCALE changed" in result.stdout, result
    # Strict is the lookup's, not the environment's, and explain says which.
    assert "(a strict lookup, so nothing is compiled)" in result.stdout
    assert "NUMBA_VULKAN_AOT_STRICT is not set here" in result.stdout
    (project / "explkern.py").write_text(KERNELS)
    result = run_python(*explain, "--threads", "64", cwd=project, env=env, timeout=300,
                        check=False)
    assert result.returncode == 0 and "is in" in result.stdout, result
    result = run_python(*explain, cwd=project, env=env, timeout=300, check=False)
    assert result.returncode == 1 and "built for threads (64, 1, 1)" in result.stdout, result
    result = run_python(*explain, "--threads", "x", cwd=project, env=env, timeout=300,
                        check=False)
    assert result.returncode == 2 and "--threads x" in result.stderr, result
