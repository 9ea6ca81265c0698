"""Cluster builds (``aot build --scheduler``) that a cluster cannot fool or
hang (issue 25): a long-lived worker's stale code fails the build naming
the kernel; a scheduler that never answers, or has no workers, fails it
within the timeout; a malformed address fails at once. Each cluster is a
Dask ``LocalCluster`` on 127.0.0.1 in a child process of the test's own,
stopped by its pid."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import child_env, run_python

distributed = pytest.importorskip("distributed")

_KERNELS = '''\
import numba_vulkan as nv


@nv.jit
def scale(x, a):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * a + {constant}
'''

_MANIFEST = """\
version: 1
output: out
target_env: vulkan1.2
profiles:
  - name: full
kernels:
  - function: cl_kernels:scale
    signatures: ["void(float32[::1], float32)"]
"""

_CLUSTER = '''\
import json, signal, sys, time
import distributed

if __name__ == "__main__":
    cluster = distributed.LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       scheduler_port=0, host="127.0.0.1")
    pids = [w.process.pid for w in cluster.workers.values()]
    print(json.dumps({"address": cluster.scheduler_address, "pids": pids}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (cluster.close(timeout=10), sys.exit(0)))
    time.sleep(600)
'''

#: What the tests wait for instead of CLUSTER_TIMEOUT's 30 seconds.
_SHORT = 4


class Cluster:
    """A LocalCluster in a child process; its scheduler address and worker pids."""

    def __init__(self, directory, workers):
        script = directory / "cl_cluster.py"
        script.write_text(_CLUSTER)
        self.process = subprocess.Popen([sys.executable, str(script), str(workers)],
                                        cwd=directory, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True,
                                        env=child_env(path=[directory]))
        line = self.process.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError("the LocalCluster did not start")
        started = json.loads(line)
        self.address, self.pids = started["address"], started["pids"]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def project(tmp_path):
    (tmp_path / "cl_kernels.py").write_text(_KERNELS.format(constant=1))
    (tmp_path / "kernels.yaml").write_text(_MANIFEST)
    return tmp_path


def _build(project, address, timeout=None, limit=120):
    """``aot build --scheduler`` in a child process; with ``timeout`` the
    cluster's timeout is that many seconds instead of 30."""
    code = ("import sys\n"
            "from numba_vulkan.aot.build import cluster\n"
            f"cluster.CLUSTER_TIMEOUT = {timeout or 'cluster.CLUSTER_TIMEOUT'}\n"
            "from numba_vulkan.aot.__main__ import main\n"
            f"sys.exit(main(['build', 'kernels.yaml', '--scheduler', {address!r}]))\n")
    start = time.monotonic()
    done = run_python("-c", code, cwd=project, check=False, timeout=limit,
                      env={"NUMBA_VULKAN_CACHE_DIR": project / "cache",
                           "NUMBA_VULKAN_REMOTE_CACHE": None, "PYTHONDONTWRITEBYTECODE": "1"})
    assert "Traceback" not in done.stderr, done.stderr
    return done, time.monotonic() - start


def test_a_worker_with_stale_code_fails_the_build_naming_the_kernel(project):
    cluster = Cluster(project, 1)
    try:
        done, _ = _build(project, cluster.address)
        assert done.returncode == 0, done.stderr
        # The worker imported cl_kernels and keeps it; the build has the edit.
        (project / "cl_kernels.py").write_text(_KERNELS.format(constant=2))
        done, _ = _build(project, cluster.address)
    finally:
        cluster.stop()
    assert done.returncode == 1
    assert "kernel cl_kernels:scale: the cluster worker compiled other code" in done.stderr
    assert "built 0" in done.stderr


def test_a_malformed_address_fails_at_once(project):
    done, seconds = _build(project, "tcp://no such host")
    assert done.returncode == 2
    assert "is not a Dask scheduler address" in done.stderr
    assert seconds < 30


def test_a_scheduler_that_accepts_and_never_answers(project):
    listener = socket.create_server(("127.0.0.1", 0))
    held, stopped = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stopped.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        done, seconds = _build(project, f"tcp://127.0.0.1:{listener.getsockname()[1]}",
                               timeout=_SHORT)
    finally:
        stopped.set()
        listener.close()
        for connection in held:
            connection.close()
    assert done.returncode == 1
    assert f"no answer within {_SHORT} s" in done.stderr
    # Starting Python and importing the kernels, then the timeout.
    assert seconds < _SHORT + 25


def test_a_cluster_without_workers_fails_the_build(project):
    cluster = Cluster(project, 0)
    try:
        done, seconds = _build(project, cluster.address, timeout=_SHORT)
    finally:
        cluster.stop()
    assert done.returncode == 1
    assert f"has had no workers for {_SHORT} s with 1 module(s) left" in done.stderr


def test_a_scheduler_that_is_gone(project):
    cluster = Cluster(project, 0)
    address = cluster.address
    cluster.stop()
    done, _ = _build(project, address, timeout=_SHORT)
    assert done.returncode == 1
    assert "cannot reach the Dask scheduler" in done.stderr
