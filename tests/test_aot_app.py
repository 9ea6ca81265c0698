"""The example app as a wheel that carries its AOT directory, installed in a fresh venv."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, cwd, **env):
    # PYTHONPATH stays: where numba_vulkan is not installed (the GPU machine
    # puts it and its wheels on the path) the app finds it there; the app
    # itself is never on it.
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_VULKAN_AOT_PATH"}
    environment.update(env)
    result = subprocess.run(args, cwd=cwd, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The app built ahead of time and packaged, from a copy of its sources."""
    app = tmp_path_factory.mktemp("app") / "app"
    shutil.copytree(os.path.join(ROOT, "examples", "app"), app,
                    ignore=shutil.ignore_patterns("__pycache__", "aot", "build", "*.egg-info"))
    run([sys.executable, "-m", "numba_vulkan.aot", "build", "kernels.yaml", "--quiet"], app)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", "dist", "."], app)
    (path,) = (app / "dist").glob("nvapp-*.whl")
    return path


def test_wheel_carries_the_aot_directory(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "nvapp/aot/index.json" in names
    assert len([n for n in names if n.startswith("nvapp/aot/spirv/")]) == 2
    assert not [n for n in names if n.endswith((".pkl", ".pickle"))]


def test_installed_app_runs_in_strict_mode_without_compiling(wheel, tmp_path):
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    # The fresh environment gets the app from its wheel; numba_vulkan and its
    # dependencies come from this environment, without a download.
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  tmp_path).stdout.strip()
    with open(os.path.join(purelib, "outer-env.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "-q", str(wheel)], tmp_path)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    result = run([python, "-c", "import runpy, nvapp; print(nvapp.__file__); "
                                "runpy.run_module('nvapp', run_name='__main__')"],
                 workdir, NUMBA_VULKAN_AOT_STRICT="1", NUMBA_VULKAN_CACHE="0")
    location, report = result.stdout.strip().splitlines()[-2:]
    assert location.startswith(purelib)
    assert report == "nvapp: ok; AOT hits 2, misses 0"
