"""Tuning on a Dask cluster (issue 28, item 4): `tilepipe tune ... --scheduler` on a local
cluster of two worker processes gives the local run's results, also when a worker is killed
in the middle of the sweep, and so does `tilepipe.tune(..., scheduler=client)`."""

import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import ROOT

distributed = pytest.importorskip("distributed")

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")

# FA expert over 16 configs; S=2048 simulates in under a second a config, and the winner's
# functional check (tune::Callbacks::check) takes ~20 s there (~70 s at S=4096, paid by every
# sweep of this file).
SPACE = {"num_stages": [2, 4, 6, 8], "cross_interval": [1, 2, 3, 4]}
PARAMS = {"S": 2048}
SWEEP = (["tune", "fa", "--variant", "expert", "--no-cache", "--json"]
         + [a for n, v in PARAMS.items() for a in ("--param", f"{n}={v}")]
         + [a for n, v in SPACE.items() for a in ("--space", f"{n}=" + ",".join(map(str, v)))])
# What must not depend on where the configs ran.
SAME = ["best", "best_time_us", "default", "speedup_vs_default", "configs", "within_error_band",
        "simulated", "pruned", "rejected", "cached", "skipped"]


def tilepipe(*args, cwd=None):
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")
    return subprocess.run([TILEPIPE, *args], capture_output=True, text=True, timeout=300, env=env,
                          cwd=cwd)


def tune_json(*args, cwd=None):
    r = tilepipe(*args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def cluster():
    # Workers import tilepipe and _tilepipe: the spawned processes start from this one's
    # sys.path (conftest puts python/ and the build tree first); PYTHONPATH says the same for
    # anything that starts from the environment.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python"), BUILD] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield c, client


@pytest.fixture(scope="module")
def local():
    t0 = time.monotonic()
    out = tune_json(*SWEEP, "-j", "2")
    print(f"\nlocal sweep (2 threads): {time.monotonic() - t0:.1f} s")
    assert len(out["configs"]) == 16 and out["simulated"] >= 1
    return out


def same(a, b):
    for key in SAME:
        assert a[key] == b[key], key


def test_a_cluster_sweep_gives_the_local_results(cluster, local):
    c, _ = cluster
    t0 = time.monotonic()
    remote = tune_json(*SWEEP, "--scheduler", c.scheduler_address)
    print(f"\n2-worker cluster sweep: {time.monotonic() - t0:.1f} s")
    same(local, remote)
    assert remote["scheduler"] == c.scheduler_address


class Finished(distributed.diagnostics.plugin.SchedulerPlugin):
    """Records which worker computed each task."""

    def __init__(self):
        self.where = {}

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and "worker" in kwargs:
            self.where[key] = kwargs["worker"]


def test_a_worker_killed_mid_sweep_loses_no_result(cluster, local):
    c, client = cluster
    client.wait_for_workers(2, timeout=60)
    finished = Finished()
    c.scheduler.add_plugin(finished)
    proc = subprocess.Popen([TILEPIPE, *SWEEP, "--scheduler", c.scheduler_address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Kill the worker process running the first tune task (SIGKILL: no goodbye to the
    # scheduler), as soon as one runs.
    killed, deadline = None, time.monotonic() + 120
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        for address, keys in client.processing().items():
            keys = [k for k in keys if str(k).startswith("tilepipe-tune-")]
            if keys:
                nanny = next(n for n in c.workers.values() if n.worker_address == address)
                os.kill(nanny.process.process.pid, signal.SIGKILL)
                killed = (address, keys)
                break
        time.sleep(0.01)
    out, err = proc.communicate(timeout=300)
    assert killed, "no tune task was seen running"
    assert proc.returncode == 0, err
    same(local, json.loads(out))
    # The killed worker's tasks were computed by another worker.
    address, keys = killed
    assert all(finished.where.get(k) not in (None, address) for k in keys), finished.where


def test_tune_from_python_on_a_client(cluster, local):
    import tilepipe

    _, client = cluster
    out = tilepipe.tune("fa", SPACE, variant="expert", params=PARAMS, cache=False,
                        scheduler=client)
    same(local, out)
    assert client.status == "running"  # the caller's client is left open


# A script around the suite's matmul factory (python/tests/kernels.py).
USER_FILE = textwrap.dedent('''
    import sys

    sys.path.insert(0, {tests!r})
    from kernels import matmul
''').format(tests=os.path.dirname(os.path.abspath(__file__)))



def test_a_python_file_kernel_tunes_on_the_cluster(cluster, tmp_path):
    c, _ = cluster
    (tmp_path / "user.py").write_text(USER_FILE)
    # A relative path: the workers get it made absolute.
    args = ["tune", "user.py:matmul", "--param", "M=256", "--param", "N=256", "--param", "K=256",
            "--param", "bm=64", "--space", "bn=64,128", "--space", "bk=64,128", "--no-cache",
            "--json"]
    local = tune_json(*args, cwd=tmp_path)
    remote = tune_json(*args, "--scheduler", c.scheduler_address, cwd=tmp_path)
    same(local, remote)
    assert remote["simulated"] >= 1


def test_an_unreachable_scheduler_is_bad_input():
    r = tilepipe("tune", "fa", "--space", "num_stages=2", "--scheduler", "tcp://127.0.0.1:9",
                 "--json")
    assert r.returncode == 2, r.stderr
    err = json.loads(r.stdout)["error"]
    assert err.startswith("tilepipe: --scheduler tcp://127.0.0.1:9: "), err
