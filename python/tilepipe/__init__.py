"""`python3 -m tilepipe FILE.py [args]`: runs a TileLang-Ascend script on tilepipe (see
tilepipe/runner.py). `tilepipe.tune(...)`: the `tilepipe tune` search from Python, on local
threads or a Dask cluster."""

from . import cluster, commands, runner, sources


def tune(kernel, space, *, variant=None, params=None, chip=None, strategy=None, max_evals=None,
         jobs=None, cache_dir=None, cache=True, scheduler=None):
    """Runs `tilepipe tune KERNEL ... --json` in this process and returns its JSON object
    (docs/cli.md, `tilepipe tune`); raises tilepipe.cli.CommandError (tilepipe.commands) on bad input.

    kernel: a built-in name ("fa") or a Python file "FILE.py[:NAME]"; space: {name: [values]};
    params: fixed parameters {name: value}; scheduler: None (local threads, `jobs` of them),
    a Dask scheduler's address "tcp://HOST:PORT", or a distributed.Client (used, not closed).
    """
    argv = ["tune", kernel]
    for name, values in space.items():
        argv += ["--space", f"{name}=" + ",".join(str(int(v)) for v in values)]
    for name, value in (params or {}).items():
        argv += ["--param", f"{name}={int(value)}"]
    for flag, value in (("--variant", variant), ("--chip", chip), ("--strategy", strategy),
                        ("--max-evals", max_evals), ("-j", jobs), ("--cache-dir", cache_dir)):
        if value is not None:
            argv += [flag, str(value)]
    if not cache:
        argv.append("--no-cache")
    if sources._SPEC.fullmatch(kernel):
        runner.use_host_torch()  # as the command line does for Python files
    given = scheduler is not None and not isinstance(scheduler, str)
    if given:
        scheduler = cluster.use_client(scheduler)
    if scheduler is not None:
        argv += ["--scheduler", scheduler]
    try:
        return commands.run_json(argv)
    finally:
        if scheduler is not None:
            cluster.close(scheduler)
