"""Bad manifests and command lines: exit status 2 and file:line: problem, no traceback."""

import itertools
import subprocess
import sys

import pytest

from numba_vulkan.aot.__main__ import main
from tests.helpers import child_env, run_python

_counter = itertools.count()

MODULE = '''
import numba_vulkan as nv

@nv.jit
def scale(x, factor):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] *= factor

def plain(x):
    return x
'''

GOOD = '''version: 1
output: out
kernels:
  - function: {module}:scale
    signatures:
      - void(float32[::1], float32)
'''


def write(tmp_path, manifest, module_source=MODULE):
    """A manifest and the kernel module it names (unique per test: modules are cached)."""
    module = f"aot_manifest_kernels_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(module_source)
    path = tmp_path / "kernels.yaml"
    path.write_text(manifest.format(module=module))
    return str(path), module


def run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("manifest, line, problem", [
    ("version: 1\nkernels: [\n  - function: x:y\n", 3, "not valid YAML"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n  - : \n", None, ""),
    ("version: 1\noutptu: out\nkernels: []\n", 2, "unknown key 'outptu'"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signature: ['void()']\n", 4,
     "did you mean 'signatures'"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n", 3, "missing key 'signatures'"),
    ("kernels:\n  - function: {module}:scale\n", 1, "missing key 'version'"),
    ("version: 2\nkernels: []\n", 1, "version 2 is not supported"),
    ("version: 1\nversion: 1\nkernels: []\n", 2, "key 'version' appears twice"),
    ("version: 1\nkernels: []\n", 2, "kernels is empty"),
    ("version: 1\nkernels:\n  - function: scale\n    signatures: ['void()']\n", 3,
     "must be 'module:name'"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures:\n"
     "      - void(float32[::1], float32)\n      - void(flaot32[::1], float32)\n", 6,
     "bad signature 'void(flaot32[::1], float32)'"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1])']\n",
     4, "has 1 argument(s); {module}:scale takes 2 (x, factor)"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['int32(float32[::1], "
     "float32)']\n", 4, "returns int32"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    threads: [[0]]\n", 5, "1 to 3 positive integers"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    options: {{fastmath: maybe}}\n", 5, "fastmath must be true, false or a set of the fast-math flags"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    options: {{cache: true}}\n", 5, "unknown key 'cache'"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    shared_bytes: [-4]\n", 5, "shared_bytes[0] -4: give bytes"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    shared_bytes: [64, 64]\n", 5, "shared_bytes[1]: 64 is listed twice"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    shared_bytes: []\n", 5, "shared_bytes is empty"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    shared_bytes: 64\n", 5, "shared_bytes must be a list"),
    ("version: 1\nprofiles:\n  - name: full\n  - name: full\nkernels: []\n", 4,
     "profile 'full' is defined twice"),
    ("version: 1\ntarget_env: vulkan9.9\nkernels: []\n", 2, "unknown target environment"),
    ("version: 1\nprofiles:\n  - name: rte\n    float16_rte: true\nkernels: []\n", 4,
     "profiles[0].float16_rte needs float16: true"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures: ['void(float32[::1], "
     "float32)']\n    profiles: [tiny]\n", 5, "no profile named 'tiny'"),
    ("version: 1\nkernels:\n  - function: {module}:plain\n    signatures: ['void(float32[::1])']\n",
     3, "{module}:plain is a function, not an @nv.jit kernel: decorate it with @nv.jit"),
    ("version: 1\nkernels:\n  - function: {module}:missing\n    signatures: ['void()']\n", 3,
     "has no 'missing'"),
    ("version: 1\nkernels:\n  - function: no_such_module_here:k\n    signatures: ['void()']\n",
     3, "cannot import module 'no_such_module_here' of no_such_module_here:k: "
        "ModuleNotFoundError"),
    ("version: 1\nkernels:\n  - function: {module}:scale\n    signatures:\n"
     "      - void(float32[::1], float32)\n  - function: {module}:scale\n    signatures:\n"
     "      - void(float32[::1], float32)\n", 8, "duplicate entry: {module}:scale with signature "
     "'void(float32[::1], float32)', threads [256, 1, 1] and profile full is already listed "
     "at line 5"),
])
def test_manifest_errors_name_file_line_and_problem(tmp_path, capsys, manifest, line, problem):
    path, module = write(tmp_path, manifest)
    status, out, err = run(capsys, "build", path)
    assert status == 2
    assert "Traceback" not in err
    if line is not None:
        assert err.startswith(f"error: {path}:{line}: "), err
        assert problem.format(module=module) in err
    else:
        assert err.startswith(f"error: {path}:")
    assert not (tmp_path / "out").exists()


def test_import_error_of_the_module_is_reported(tmp_path, capsys):
    source = "raise ImportError('libfoo.so.1: cannot open shared object file')\n"
    path, module = write(tmp_path, GOOD, module_source=source)
    status, _, err = run(capsys, "build", path)
    assert status == 2
    assert err.startswith(f"error: {path}:4: cannot import module '{module}'")
    assert "ImportError: libfoo.so.1: cannot open shared object file" in err


def test_unwritable_output_directory(tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a directory")
    path, _ = write(tmp_path, GOOD.replace("output: out", "output: a_file/out"))
    status, _, err = run(capsys, "build", path)
    assert status == 2
    assert err.startswith(f"error: {path}:2: cannot write the output directory")


def test_output_that_is_not_an_aot_directory_is_not_replaced(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    path, _ = write(tmp_path, GOOD)
    status, _, err = run(capsys, "build", path)
    assert status == 2
    assert "is a directory that is not an AOT directory" in err
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_missing_manifest_and_bad_usage(tmp_path, capsys):
    status, _, err = run(capsys, "build", str(tmp_path / "nope.yaml"))
    assert status == 2 and "cannot read the manifest" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["build"])
    assert exit_info.value.code == 2
    path, _ = write(tmp_path, GOOD)
    status, _, err = run(capsys, "build", path, "-j", "0")
    assert status == 2 and "at least 1" in err
    status, _, err = run(capsys, "verify", str(tmp_path / "absent"))
    assert status == 2 and "is not a directory" in err


def test_command_line_prints_no_traceback(tmp_path):
    path, _ = write(tmp_path, "version: 1\nkernels:\n  - function: nowhere_module_x:k\n"
                              "    signatures: ['void()']\n")
    result = run_python("-m", "numba_vulkan.aot", "build", path, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path}:3: cannot import module 'nowhere_module_x'")
    assert "Traceback" not in result.stderr


def test_recorded_launches_with_dynamic_shared_memory_list_their_sizes(tmp_path):
    import yaml
    from numba_vulkan.aot.build import manifest
    path = tmp_path / "recorded.yaml"
    record = {"function": "app:kern", "signature": "void(float32[::1])", "threads": [32, 1, 1]}
    added, _ = manifest.merge_records(str(path), [record, dict(record, shared_bytes=128),
                                                  dict(record, shared_bytes=128)])
    kernel, = yaml.safe_load(path.read_text())["kernels"]
    assert added == 2 and kernel["shared_bytes"] == [0, 128]
    assert kernel["threads"] == [[32]]


def test_record_lists_only_what_ran(tmp_path):
    """A recorded kernel gets the shape and size it launched with, not the
    defaults besides (which would double the modules built and shipped)."""
    import yaml
    from numba_vulkan.aot.build import manifest
    path = tmp_path / "recorded.yaml"
    manifest.merge_records(str(path), [
        {"function": "app:blur", "signature": "void(float32[:, ::1])", "threads": [16, 16, 1],
         "shared_bytes": 1024},
        {"function": "app:scale", "signature": "void(float32[::1])", "threads": [256, 1, 1]}])
    blur, scale = yaml.safe_load(path.read_text())["kernels"]
    assert blur["threads"] == [[16, 16]] and blur["shared_bytes"] == [1024]
    assert "threads" not in scale and "shared_bytes" not in scale


def test_a_reader_that_stops_early_ends_a_command_quietly():
    """`... | head`: the command ends without a BrokenPipeError traceback."""
    code = ("from numba_vulkan.base import cli\n"
            "def main():\n"
            "    for _ in range(20000):\n"
            "        print('x' * 100)\n"
            "    return 0\n"
            "cli.run(main)\n")
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=child_env())
    writer.stdout.readline()
    writer.stdout.close()
    assert writer.wait(timeout=60) == 1
    assert writer.stderr.read() == b""


TUPLE_MODULE = '''
import numba_vulkan as nv

@nv.jit
def sized(out, shape):
    i = nv.global_id(0)
    if i < shape[0] * shape[1]:
        out[i] = shape[0] + 0.5 * shape[1]
'''


def test_a_tuple_signature_builds_and_its_entry_serves_a_launch(tmp_path, capsys):
    from numba_vulkan.aot.loader import lookup
    path, module = write(tmp_path, "version: 1\noutput: out\nkernels:\n"
                         "  - function: {module}:sized\n"
                         "    signatures: ['void(float64[::1], UniTuple(int64, 2))']\n"
                         "    threads: [[64]]\n", TUPLE_MODULE)
    status, out, err = run(capsys, "build", path)
    assert status == 0, err
    status, out, _ = run(capsys, "list", str(tmp_path / "out"))
    assert "void(float64[::1], UniTuple(int64, 2))" in out
    kernel = __import__(module).sized
    label = lookup.register(str(tmp_path / "out"))
    try:
        found = lookup.find(kernel, ("float64[1d,C]", "(int64,int64)"), (64, 1, 1),
                            nv_target(), strict=True)
        assert found is not None and found.signature == ("float64[1d,C]", "(int64,int64)")
    finally:
        lookup.unregister(label)


def nv_target():
    from numba_vulkan.runtime.device import current_device
    return current_device().target
