"""The AOT loader is a layer of its own: below the dispatcher, free of Numba and of the build."""

import ast
import os

import pytest

from tests.helpers import ROOT, run_python

LOADER = ("numba_vulkan.aot.loader", "numba_vulkan.aot.loader.lookup",
          "numba_vulkan.aot.loader.index", "numba_vulkan.aot.loader.signing",
          "numba_vulkan.store")
#: What the loader must not import, directly, lazily or through what it imports.
FORBIDDEN = ("numba", "llvmlite", "vulkan", "yaml", "numba_vulkan.api.dispatcher",
             "numba_vulkan.compiler", "numba_vulkan.runtime", "numba_vulkan.codegen",
             "numba_vulkan.frontend",
             "numba_vulkan.aot.build.builder", "numba_vulkan.aot.build.manifest", "numba_vulkan.aot.build.signing",
             "numba_vulkan.aot.__main__")


def _forbidden(name):
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


@pytest.mark.parametrize("module", LOADER)
def test_importing_the_loader_imports_no_numba_and_no_build(module):
    script = (f"import sys, {module}\n"
              "print(sorted(m for m in sys.modules if m in ('numba', 'llvmlite', 'yaml',"
              " 'cryptography') or m.startswith(('numba.', 'numba_vulkan.aot.build.builder',"
              " 'numba_vulkan.aot.build.manifest', 'numba_vulkan.aot.build.signing',"
              " 'numba_vulkan.aot.__main__', 'numba_vulkan.compiler'))))\n")
    result = run_python("-c", script, cwd=ROOT)
    assert result.stdout.strip() == "[]", result.stdout


def _path(module):
    path = os.path.join(ROOT, *module.split("."))
    if os.path.isdir(path):
        return os.path.join(path, "__init__.py")
    return path + ".py" if os.path.exists(path + ".py") else None


def _imports(module):
    """Every module ``module``'s source imports, at the top or inside functions."""
    path = _path(module)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            submodules = {f"{base}.{a.name}" for a in node.names if _path(f"{base}.{a.name}")}
            found.update(submodules or {base})
    return found


def test_nothing_the_loader_reaches_imports_numba_the_dispatcher_or_the_build():
    # Also lazy imports inside functions, which a fresh import does not run.
    reached, todo, via = set(), list(LOADER), {}
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        if module.startswith("numba_vulkan") and _path(module):
            for name in _imports(module):
                via.setdefault(name, module)
                todo.append(name)
    bad = sorted(f"{m} (imported by {via[m]})" for m in reached if _forbidden(m))
    assert not bad, bad
    # The test sees the loader's imports at all.
    assert {"numba_vulkan.store.codehash", "numba_vulkan.spirv.modulecheck"} <= reached

