"""Python files as kernel sources of the tilepipe command line (docs/cli.md, "Python files").

`tilepipe VERB FILE.py:NAME` takes NAME from the file (imported, not run as a script): a
`@tilelang.jit` factory (its integer arguments are the kernel's parameters, `--param
M=1024`), a compiled kernel, or a `@T.prim_func`. `tilepipe VERB FILE.py` runs the file as a
script up to its first kernel launch and takes that kernel with the arrays the script passed;
the script's integer argparse options are the parameters (`--param S=2048` runs it with
`--S 2048`). `FILE.py:NAME` naming no object of the file picks the first launch of the
kernel called NAME. Words after the file in the spec (`"bench_sfa.py --file
sparse_flash_attn_pa"`, split as a shell would) are the script's own fixed arguments, given
before the parameters' options. The C++ driver calls `build`, `inputs` and `validate`
(python/ext/driver.cc)."""

import argparse
import contextlib
import inspect
import os
import re
import runpy
import shlex
import sys
import threading

from .runner import script_problem

_SPEC = re.compile(r"(.*\.py)(?::([A-Za-z_][A-Za-z_0-9]*))?")
_LIMIT = 2**62
_REQUIRED = -(2**63)  # the default of a parameter that has none: it must be given


class SourceError(Exception):
    """A file that cannot be a kernel source; the message says why and what to do."""


class _Launch(BaseException):
    """Stops a script at the kernel launch it was run for (BaseException: scripts' own
    `except Exception` does not swallow it)."""

    def __init__(self, compiled, host):
        super().__init__()
        self.compiled, self.host = compiled, host


class _Parsed(BaseException):
    """Stops a script at its argparse call: the parser holds the script's options."""

    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def split_spec(spec):
    """(path, NAME or None, fixed script arguments) of FILE.py[:NAME] [ARG ...], or None for
    a spec that is not a Python file. A spec that is itself an existing file's path (spaces
    and all) has no arguments."""
    m = _SPEC.fullmatch(spec)
    if m and (os.path.isfile(m.group(1)) or not any(c.isspace() for c in spec)):
        return m.group(1), m.group(2), []
    try:
        words = shlex.split(spec)
    except ValueError:
        return None
    m = _SPEC.fullmatch(words[0]) if words else None
    if not m or len(words) < 2:
        return None
    return m.group(1), m.group(2), words[1:]


def located(e):
    """(file, line, hint) of an exception the user's code raised: its innermost frame in a
    file of the user's (not tilepipe's, not the standard library's), or None when none is.
    The driver reports it there instead of as a bare `TYPE: MESSAGE` (python/ext/driver.cc)."""
    import traceback
    import sysconfig

    from tilelang._core import is_own_file

    stdlib = sysconfig.get_paths()["stdlib"]
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith("<") and not is_own_file(f.filename)
              and not os.path.abspath(f.filename).startswith(stdlib)]
    if not frames:
        return None
    hint = ("the code calls itself without end (Python's recursion limit is "
            f"{sys.getrecursionlimit()}): give the recursion a base case"
            if isinstance(e, RecursionError) else
            "the error is in the file's own code, run while tilepipe loaded the kernel: "
            "fix it there (`tilepipe run-py FILE.py` shows the whole traceback)")
    return os.path.abspath(frames[-1].filename), frames[-1].lineno or 0, hint


def _note_inputs(path):
    """The file and every module loaded so far (those it imports among them) are inputs of
    the command: no output (--trace, --html, -o) may replace one (prof::note_input)."""
    import _tilepipe

    _tilepipe.note_input(path, "the kernel's source")
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str) and f.endswith(".py"):
            _tilepipe.note_input(os.path.abspath(f), f"the module {m.__name__} (imported)")


def resolve(spec):
    """The source for `spec` (FILE.py[:NAME] [ARG ...]), or None for other specs."""
    parts = split_spec(spec)
    if parts is None:
        return None
    path, name, args = parts
    problem = script_problem(path)
    if problem:
        raise SourceError(f"{path}: {problem}")
    return FileSource(spec, path, name, args)


# A quiet run (`tilepipe fidelity`, `calibrate`): the scripts' own prints are dropped instead
# of going to stderr.
quiet = [False]


# The front end's builder state is global: one build at a time, whatever thread asks.
_LOCK = threading.RLock()


@contextlib.contextmanager
def _as_script(path, argv):
    """Runs code as the script would run: argv, its directory first on sys.path and as the
    working directory; its prints go to stderr (stdout carries the command's JSON)."""
    old_argv, old_cwd, old_path = sys.argv, os.getcwd(), list(sys.path)
    here = os.path.dirname(os.path.abspath(path))
    sys.argv = [path] + list(argv)
    sys.path.insert(0, here)
    try:
        os.chdir(here)
        with open(os.devnull, "w") if quiet[0] else contextlib.nullcontext(sys.stderr) as out:
            with contextlib.redirect_stdout(out):
                yield
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
        os.chdir(old_cwd)


@contextlib.contextmanager
def _lowering(variant):
    """Kernels built inside are lowered the variant's way (tilelang._jit.lowering)."""
    from tilelang import _jit

    saved = _jit.lowering_override[0]
    _jit.lowering_override[0] = variant or None
    try:
        yield
    finally:
        _jit.lowering_override[0] = saved


class FileSource:
    # The variants are the front end's two lowerings of automatic kernels (docs/python.md);
    # the first, the default, is the one TileLang-Ascend's compiler makes.
    variants = ["original", "tilepipe"]

    def __init__(self, spec, path, name, args=()):
        self.name = spec
        self.path = os.path.abspath(path)
        self.origin = self.path
        self.kernel = name  # the object or kernel NAME, or None
        self.args = list(args)  # the script's fixed arguments
        self.params = []
        self._flags = {}  # parameter -> the script's option string
        self._captures = {}  # (params, seed or None) -> (Compiled, host)
        self._programs = {}  # params -> Compiled, for sources whose build needs no inputs
        self._make = None  # params, seed -> (Compiled, host)
        self._program = None  # params -> Compiled, or None: build through _make
        self._seeded = True
        with _LOCK:
            self._load()
        _note_inputs(self.path)

    # ---- what the driver calls ----

    @property
    def seeded_inputs(self):
        """Whether `inputs` makes the values up (a factory's kernel), not the script's own."""
        return self._seeded

    def validate(self, params):
        missing = [n for n, v in params.items() if v == _REQUIRED]
        if missing:
            return (f"{self.name} has no default for {', '.join(missing)}: give "
                    + " ".join(f"--param {n}=VALUE" for n in missing))
        return ""

    def build(self, params, variant):
        if self._program is not None:
            # A factory's kernel compiles without arrays: its inputs (seeded random arrays,
            # gigabytes for a long sequence) are made only when a run needs them.
            key = (tuple(sorted(params.items())), variant)
            with _LOCK:
                if key not in self._programs:
                    with _lowering(variant):
                        self._programs[key] = self._program(params)
                c = self._programs[key]
        else:
            c, _ = self._capture(params, 1, variant)
        return c.program, c.opts

    def inputs(self, params, seed):
        return self._capture(params, seed)[1]

    # ---- loading ----

    def _load(self):
        from tilelang._jit import JITKernel
        from tilelang._interp import PrimFunc

        obj = self._namespace().get(self.kernel) if self.kernel else None
        if isinstance(obj, PrimFunc):
            import tilelang

            obj = tilelang.compile(obj)
        if isinstance(obj, JITKernel):
            self.summary = f"kernel {obj.name} of {self.path}"
            self._make = lambda params, seed: self._launch_of(obj, seed)
        elif obj is not None and callable(obj):
            self._factory_params(obj)
            self.summary = f"@tilelang.jit factory {self.kernel} of {self.path}"
            self._make = lambda params, seed: self._launch_of(self._call(obj, params), seed)
            self._program = lambda params: self._compiled_of(self._call(obj, params))
        elif obj is not None:
            raise SourceError(
                f"{self.path}:{self.kernel} is a {type(obj).__name__}; expected a @tilelang.jit "
                "factory, a compiled kernel or a @T.prim_func")
        else:
            self._seeded = False
            self._script_params()
            which = f"kernel {self.kernel}" if self.kernel else "first kernel"
            self.summary = f"the {which} {self.path} launches"
            self._make = lambda params, seed: self._script_launch(params)

    def _namespace(self):
        """The file's top-level names, defined by running it as a module (not as __main__) up
        to its first kernel launch, if it launches one at import."""
        from tilelang import _jit

        def stop(launch):
            raise _Launch(*launch)

        ns = {"__name__": "__tilepipe_source__", "__file__": self.path, "__builtins__": __builtins__}
        with open(self.path, encoding="utf-8") as f:
            code = compile(f.read(), self.path, "exec")
        _jit._call_hooks.append(stop)
        try:
            with _as_script(self.path, []):
                exec(code, ns)  # noqa: S102 - the user's own file, run as the script would run
        except _Launch:
            pass
        except SystemExit:
            pass
        finally:
            _jit._call_hooks.remove(stop)
        return ns

    def _factory_params(self, factory):
        for p in inspect.signature(factory).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                continue
            d = p.default
            if d is p.empty:
                self.params.append((p.name, _REQUIRED, -_LIMIT, _LIMIT, f"argument of {self.kernel}"))
            elif isinstance(d, int) and not isinstance(d, bool):
                self.params.append((p.name, d, -_LIMIT, _LIMIT, f"argument of {self.kernel}"))

    def _script_params(self):
        """The script's integer options, from its parser (run up to parse_args)."""
        parser = None
        saved = argparse.ArgumentParser.parse_known_args

        def stop(parser_self, *a, **kw):
            raise _Parsed(parser_self)

        argparse.ArgumentParser.parse_known_args = stop
        try:
            # No parser: the script ran to its first launch, which is the default's.
            with _lowering(self.variants[0]):
                self._captures[((), None, self.variants[0])] = self._run_script(list(self.args))
        except _Parsed as p:
            parser = p.parser
        finally:
            argparse.ArgumentParser.parse_known_args = saved
        for a in parser._actions if parser else []:
            d = a.default
            longs = [o for o in a.option_strings if o.startswith("--")] or a.option_strings
            if not longs or a.dest == "help" or isinstance(d, bool):
                continue
            if a.type is int or (a.type is None and isinstance(d, int)):
                default = d if isinstance(d, int) else _REQUIRED
                self.params.append((a.dest, default, -_LIMIT, _LIMIT, a.help or longs[0]))
                self._flags[a.dest] = longs[0]

    # ---- launching ----

    def _capture(self, params, seed, variant=None):
        # A script passes its own arrays (the seed is not used); factories get seeded ones.
        # The inputs do not depend on the lowering: `inputs` takes the default's.
        variant = variant or self.variants[0]
        key = (tuple(sorted(params.items())), seed if self._seeded else None, variant)
        with _LOCK:
            if key not in self._captures:
                # The launch captured under another lowering is relowered, not launched
                # again: a script runs once for all its variants.
                other = next((self._captures[key[:2] + (v,)] for v in self.variants
                              if key[:2] + (v,) in self._captures), None)
                with _lowering(variant):
                    if other is not None:
                        self._captures[key] = (other[0].relower(), other[1])
                    else:
                        self._captures[key] = self._make(params, seed)
            return self._captures[key]

    def _call(self, factory, params):
        missing = self.validate(params)
        if missing:
            raise SourceError(missing)
        return factory(**params)

    def _jit_kernel(self, kernel):
        from tilelang._jit import JITKernel

        if not isinstance(kernel, JITKernel):
            raise SourceError(f"{self.path}:{self.kernel}(...) returned a "
                              f"{type(kernel).__name__}; expected a @tilelang.jit kernel")
        return kernel

    def _launch_of(self, kernel, seed):
        kernel = self._jit_kernel(kernel)
        c, host, _, _ = kernel._host(kernel._example_inputs((), seed))
        return c, host

    def _compiled_of(self, kernel):
        kernel = self._jit_kernel(kernel)
        if kernel._syms:  # symbolic dims: bound by the example arrays
            return self._launch_of(kernel, 1)[0]
        return kernel._compile({})

    def _script_launch(self, params):
        defaults = {n: d for n, d, *_ in self.params}
        argv = list(self.args)
        for n, v in params.items():
            if v != defaults[n]:
                argv += [self._flags[n], str(v)]
        return self._run_script(argv)

    def _run_script(self, argv):
        from tilelang import _jit

        def hook(launch):
            c, host = launch
            if self.kernel is None or c.ext.name == self.kernel:
                raise _Launch(c, host)

        _jit._call_hooks.append(hook)
        which = f"kernel '{self.kernel}'" if self.kernel else "a kernel"
        try:
            with _as_script(self.path, argv):
                runpy.run_path(self.path, run_name="__main__")
        except _Launch as launch:
            return launch.compiled, launch.host
        except SystemExit as e:
            raise SourceError(f"{self.path} exited (status {e.code}) before launching {which}"
                              ) from None
        finally:
            _jit._call_hooks.remove(hook)
        raise SourceError(f"{self.path} ran to its end without launching {which}; name a "
                          f"@tilelang.jit factory instead: {self.path}:FACTORY")
