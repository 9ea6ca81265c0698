#!/usr/bin/env bash
# The smoke set on every Python other than the .venv's: our wheel installed
# with its dependencies into a venv per version, then compile and launch,
# the kernel cache across processes, an AOT build run strict, an app wheel
# built on the .venv's Python run strict on each version, numba_vulkan.cuda.
#
#   scripts/smoke.sh                      # every python3.10-3.13 found
#   SMOKE_PYTHONS="/usr/bin/python3.12" scripts/smoke.sh
#
# Venvs are kept in $SMOKE_VENVS (default /tmp/numba-vulkan-smoke) and reused
# while the wheel's dependencies are unchanged. Prints each version's time.
set -euo pipefail
cd "$(dirname "$0")/.."
main=${SMOKE_MAIN_PYTHON:-.venv/bin/python}
venvs=${SMOKE_VENVS:-/tmp/numba-vulkan-smoke}
tests=(tests/base/test_system.py tests/store/test_codehash.py tests/aot/test_aot_app.py
       "tests/store/test_kernelcache_processes.py::test_warm_functions_hit_does_not_run_numba"
       "tests/cuda/test_cuda_compat.py::test_vector_add_with_device_arrays"
       "tests/cuda/test_cuda_compat.py::test_shared_tile_reduction")
mine=$($main -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -z "${SMOKE_PYTHONS:-}" ]; then
    SMOKE_PYTHONS=""
    for v in 3.10 3.11 3.12 3.13; do
        [ "$v" = "$mine" ] && continue
        for found in $(ls -d "$HOME"/.pyenv/versions/"$v".*/bin/python"$v" 2>/dev/null) \
                     "$(command -v "python$v" || true)"; do
            # pyenv's shims exist for versions that are not selected: run it.
            if [ -n "$found" ] && "$found" -c "" 2>/dev/null; then
                SMOKE_PYTHONS="$SMOKE_PYTHONS $found"
                break
            fi
        done
    done
fi
if [ -z "${SMOKE_PYTHONS// }" ]; then
    echo "smoke: no Python other than $mine found"
    exit 0
fi
mkdir -p "$venvs"
wheel_dir=$(mktemp -d)
trap 'rm -rf "$wheel_dir"' EXIT
start=$SECONDS
$main -m pip wheel --no-deps --no-build-isolation -q -w "$wheel_dir" . >/dev/null
echo "smoke: our wheel built in $((SECONDS - start)) s: $(ls "$wheel_dir")"
others=()
for py in $SMOKE_PYTHONS; do
    version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    venv="$venvs/$version"
    start=$SECONDS
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    # Our wheel brings its dependencies; pytest runs the tests. The source
    # tree comes first on the path, so that the tests test this checkout.
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel_dir"/*.whl pytest setuptools==80.9.0 wheel \
        >"$venv/pip.log" 2>&1 || { cat "$venv/pip.log"; exit 1; }
    installed=$((SECONDS - start))
    PYTHONPATH=$PWD "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
    echo "smoke: Python $version: installed in $installed s, tested in $((SECONDS - start - installed)) s"
    others+=("$venv/bin/python")
done
# The app wheel built on this Python, run strict on each of the others.
start=$SECONDS
SMOKE_OTHER_PYTHONS=$(IFS=:; echo "${others[*]}") PYTHONPATH=$PWD \
    $main -m pytest -q -p no:cacheprovider tests/aot/test_aot_app.py \
    -k test_a_wheel_built_on_one_python_runs_strict_on_another
echo "smoke: the app wheel of Python $mine on ${#others[@]} other version(s): $((SECONDS - start)) s"
