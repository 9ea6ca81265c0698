"""The example app as a wheel that carries its AOT directory, installed in a fresh venv."""

import os
import shutil
import sys
import zipfile

import pytest

from tests.helpers import ROOT, run_python


# PYTHONPATH stays: where numba_vulkan is not installed (the GPU machine
# puts it and its wheels on the path) the app finds it there; the app itself
# is never on it.
CHILD = {"NUMBA_VULKAN_AOT_PATH": None}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The app built ahead of time and packaged, from a copy of its sources."""
    app = tmp_path_factory.mktemp("app") / "app"
    shutil.copytree(os.path.join(ROOT, "examples", "app"), app,
                    ignore=shutil.ignore_patterns("__pycache__", "aot", "build", "*.egg-info"))
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--quiet", cwd=app, env=CHILD)
    run_python("-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
               "-w", "dist", ".", cwd=app, env=CHILD)
    (path,) = (app / "dist").glob("nvapp-*.whl")
    return path


def test_wheel_carries_the_aot_directory(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "nvapp/aot/index.json" in names
    assert len([n for n in names if n.startswith("nvapp/aot/spirv/")]) == 2
    assert not [n for n in names if n.endswith((".pkl", ".pickle"))]


def _install(wheel, where, python=None):
    """A fresh venv of ``python`` (this one by default) with the app from its
    wheel; numba_vulkan's dependencies come from ``python``'s environment,
    without a download. Returns the venv's python and its site-packages."""
    python = python or sys.executable
    venv = where / "fresh"
    run_python("-m", "venv", "--without-pip", venv, python=python, cwd=where, env=CHILD)
    fresh = str(venv / "bin" / "python")
    paths = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = run_python("-c", paths, python=fresh, cwd=where, env=CHILD).stdout.strip()
    outer = run_python("-c", paths, python=python, cwd=where, env=CHILD).stdout.strip()
    with open(os.path.join(purelib, "outer-env.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({outer!r})\n")
    run_python("-m", "pip", "--python", fresh, "install", "--no-deps", "--no-index", "-q", wheel,
               cwd=where, env=CHILD)
    return fresh, purelib


def _run_strict(python, where):
    workdir = where / "elsewhere"
    workdir.mkdir()
    return run_python("-c", "import runpy, nvapp; print(nvapp.__file__); "
                            "runpy.run_module('nvapp', run_name='__main__')",
                      python=python, cwd=workdir,
                      env=dict(CHILD, NUMBA_VULKAN_AOT_STRICT="1", NUMBA_VULKAN_CACHE="0"))


def test_installed_app_runs_in_strict_mode_without_compiling(wheel, tmp_path):
    python, purelib = _install(wheel, tmp_path)
    location, report = _run_strict(python, tmp_path).stdout.strip().splitlines()[-2:]
    assert location.startswith(purelib)
    assert report == "nvapp: ok; AOT hits 2, misses 0"


def _other_pythons():
    """Interpreters of other Python versions, each with numba_vulkan's
    dependencies installed, that scripts/smoke.sh names."""
    return [p for p in os.environ.get("SMOKE_OTHER_PYTHONS", "").split(os.pathsep) if p]


@pytest.mark.parametrize("python", _other_pythons() or [pytest.param(
    None, marks=pytest.mark.skip(reason="scripts/smoke.sh names the other Pythons"))])
def test_a_wheel_built_on_one_python_runs_strict_on_another(wheel, tmp_path, python):
    """One AOT directory serves every Python: its keys are the kernels'
    source, not their bytecode, which differs between versions."""
    fresh, purelib = _install(wheel, tmp_path, python)
    result = _run_strict(fresh, tmp_path)
    location, report = result.stdout.strip().splitlines()[-2:]
    assert location.startswith(purelib)
    assert report == "nvapp: ok; AOT hits 2, misses 0", result.stderr
