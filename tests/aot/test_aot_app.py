"""The example app as a wheel that carries its AOT directory, installed in a fresh venv."""

import os
import shutil
import sysconfig
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


def test_installed_app_runs_in_strict_mode_without_compiling(wheel, tmp_path):
    venv = tmp_path / "fresh"
    run_python("-m", "venv", "--without-pip", venv, cwd=tmp_path, env=CHILD)
    python = str(venv / "bin" / "python")
    # The fresh environment gets the app from its wheel; numba_vulkan and its
    # dependencies come from this environment, without a download.
    purelib = run_python("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                         python=python, cwd=tmp_path, env=CHILD).stdout.strip()
    with open(os.path.join(purelib, "outer-env.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    run_python("-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel,
               cwd=tmp_path, env=CHILD)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    result = run_python("-c", "import runpy, nvapp; print(nvapp.__file__); "
                              "runpy.run_module('nvapp', run_name='__main__')",
                        python=python, cwd=workdir,
                        env=dict(CHILD, NUMBA_VULKAN_AOT_STRICT="1", NUMBA_VULKAN_CACHE="0"))
    location, report = result.stdout.strip().splitlines()[-2:]
    assert location.startswith(purelib)
    assert report == "nvapp: ok; AOT hits 2, misses 0"
