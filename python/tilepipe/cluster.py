"""Tuning on a Dask distributed cluster: the executor behind `tilepipe tune ... --scheduler
tcp://HOST:PORT` and `tilepipe.tune(..., scheduler=...)`, and the workers' entry.

The search itself (enumeration, cache, lower bounds, branch and bound, result order) stays in
the process that runs `tune` (src/tune/tune.cc); only the simulations go to the cluster, each
config a task running `evaluate(job, point)` on a worker, i.e. the driver's own simulate
callback (driver::evaluate), so results are identical to a local run. Tasks are submitted as
workers free up (as many in flight as the cluster has threads) so that configs made useless
by a result are never started. A worker that dies loses nothing: the scheduler gives its
tasks to another worker.

Workers must import this package and the `_tilepipe` module: `PYTHONPATH=python:build` of a
build tree, or an installed tree (`<prefix>/lib/python3.N/dist-packages`, on python3's path
for /usr/local). A Python-file kernel (FILE.py[:NAME]) is sent as its absolute path: the
workers must see the file there (a shared file system or the same machine)."""

import os
import threading
import uuid

from . import runner, sources

_lock = threading.Lock()
_clients = {}  # scheduler address -> (distributed.Client, whether we opened it)


def _import_distributed():
    try:
        import distributed
    except ImportError as e:
        raise ValueError("tune --scheduler needs Dask distributed (Debian: apt-get install "
                         f"python3-distributed): {e}") from None
    return distributed


def _client(address):
    """The client of `address`: one the caller gave (use_client), else one opened here."""
    with _lock:
        if address in _clients:
            return _clients[address][0]
    distributed = _import_distributed()
    try:
        distributed.comm.get_address_host_port(address)
    except ValueError as e:
        raise ValueError(f"{e}; expected a scheduler's address, tcp://HOST:PORT") from None
    try:
        client = distributed.Client(address, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise ValueError(f"cannot reach the scheduler: {e}") from None
    with _lock:
        _clients[address] = (client, True)
    return client


def use_client(client):
    """Makes `--scheduler` with this client's address use `client` (not closed by close());
    returns the address."""
    address = client.scheduler.address
    with _lock:
        _clients[address] = (client, False)
    return address


def close(address=None):
    """Forgets the clients (of `address`, or all), closing those opened here."""
    with _lock:
        keys = [a for a in _clients if address is None or a == address]
        gone = [_clients.pop(a) for a in keys]
    for client, owned in gone:
        if owned:
            client.close()


def _portable(spec):
    """A Python-file spec with its path absolute (workers do not share our directory)."""
    m = sources._SPEC.fullmatch(spec)
    if not m:
        return spec
    path = os.path.abspath(m.group(1))
    return path + (":" + m.group(2) if m.group(2) else "")


class Executor:
    """tune::Executor on a Dask client: `executor(points, wanted, done)`."""

    def __init__(self, client, job):
        self.client = client
        self.job = dict(job, spec=_portable(job["spec"]))
        self.search = uuid.uuid4().hex  # workers load a file source again for a new search

    def __call__(self, points, wanted, done):
        distributed = _import_distributed()
        width = max(1, sum(self.client.nthreads().values()))
        running = {}  # future key -> (config index, future)
        finished = distributed.as_completed(loop=self.client.loop)
        nxt = 0

        def submit():
            nonlocal nxt
            while nxt < len(points) and len(running) < width:
                k, nxt = nxt, nxt + 1
                if not wanted(k):
                    continue
                f = self.client.submit(evaluate, self.job, points[k], self.search,
                                       key=f"tilepipe-tune-{k}-{uuid.uuid4().hex}")
                running[f.key] = (k, f)
                finished.add(f)

        try:
            submit()
            for f in finished:  # futures added while iterating are waited for too
                k, _ = running.pop(f.key)
                try:
                    result = f.result()  # a task's error is raised here
                except ImportError as e:
                    raise ValueError(_import_hint(e)) from None
                done(k, tuple(result))
                f.release()
                submit()
        except BaseException:
            self.client.cancel([f for _, f in running.values()])
            raise


def _import_hint(e):
    import _tilepipe

    here = os.pathsep.join(dict.fromkeys([
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        os.path.dirname(os.path.abspath(_tilepipe.__file__))]))
    return (f"a worker cannot import tilepipe ({type(e).__name__}: {e}); start the workers with "
            f"PYTHONPATH={here} or where tilepipe is installed (docs/guide.md, \"Tuning on a "
            "cluster\")")


def connect(address, job):
    """The connector registered with the extension: an executor for one search."""
    return Executor(_client(address), job)


def register():
    """Registers the Dask connector with the extension (for `tune --scheduler`)."""
    import _tilepipe

    _tilepipe.register_scheduler(connect)


_worker_ready = set()


def evaluate(job, point, search=""):
    """A worker's task: one config of a search, (ok, reason, cycles, bound)."""
    import _tilepipe

    with _lock:
        if "resolver" not in _worker_ready:
            _tilepipe.register_resolver(sources.resolve)
            _worker_ready.add("resolver")
        if "torch" not in _worker_ready and sources._SPEC.fullmatch(job["spec"]):
            runner.use_host_torch()  # as the command line does for Python files
            _worker_ready.add("torch")
    return _tilepipe.evaluate(job, point, search)
