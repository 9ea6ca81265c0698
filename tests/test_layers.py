"""The import contract: every module of numba_vulkan imports only from its own
layer and the layers below it, and no two modules import each other, however
indirectly.

Every import statement counts, those inside functions too (they run as
surely as the others, only later). A package's ``__init__`` that Python runs
before one of its modules is not counted as imported by that module.
"""

import ast
import os

import numba_vulkan

PACKAGE = os.path.dirname(numba_vulkan.__file__)

#: What each layer may import besides itself, and why it sits where it does.
LAYERS = {
    "base": (set(),
             "errors, settings, the target description, the ABI: what every layer shares"),
    "spirv": ({"base"},
              "the one reader of SPIR-V binaries and its opcode table"),
    "llvmir": ({"base", "spirv"},
               "the LLVM IR model; its placeholder calls name SPIR-V opcodes"),
    "frontend": ({"base", "spirv", "llvmir"},
                 "Numba's typing and lowering, Python to LLVM IR; beside codegen, not on it"),
    "codegen": ({"base", "spirv", "llvmir"},
                "the passes from LLVM IR to SPIR-V; beside the frontend, not on it"),
    "store": ({"base", "spirv"},
              "the kernel cache: Numba-free, so that shipped apps can read it"),
    "aot.loader": ({"base", "spirv", "store"},
                   "finds shipped kernels at run time: Numba-free, keyed like the store"),
    "runtime": ({"base", "spirv"},
                "Vulkan only: devices, memory, launches; never the compiler"),
    "compiler": ({"base", "spirv", "llvmir", "frontend", "codegen"},
                 "the stage table over the frontend and codegen; it reads and writes "
                 "no cache (the compile service in api does)"),
    "api": ({"base", "spirv", "frontend", "compiler", "store", "aot.loader", "runtime"},
            "nv.jit and the ufuncs: compile through the compiler, launch on the runtime"),
    "cuda": ({"base", "spirv", "frontend", "runtime", "api"},
             "numba.cuda's names over the api"),
    "aot.build": ({"base", "spirv", "llvmir", "frontend", "codegen", "compiler", "store",
                   "aot.loader", "api"},
                  "compiles a manifest's @nv.jit kernels into a directory the loader reads"),
    "aot": ({"base", "spirv", "store", "aot.loader", "aot.build"},
            "nv.aot (the loader's functions) and the `python -m numba_vulkan.aot` command"),
    "top": ({"base", "spirv", "llvmir", "frontend", "codegen", "store", "aot.loader",
             "runtime", "compiler", "api", "cuda", "aot.build", "aot"},
            "import numba_vulkan, python -m numba_vulkan and the public facades "
            "numba_vulkan.kernelcache and numba_vulkan.libclc"),
}

#: Where Numba may be imported: an app that ships its kernels never loads it.
#: The API imports it only inside functions (registering Numba's ``vulkan``
#: ufunc target, typing at a compile), never when ``numba_vulkan`` loads.
NUMBA_LAYERS = {"frontend", "codegen", "compiler", "cuda", "aot.build", "api"}
#: Where the Vulkan bindings may be imported: nothing else touches a device.
VULKAN_LAYERS = {"runtime"}


def _modules():
    """``{module name: path}`` of every module of the package."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path[:-3], os.path.dirname(PACKAGE)).split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer(module):
    """The layer of a module of the package."""
    parts = module.split(".")[1:]
    if len(parts) <= 1 and parts[:1] in ([], ["__main__"], ["kernelcache"], ["libclc"]):
        return "top"
    if parts[0] == "aot" and len(parts) > 1 and parts[1] in ("loader", "build"):
        return f"aot.{parts[1]}"
    return parts[0]


def _imported(module, path, node):
    """The names a statement imports, as absolute module or attribute paths."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{alias.name}" for alias in node.names]


def imports():
    """``[(module, line, imported name)]`` for every import statement of the
    package, at any depth of its modules."""
    found = []
    for module, path in sorted(MODULES.items()):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found += [(module, node.lineno, name) for name in _imported(module, path, node)]
    return found


def _own(name):
    """The package module ``name`` (a module, or an attribute of one) is in, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name if name.startswith("numba_vulkan") else None


def edges():
    """``{(importer, imported module): first line}`` within the package."""
    found = {}
    for module, line, name in imports():
        target = _own(name)
        if target is not None and target != module:
            found.setdefault((module, target), line)
    return found


def _cycles(graph):
    """The strongly connected components of more than one node of ``graph``
    (``{node: set of nodes}``), each as a sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_every_module_is_in_a_layer_of_the_table():
    unknown = sorted({layer(m) for m in MODULES} - set(LAYERS))
    assert not unknown, f"layers missing from LAYERS: {unknown}"
    assert layer("numba_vulkan.aot.loader.lookup") == "aot.loader"
    assert layer("numba_vulkan.kernelcache") == "top"
    assert layer("numba_vulkan.spirv.opcodes") == "spirv"


def test_the_layers_are_ordered():
    """The table allows no cycle, so that imports it allows cannot make one
    between layers, and it names only layers it has."""
    graph = {name: allowed for name, (allowed, _) in LAYERS.items()}
    assert all(allowed <= set(LAYERS) for allowed in graph.values())
    assert _cycles(graph) == []
    assert all(name not in allowed for name, allowed in graph.items())
    # Siblings: neither the frontend nor codegen builds on the other.
    assert "codegen" not in graph["frontend"] and "frontend" not in graph["codegen"]


def test_no_import_goes_against_the_layers():
    wrong = [f"{MODULES[a]}:{line}: {layer(a)} imports {b} ({layer(b)})"
             for (a, b), line in sorted(edges().items())
             if layer(a) != layer(b) and layer(b) not in LAYERS[layer(a)][0]]
    assert wrong == []


def test_no_modules_import_each_other():
    graph = {}
    for a, b in edges():
        graph.setdefault(a, set()).add(b)
    cycles = _cycles(graph)
    lines = edges()
    assert cycles == [], "\n".join(
        " <-> ".join(c) + ": " + ", ".join(f"{a}:{lines[a, b]} -> {b}" for a in c
                                         for b in sorted(graph[a]) if b in c)
        for c in cycles)


def test_numba_and_vulkan_are_imported_only_where_allowed():
    wrong = []
    for module, line, name in imports():
        top = name.split(".")[0]
        if top == "numba" and layer(module) not in NUMBA_LAYERS \
                or top == "vulkan" and layer(module) not in VULKAN_LAYERS:
            wrong.append(f"{MODULES[module]}:{line}: {name}")
    assert wrong == []


def test_the_contract_sees_imports_in_functions_and_relative_ones():
    """The parsing the tests above rely on finds an import anywhere in a
    module, resolves a relative one, and tells a module from its attribute."""
    source = ("def f():\n"
              "    if True:\n"
              "        from numba_vulkan.runtime.device import current_device\n"
              "    from . import opcodes\n"
              "    from .. import base\n")
    found = sorted(name for node in ast.walk(ast.parse(source))
                   if isinstance(node, (ast.Import, ast.ImportFrom))
                   for name in _imported("numba_vulkan.spirv.binary", "spirv/binary.py", node))
    assert found == ["numba_vulkan.base", "numba_vulkan.runtime.device.current_device",
                     "numba_vulkan.spirv.opcodes"]
    assert [_own(name) for name in found] == ["numba_vulkan.base", "numba_vulkan.runtime.device",
                                              "numba_vulkan.spirv.opcodes"]
    # A wrong-way import and a cycle, as the tests above would see them.
    assert "runtime" not in LAYERS["codegen"][0]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
