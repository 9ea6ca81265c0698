#!/usr/bin/env bash
# Install everything numba_vulkan needs on Debian 12, idempotently:
# the Vulkan loader, Mesa's lavapipe (a Vulkan driver that runs on the CPU),
# SPIRV-Tools, libclc, redis-server (the tests start their own on a free port),
# and a virtual environment .venv with pinned packages.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
PACKAGES="libvulkan1 mesa-vulkan-drivers vulkan-tools spirv-tools libclc-22 python3-venv redis-server"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
pip_quietly() {
    .venv/bin/python -m pip "$@" >.venv/pip.log 2>&1 || { cat .venv/pip.log; exit 1; }
}
if ! cmp -s requirements.txt .venv/.requirements-installed; then
    pip_quietly install -q -r requirements.txt
    cp requirements.txt .venv/.requirements-installed
fi
if ! .venv/bin/python -m pip show -q vulkan-numba-kernels >/dev/null 2>&1; then
    pip_quietly install -q --no-deps -e .
fi
