"""What must come from the system: one list (base/system.py), the same in
docs/install.md, named by the errors and reported by ``python -m numba_vulkan info``."""

import logging
import os
import re

import pytest

import numba_vulkan
from numba_vulkan.base import system
from numba_vulkan.base.errors import ToolError
from numba_vulkan.spirv import tools
from tests.helpers import ROOT, run_python


def _install_doc():
    with open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8") as f:
        return f.read()


def test_docs_install_lists_every_part_as_the_code_does():
    doc = _install_doc()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 + len(system.PLATFORMS):
            rows[cells[0].replace("`", "")] = cells[2:]
    for part in system.PARTS.values():
        assert part.title in rows, part.title
        for platform, cell in zip(system.PLATFORMS, rows[part.title]):
            # The doc marks commands up as code; the text is the same.
            assert cell.replace("`", "") == part.install[platform], (part.title, platform)


def test_a_missing_spirv_val_names_the_part_and_every_platform(monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_SPIRV_VAL", "no-such-spirv-val")
    with pytest.raises(ToolError) as info:
        tools.validate(b"\x03\x02\x23\x07", "vulkan1.2")
    message = str(info.value)
    assert "no-such-spirv-val was not found" in message
    for platform in system.PLATFORMS:
        assert f"{platform}: " in message
    assert "docs/install.md" in message and "[tools]" in message


def test_info_reports_each_part_and_what_is_missing():
    result = run_python("-m", "numba_vulkan", "info",
                        env={"NUMBA_VULKAN_SPIRV_VAL": "no-such-spirv-val",
                             "NUMBA_VULKAN_LIBCLC": "/no/such/nvptx64--.bc"})
    out = result.stdout
    assert f"numba_vulkan {numba_vulkan.__version__}, Python " in out
    assert re.search(r"the Vulkan loader \(libvulkan\): found", out), out
    assert re.search(r"a Vulkan driver: \d+ device\(s\)", out), out
    assert "spirv-val (SPIRV-Tools): MISSING (no-such-spirv-val is not on PATH)" in out
    assert "libclc (its nvptx64--.bc): MISSING (NUMBA_VULKAN_LIBCLC names " in out
    assert "Fedora: dnf install libclc" in out


def test_the_version_is_the_wheels():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert 'version = {attr = "numba_vulkan.__version__"}' in f.read()
    assert re.fullmatch(r"\d+\.\d+\.\d+", numba_vulkan.__version__)


def test_the_logger_says_where_a_kernel_came_from(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    import numpy as np
    import numba_vulkan as nv

    @nv.jit
    def logged(x):
        i = nv.global_id(0)
        if i < x.shape[0]:
            x[i] = x[i] + 3

    with caplog.at_level(logging.DEBUG, logger="numba_vulkan"):
        x = np.zeros(4, np.int32)
        logged.forall(4)(x)
    lines = [r.getMessage() for r in caplog.records if r.name == "numba_vulkan"]
    assert any(line.startswith("compiler compiled ") and "logged" in line
               and "threads " in line for line in lines), lines
    assert any(line.startswith("cache ") and " stored " in line for line in lines), lines
