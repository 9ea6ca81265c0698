"""The kernel cache's remote tier against a real redis-server.

The tests start ``redis-server`` on 127.0.0.1, on a free port, with a
temporary directory, and stop it. Each "machine" is a process with a cache
directory of its own; what one compiled, another must get from the server
without compiling (its local stores count its compiles). A server that is
killed, a closed port, one behind a proxy that delays every reply, and
values overwritten with garbage or with another entry must cost at most
one timeout and never a wrong result.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from numba_vulkan import store as kernelcache
from numba_vulkan.store import lookup as store_lookup
from numba_vulkan.store import remote as remotecache
from numba_vulkan.store import counters, entry as entries, toolchain
from tests.helpers import run_python

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server is not installed (scripts/setup.sh "
                                       "installs Debian's redis-server)")

_KERNELS = '''\
import numba_vulkan as nv


@nv.jit(cache=True)
def triad(a, x, y, z):
    i = nv.global_id(0)
    if i < x.shape[0]:
        z[i] = x[i] + a * y[i]


@nv.jit
def square(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = x[i] * x[i] - 1.0
'''

_AOT_KERNELS = '''\
import numba_vulkan as nv


@nv.jit
def scale(x, a):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * a + 1


@nv.jit
def add(x, y, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] + y[i]
'''

_MANIFEST = """\
version: 1
output: out
target_env: vulkan1.2
profiles:
  - name: full
kernels:
  - function: rc_aot:scale
    signatures: ["void(float32[::1], float32)", "void(float64[::1], float64)"]
  - function: rc_aot:add
    signatures: ["void(float32[::1], float32[::1], float32[::1])"]
"""

_KILL = '''\
import os
import signal
import socket
import time


def kill(pid, port):
    """Kill the server and return once its port refuses connections: what
    follows meets a dead server, however busy the machine."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("the killed server still accepts connections")
'''

_RUNNER = '''\
import json
import os
import sys

import numpy as np

import numba_vulkan as nv
from numba_vulkan import store as kernelcache
from rc_kill import kill
import rc_kernels as k

rng = np.random.default_rng(7)
x, y = rng.random(200, dtype=np.float32), rng.random(200, dtype=np.float32)
z = np.zeros_like(x)
k.triad.forall(x.size)(np.float32(2.0), x, y, z)
errors = {"triad": float(np.max(np.abs(z - (x + np.float32(2.0) * y))))}
if os.environ.get("RC_KILL"):
    # The server dies between two compiles of this process.
    kill(int(os.environ["RC_KILL"]), int(os.environ["RC_PORT"]))
x64 = rng.random(200)
out = np.zeros_like(x64)
k.square.forall(x64.size)(x64, out)
errors["square"] = float(np.max(np.abs(out - (x64 * x64 - 1.0))))
print(json.dumps({"errors": errors, "stats": kernelcache.stats()}))
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A redis-server of the test's own, on 127.0.0.1."""

    def __init__(self, directory, *options, password=None):
        self.port = _free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(directory), "--save", "", "--appendonly", "no", "--daemonize", "no",
             *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        import redis
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5,
                                  password=password)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)

    def keys(self, tier):
        return sorted(self.client.scan_iter(match=f"numba_vulkan:*:{tier}:*"))

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def team_key(tmp_path_factory):
    """Every process of these tests holds the team key (docs/remote.md)."""
    path = tmp_path_factory.mktemp("key") / "team.key"
    path.write_text("t" * 64)
    path.chmod(0o600)
    before = os.environ.get("NUMBA_VULKAN_REMOTE_KEY")
    os.environ["NUMBA_VULKAN_REMOTE_KEY"] = str(path)
    yield path
    if before is None:
        os.environ.pop("NUMBA_VULKAN_REMOTE_KEY")
    else:
        os.environ["NUMBA_VULKAN_REMOTE_KEY"] = before


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("redis"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    directory = tmp_path_factory.mktemp("rc_project")
    (directory / "rc_kernels.py").write_text(_KERNELS)
    (directory / "rc_run.py").write_text(_RUNNER)
    (directory / "rc_kill.py").write_text(_KILL)
    (directory / "rc_killing_build.py").write_text(_KILLING_BUILD)
    (directory / "rc_aot.py").write_text(_AOT_KERNELS)
    (directory / "kernels.yaml").write_text(_MANIFEST)
    return directory


def _own_cache(cache):
    """A child's settings for a cache directory of its own."""
    return {"NUMBA_VULKAN_CACHE_DIR": cache, "PYTHONDONTWRITEBYTECODE": "1"}


def _machine(project, cache, remote, **env):
    """Run the kernels as another machine would: a process with its own cache."""
    start = time.monotonic()
    done = run_python("rc_run.py", cwd=project, timeout=300,
                      env=dict(_own_cache(cache), NUMBA_VULKAN_CACHE=None,
                               NUMBA_VULKAN_REMOTE_CACHE=remote, **env))
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["seconds"] = time.monotonic() - start
    report["stderr"] = done.stderr
    for name, error in report["errors"].items():
        assert error < 1e-5, (name, error)
    return report


def _compiles(report):
    """Modules the code generator built, and cache=True kernels Numba compiled."""
    return report["stats"]["kernels"]["stores"] + report["stats"]["functions"]["stores"]


@pytest.fixture(scope="module")
def machine_a(server, project, tmp_path_factory):
    """Machine A compiled both kernels and sent them to the server."""
    server.client.flushdb()
    return _machine(project, tmp_path_factory.mktemp("cache_a"), server.url)


def test_a_second_machine_gets_the_kernels_without_compiling(server, project, machine_a,
                                                             tmp_path):
    # Two modules, and the cache=True kernel whole.
    assert _compiles(machine_a) == 3
    assert machine_a["stats"]["remote"]["misses"] == 3
    # Sent after the report, at exit.
    assert len(server.keys("kernels")) == 2 and len(server.keys("functions")) == 1
    b = _machine(project, tmp_path / "b", server.url)
    assert _compiles(b) == 0
    remote = b["stats"]["remote"]
    assert remote["hits"] == 2 and remote["errors"] == 0 and remote["rejected"] == 0
    assert b["stats"]["functions"]["misses"] == 1 and b["stats"]["kernels"]["misses"] == 1
    # The hits were written to B's disk: a third run needs no server.
    assert len(list((tmp_path / "b" / "kernels").glob("*.entry"))) == 1
    assert len(list((tmp_path / "b" / "functions").glob("*.entry"))) == 1
    again = _machine(project, tmp_path / "b", f"redis://127.0.0.1:{_free_port()}/0")
    assert _compiles(again) == 0
    assert not any(again["stats"]["remote"].values()), again["stats"]["remote"]
    info = run_python("-m", "numba_vulkan", "cache", "info", timeout=60,
                      env={"NUMBA_VULKAN_CACHE_DIR": tmp_path / "b",
                           "NUMBA_VULKAN_REMOTE_CACHE": server.url})
    assert f"remote: {server.url}: reachable, " in info.stdout
    assert "  2 hits, 0 misses, 0 rejected: hit rate 100%; 0 errors" in info.stdout


def _clone(project, clone):
    """Another checkout of the same files: another path, other times."""
    shutil.copytree(project, clone)
    for path in clone.iterdir():
        os.utime(path, ns=(10**18, 10**18))


def test_another_checkout_gets_cache_true_kernels_from_the_server(server, project, machine_a,
                                                                  tmp_path):
    clone = tmp_path / "clone"
    _clone(project, clone)
    before = set(server.keys("functions"))
    b = _machine(clone, tmp_path / "b", server.url)
    # functions/ entries go to the server under a name of the files' content,
    # kernels/ ones under Numba's IR: the checkout changes neither.
    assert _compiles(b) == 0
    assert b["stats"]["remote"]["hits"] == 2 and b["stats"]["remote"]["rejected"] == 0
    assert set(server.keys("functions")) == before
    # Kept on B's disk under B's own (local) name.
    assert len(list((tmp_path / "b" / "functions").glob("*.entry"))) == 1
    again = _machine(clone, tmp_path / "b", f"redis://127.0.0.1:{_free_port()}/0")
    assert _compiles(again) == 0 and again["stats"]["functions"]["hits"] == 1


_CHECKED = '''\
import numba_vulkan as nv


@nv.jit(cache=True, error_model="python")
def root(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        if x[i] < 0:
            raise ValueError("negative input")
        y[i] = x[i] ** 0.5
'''


def test_an_error_of_a_kernel_from_another_checkout_names_this_ones_file(tmp_path,
                                                                         monkeypatch):
    import numpy as np
    first, clone = tmp_path / "first", tmp_path / "clone"
    first.mkdir()
    (first / "rc_checked.py").write_text(_CHECKED)
    _clone(first, clone)
    # A server of its own: the other tests count machine A's entries.
    server = Server(tmp_path / "redis")
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", server.url)
    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, dtype=np.float32)
    negative = x - 4
    remotecache.forget()
    try:
        for directory in (first, clone):
            # Each a machine of its own: a cache directory of its own, the
            # module imported afresh from its checkout.
            monkeypatch.setenv("NUMBA_VULKAN_CACHE_DIR", str(tmp_path / f"cache_{directory.name}"))
            kernelcache.reset_stats()
            monkeypatch.syspath_prepend(str(directory))
            sys.modules.pop("rc_checked", None)
            import rc_checked
            rc_checked.root.forall(8)(x, y)
            np.testing.assert_allclose(y, np.sqrt(x), rtol=1e-6)
            with pytest.raises(ValueError, match="negative input") as raised:
                rc_checked.root.forall(8)(negative, y)
            assert f"{directory / 'rc_checked.py'}:9" in str(raised.value)
            assert remotecache.flush(10)
        # The clone compiled nothing: its kernel came from the server.
        stats = kernelcache.stats()
        assert stats["functions"]["stores"] == 0 and stats["kernels"]["misses"] == 0
        assert stats["remote"]["hits"] == 1
    finally:
        sys.modules.pop("rc_checked", None)
        remotecache.forget()
        kernelcache.reset_stats()
        server.stop()


def test_keys_are_namespaced_by_format_and_fingerprint(server, machine_a):
    fingerprint = kernelcache.fingerprint()
    for key in server.keys("kernels") + server.keys("functions"):
        prefix, version, found, tier, name = key.decode().split(":")
        assert (prefix, version, found) == ("numba_vulkan", str(entries.FORMAT_VERSION),
                                           fingerprint)
        assert tier in entries.SECTIONS and len(name) == 64


def test_garbage_and_swapped_values_are_misses(server, project, machine_a, tmp_path):
    (first, second), (function,) = server.keys("kernels"), server.keys("functions")
    good = {k: server.client.get(k) for k in (first, second, function)}
    try:
        # Entries under each other's keys, and garbage.
        server.client.set(first, good[second])
        server.client.set(second, good[function])
        server.client.set(function, good[function][:40] + b"\x00garbage" * 50)
        b = _machine(project, tmp_path / "b", server.url)
        assert _compiles(b) == 3
        assert b["stats"]["remote"]["rejected"] == 3 and b["stats"]["remote"]["hits"] == 0
        # B's stores replaced the bad values: the next machine hits.
        c = _machine(project, tmp_path / "c", server.url)
        assert _compiles(c) == 0 and c["stats"]["remote"]["hits"] == 2
        # A value changed inside its content fails its digest.
        for key in (first, second):
            value = server.client.get(key)
            server.client.set(key, value[:-8] + bytes(8))
        d = _machine(project, tmp_path / "d", server.url)
        assert d["stats"]["kernels"]["stores"] == 1
        assert d["stats"]["remote"]["rejected"] == 1
    finally:
        for k, v in good.items():
            server.client.set(k, v)


def test_a_closed_port_costs_one_failed_request(project, tmp_path):
    b = _machine(project, tmp_path / "b", f"redis://127.0.0.1:{_free_port()}/0")
    assert _compiles(b) == 3
    remote = b["stats"]["remote"]
    assert remote["errors"] == 1 and remote["hits"] == 0 and remote["dropped"] == 3
    assert remote["wait_ms"] < 1000 * remotecache.TIMEOUT + 500
    assert b["stderr"].count("CacheWarning") == 1, b["stderr"]
    assert "remote kernel cache" in b["stderr"] and "Connection refused" in b["stderr"]


class _SlowProxy:
    """Forwards to a server, holding each of its replies for ``delay`` seconds
    (the first piece of each: the rest follows at once)."""

    def __init__(self, port, delay):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port, self.upstream, self.delay = self.listener.getsockname()[1], port, delay
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, upstream, 0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.delay),
                             daemon=True).start()

    def _pipe(self, source, sink, delay):
        source.settimeout(0.2)
        last = 0.0
        try:
            while not self.stopped.is_set():
                try:
                    data = source.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                if delay and time.monotonic() - last > 0.05 and self.stopped.wait(delay):
                    break
                sink.sendall(data)
                last = time.monotonic()
        except OSError:
            pass
        finally:
            source.close()
            sink.close()

    def stop(self):
        self.stopped.set()
        self.listener.close()


@pytest.mark.parametrize("delay", [20, 0.7])
def test_a_slow_server_costs_one_timeout(server, project, machine_a, tmp_path, delay):
    # 20 s: the first request times out. 0.7 s: both lookups are answered,
    # and the tier is off after them, as a server this slow is not worth asking.
    proxy = _SlowProxy(server.port, delay=delay)
    try:
        b = _machine(project, tmp_path / "b", f"redis://127.0.0.1:{proxy.port}/0")
    finally:
        proxy.stop()
    remote = b["stats"]["remote"]
    assert remote["errors"] == 1
    if delay > remotecache.TIMEOUT:
        assert _compiles(b) == 3 and remote["hits"] == 0
        assert 1000 * remotecache.TIMEOUT - 100 <= remote["wait_ms"]
        assert remote["wait_ms"] <= 1000 * remotecache.TIMEOUT + 1000
        assert "no complete answer within" in b["stderr"] or "Timeout" in b["stderr"]
    else:
        assert _compiles(b) == 0 and remote["hits"] == 2
        assert 2000 * delay - 100 <= remote["wait_ms"] <= 2000 * remotecache.TIMEOUT
        assert "lookups in a row took" in b["stderr"]
    assert b["stderr"].count("CacheWarning") == 1, b["stderr"]
    # Every request waits at the proxy: the whole run took far less than 20 s a request.
    assert b["seconds"] < 20 + 60


def test_a_server_a_little_slow_on_every_lookup_costs_about_one_timeout(server, monkeypatch):
    # 0.3 s a lookup, less than the timeout, would cost that on every one.
    from numba_vulkan.base.errors import CacheWarning
    proxy = _SlowProxy(server.port, delay=0.3)
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", f"redis://127.0.0.1:{proxy.port}/0")
    remotecache.forget()
    counters.reset_stats()
    try:
        with pytest.warns(CacheWarning, match="lookups in a row took") as warned:
            for n in range(20):
                assert remotecache.get(f"numba_vulkan:test:missing:{n}", 100) is None
                # Work between lookups, as compiles are (the proxy holds
                # the first reply after a pause).
                time.sleep(0.06)
        counts = counters.stats()["remote"]
    finally:
        proxy.stop()
        remotecache.forget()
        counters.reset_stats()
    assert len(warned) == 1
    # Over a second after three or four lookups; the others did not ask.
    assert 3 <= counts["misses"] <= 4 and counts["errors"] == 1
    assert 1000 * remotecache.TIMEOUT <= counts["wait_ms"] <= 2000 * remotecache.TIMEOUT


def test_a_server_killed_between_two_compiles_of_a_process(project, tmp_path):
    dying = Server(tmp_path / "redis")
    try:
        b = _machine(project, tmp_path / "b", dying.url, RC_KILL=str(dying.process.pid),
                     RC_PORT=str(dying.port))
    finally:
        dying.stop()
    # Both kernels compiled and computed right (_machine checks the results).
    assert _compiles(b) == 3
    remote = b["stats"]["remote"]
    # The first kernel's lookups missed; a later request found the server
    # gone (the writer thread's and a lookup's may both fail).
    assert remote["misses"] == 2 and 1 <= remote["errors"] <= 2 and remote["hits"] == 0
    assert remote["wait_ms"] <= 1000 * remotecache.TIMEOUT + 500
    assert b["stderr"].count("CacheWarning") == 1, b["stderr"]


_KILLING_BUILD = '''\
import json
import os
import sys

sys.path.insert(0, os.getcwd())
from numba_vulkan import store as kernelcache
from numba_vulkan.aot.build import builder as build
from rc_kill import kill

pid, port, url, output = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]


def progress(done, total, label):
    # The server dies after the first module this build compiled: it took
    # one from the server before, and compiles one more after.
    if label != "reused" and not progress.killed:
        progress.killed = True
        kill(pid, port)


progress.killed = False
result = build.build("kernels.yaml", output, jobs=1, progress=progress, remote=url)
print(json.dumps({"summary": result.summary(), "remote": kernelcache.stats()["remote"]}))
'''


def test_a_server_killed_mid_aot_build(project, local_build, tmp_path, monkeypatch):
    dying = Server(tmp_path / "redis")
    try:
        # The server has the first module of the manifest, as another build sent it.
        from numba_vulkan.aot.loader import index
        built = json.loads(local_build[pathlib.Path(index.INDEX)])["entries"]
        first = min(built, key=lambda e: (e["kernel"], e["signature"]))
        monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", dying.url)
        remotecache.forget()
        store_lookup.put("aot", first["build_key"], {
            "spirv": local_build[pathlib.Path(first["spirv"])],
            "meta": {k: first[k] for k in ("capabilities", "params", "push_size",
                                           "abi_version")}}, tiers=(store_lookup.REMOTE,))
        assert remotecache.flush(10) and len(dying.keys("aot")) == 1
        monkeypatch.delenv("NUMBA_VULKAN_REMOTE_CACHE")
        remotecache.forget()
        done = run_python("rc_killing_build.py", dying.process.pid, dying.port, dying.url,
                          tmp_path / "out", cwd=project, env=_own_cache(tmp_path / "cache"),
                          timeout=300, check=False)
        assert dying.process.poll() is not None
    finally:
        dying.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    summary, remote = report["summary"], report["remote"]
    assert summary["failed"] == 0 and summary["built"] == 2 and summary["remote"] == 1
    assert _tree(tmp_path / "out") == local_build
    # The three aot lookups were answered (one hit); a later request (the
    # last module's kernels/ lookup, or a store) found the server gone.
    assert remote["hits"] == 1 and 1 <= remote["errors"] <= 2
    assert remote["wait_ms"] <= 1000 * remotecache.TIMEOUT + 500
    assert done.stderr.count("CacheWarning") == 1, done.stderr


def test_a_password_from_the_environment_and_a_wrong_one(cache_dir, tmp_path, monkeypatch):
    from numba_vulkan.base.errors import CacheWarning
    locked = Server(tmp_path / "redis", "--requirepass", "s3cret", password="s3cret")
    name, entry = "ab" * 32, {"spirv": b"\x03\x02\x23\x07" + bytes(16), "note": [1, "x"]}
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", locked.url)
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE_PASSWORD", "s3cret")
    remotecache.forget()
    try:
        kernelcache.store(name, entry)
        assert remotecache.flush(10)
        shutil.rmtree(cache_dir / "kernels")
        assert kernelcache.load(name) == entry
        assert kernelcache.stats()["remote"]["hits"] == 1
        assert (cache_dir / "kernels" / (name + ".entry")).is_file()
        shutil.rmtree(cache_dir / "kernels")
        monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE_PASSWORD", "wrong")
        remotecache.forget()
        with pytest.warns(CacheWarning, match="is off in this process"):
            assert kernelcache.load(name) is None
        assert kernelcache.stats()["remote"]["errors"] == 1
        assert kernelcache.load(name) is None
        assert kernelcache.stats()["remote"]["errors"] == 1
    finally:
        remotecache.forget()
        kernelcache.reset_stats()
        locked.stop()


def test_the_url_shown_hides_the_password(monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", "rediss://bob:s3cret@cache.example:6380/2")
    assert remotecache.url() == "rediss://bob:***@cache.example:6380/2"
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", "redis://cache.example:6379/0")
    assert remotecache.url() == "redis://cache.example:6379/0"


def test_a_server_that_breaks_off_its_reply(project, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    stopped = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stopped.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    connection.recv(65536)
                    # A bulk reply of 5000 bytes, cut off after 7.
                    connection.sendall(b"$5000\r\npartial")
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        b = _machine(project, tmp_path / "b", f"redis://127.0.0.1:{listener.getsockname()[1]}/0")
    finally:
        stopped.set()
        listener.close()
    assert _compiles(b) == 3
    assert b["stats"]["remote"]["errors"] == 1 and b["stats"]["remote"]["hits"] == 0
    assert b["stderr"].count("CacheWarning") == 1, b["stderr"]


def test_a_full_server_refuses_stores_and_stays_on(project, tmp_path):
    full = Server(tmp_path / "redis", "--maxmemory", "1", "--maxmemory-policy", "noeviction")
    try:
        b = _machine(project, tmp_path / "b", full.url)
        assert full.keys("kernels") == [] and full.keys("functions") == []
    finally:
        full.stop()
    assert _compiles(b) == 3
    # Every lookup still asked: an OOM refusal does not turn the tier off.
    assert b["stats"]["remote"]["misses"] == 3
    assert "CacheWarning" not in b["stderr"], b["stderr"]


def _aot_build(project, cache, *args):
    done = run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--json", *args,
                      cwd=project, env=dict(_own_cache(cache), NUMBA_VULKAN_REMOTE_CACHE=None),
                      timeout=300)
    return json.loads(done.stdout)


def _tree(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def local_build(project, tmp_path_factory):
    """The manifest built locally, without any remote tier: what others must equal."""
    root = tmp_path_factory.mktemp("local_build")
    summary = _aot_build(project, root / "cache", "-o", str(root / "out"))
    assert summary["built"] == 3 and summary["remote"] == 0
    return _tree(root / "out")


def test_an_aot_build_on_b_reuses_the_modules_a_built(server, project, local_build, tmp_path):
    a = _aot_build(project, tmp_path / "a", "-o", str(tmp_path / "out_a"), "--remote", server.url)
    assert a["built"] == 3 and a["remote"] == 0
    assert len(server.keys("aot")) == 3
    b = _aot_build(project, tmp_path / "b", "-o", str(tmp_path / "out_b"), "--remote", server.url)
    assert b["built"] == 0 and b["reused"] == 3 and b["remote"] == 3
    assert _tree(tmp_path / "out_a") == _tree(tmp_path / "out_b") == local_build
    # A module under another's key is checked like a built one and rebuilt.
    first, second = server.keys("aot")[:2]
    server.client.set(first, server.client.get(second))
    c = _aot_build(project, tmp_path / "c", "-o", str(tmp_path / "out_c"), "--remote", server.url)
    assert c["built"] == 1 and c["remote"] == 2
    assert _tree(tmp_path / "out_c") == local_build


def test_a_build_given_a_remote_leaves_the_callers_settings(server, project, local_build,
                                                            tmp_path):
    """build(remote=...) uses the server in its workers too, and afterwards
    neither os.environ nor the settings name it."""
    script = (
        "import json, os, sys\n"
        "sys.path.insert(0, os.getcwd())\n"
        "from numba_vulkan.base import config\n"
        "from numba_vulkan.aot.build import builder as build\n"
        f"r = build.build('kernels.yaml', {str(tmp_path / 'out')!r}, jobs=2, remote={server.url!r})\n"
        "print(json.dumps([r.built + r.remote, r.failures == [], "
        "os.environ.get('NUMBA_VULKAN_REMOTE_CACHE'), config.remote_cache()]))\n")
    done = run_python("-c", script, cwd=project, timeout=300,
                      env=dict(_own_cache(tmp_path / "cache"), NUMBA_VULKAN_REMOTE_CACHE=None))
    assert json.loads(done.stdout.splitlines()[-1]) == [3, True, None, None]
    assert _tree(tmp_path / "out") == local_build


def test_a_cluster_build_equals_a_local_one(project, local_build, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, scheduler_port=0,
                                  host="127.0.0.1") as cluster:
        summary = _aot_build(project, tmp_path / "cache", "-o", str(tmp_path / "out"),
                             "--scheduler", cluster.scheduler_address)
    assert summary["built"] == 3 and summary["failed"] == 0
    assert _tree(tmp_path / "out") == local_build


def test_the_fingerprint_names_llvmlite_by_its_installed_hash():
    # Machines that installed the same wheel at other times share entries.
    import llvmlite
    directory = os.path.join(os.path.dirname(llvmlite.__file__), "binding")
    libraries = [n for n in os.listdir(directory) if n.startswith("libllvmlite")]
    recorded = toolchain.recorded(os.path.dirname(llvmlite.__file__), "llvmlite")
    if not any(f"llvmlite/binding/{n}" in recorded for n in libraries):
        pytest.skip("llvmlite was not installed with a RECORD (not by pip)")
    part = toolchain.llvmlite_part()
    for name in libraries:
        assert str(os.stat(os.path.join(directory, name)).st_mtime_ns) not in part
        assert recorded[f"llvmlite/binding/{name}"][0] in part
