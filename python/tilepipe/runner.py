"""The script runner behind `tilepipe run-py FILE.py [args]` and `python3 -m tilepipe`.

Runs an unmodified TileLang-Ascend host script: `import tilelang` is tilepipe's front end,
`import torch` is Debian's PyTorch with the `npu` device mapped to the CPU and `torch_npu`
the vendor ops' golden versions (host.py). Without torch installed (or with
TILEPIPE_TORCH=shim) `torch` / `torch_npu` are the numpy-backed stand-in in _shim/ instead
(put first on sys.path for the script's run alone)."""

import os
import runpy
import sys

from . import host

_HERE = os.path.dirname(os.path.abspath(__file__))
SHIM_DIR = os.path.join(_HERE, "_shim")

USAGE = ("usage: tilepipe run-py [--no-check] FILE.py [script args...]   "
         "(python3 -m tilepipe FILE.py ...)\n"
         "  every kernel call runs the race, flag and deadlock checks; a finding ends the script "
         "with exit 3\n"
         "  --no-check   skip the race detector (faster; TILEPIPE_NO_CHECK=1 does the same)")


def script_problem(path):
    """Why `path` cannot be run as a script, or None."""
    if not os.path.exists(path):
        return "no such file; give the path of a Python script, e.g. examples/gemm/example_gemm.py"
    if os.path.isdir(path):
        return "is a directory; give the path of a Python script inside it"
    if not os.path.isfile(path):
        return "is not a regular file (a device, FIFO or socket); give the path of a Python script"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def use_host_torch():
    """Debian's torch with the npu device mapped to the CPU, else the numpy stand-in."""
    if os.environ.get("TILEPIPE_TORCH") != "shim" and host.torch_available():
        host.install()
        return "torch"
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")
                 or m == "torch_npu"]:
        del sys.modules[name]
    sys.path.insert(0, SHIM_DIR)
    return "shim"


def guard_npu_tools(script):
    """What the script itself asks of the NPU's own tools where they are not here, a located
    error instead of the OS's answer:
    - ctypes.CDLL of a shared library that does not exist: the NPU library an ahead-of-time
      build (bisheng; the original's gemm_aot) would have written, which tilepipe never
      builds (any other caller, a library probing for an optional one, gets the OSError);
    - a subprocess command starting with `msprof` (the NPU's profiler; fa_opt/run.py's
      benchmark) where none is installed, instead of the shell's exit 127."""
    import ctypes
    import shlex
    import shutil
    import subprocess

    from tilelang._core import unsupported

    script = os.path.abspath(script)

    def from_script():  # the caller of the patched __init__ is the script's own code
        return os.path.abspath(sys._getframe(2).f_code.co_filename) == script

    real_cdll = ctypes.CDLL.__init__

    def cdll(self, name, *a, **kw):
        try:
            real_cdll(self, name, *a, **kw)
        except OSError as e:
            if from_script() and name and os.sep in str(name) and not os.path.exists(name):
                raise unsupported(
                    f"loading the kernel library {name}",
                    "no such file: it is what an ahead-of-time build of a kernel for the NPU "
                    "(bisheng) writes, and tilepipe simulates kernels instead of building them",
                    hint="call the @tilelang.jit kernel from Python instead") from e
            raise

    def first_word(args):
        if isinstance(args, (str, bytes)):
            args = args.decode() if isinstance(args, bytes) else args
            try:
                words = shlex.split(args)
            except ValueError:
                words = args.split()
        else:
            words = [str(a) for a in args]
        return os.path.basename(words[0]) if words else ""

    real_popen = subprocess.Popen.__init__

    def popen(self, args, *a, **kw):
        if from_script() and first_word(args) == "msprof" and shutil.which("msprof") is None:
            raise unsupported(
                "running msprof (the NPU's profiler)",
                "it measures kernels on an NPU, and there is none here",
                hint="simulate the kernel instead: `tilepipe profile FILE.py` or "
                     "kernel.profile() / kernel.summary()")
        real_popen(self, args, *a, **kw)

    ctypes.CDLL.__init__ = cdll
    subprocess.Popen.__init__ = popen


def limit_memory():
    """Caps the script's address space at the machine's RAM + swap (TILEPIPE_MEMORY_LIMIT_GB
    overrides it; 0 lifts it): an allocation past it fails in the script, at its line (torch:
    "can't allocate memory", numpy and the simulator: MemoryError), where the kernel's
    out-of-memory killer would otherwise end the process without a word."""
    import resource

    given = os.environ.get("TILEPIPE_MEMORY_LIMIT_GB")
    if given is not None:
        limit = int(float(given) * 2**30)
    else:
        sizes = {}
        try:
            with open("/proc/meminfo") as f:
                for ln in f:
                    k, v = ln.split(":", 1)
                    sizes[k] = int(v.split()[0]) * 1024
        except OSError:
            return
        limit = sizes.get("MemTotal", 0) + sizes.get("SwapTotal", 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit <= 0 or (soft != resource.RLIM_INFINITY and soft <= limit):
        return
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _out_of_memory(e):
    return isinstance(e, MemoryError) or (
        isinstance(e, RuntimeError) and "can't allocate memory" in str(e))


def main(argv):
    argv = list(argv)
    if argv and argv[0] == "--no-check":
        os.environ["TILEPIPE_NO_CHECK"] = "1"
        argv.pop(0)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    path = argv[0]
    problem = script_problem(path)
    if problem:
        print(f"tilepipe run-py: {path}: {problem}", file=sys.stderr)
        return 2
    use_host_torch()
    guard_npu_tools(path)
    limit_memory()
    script_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, script_dir)
    sys.argv = [path] + list(argv[1:])
    guard_own_exit()
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return swallowed(e.code if isinstance(e.code, int) else (0 if e.code is None else 1))
    except KeyboardInterrupt:
        print("tilepipe run-py: interrupted", file=sys.stderr)
        return 130
    except BaseException as e:  # noqa: BLE001 - reported, then the exit status says which
        return report(e)
    return swallowed(0)


def swallowed(code):
    """The exit status of a script that ended with `code`: when it caught errors tilepipe
    raised (a benchmark loop's `except Exception`) and would end 0, a one-line summary on
    stderr and 3 if one was a check finding (race, flag, deadlock), else 2."""
    _core = sys.modules.get("tilelang._core")  # a script that never imported it raised nothing
    if code != 0 or _core is None or not _core.RAISED:
        return code
    errs = _core.RAISED
    first = str(errs[0]).splitlines()[0]
    checks = sum(isinstance(e, _core.KernelCheckError) for e in errs)
    print(f"tilepipe run-py: the script caught {len(errs)} error(s) tilepipe raised and went on "
          f"({checks} from the race / flag / deadlock checks); the first: {first}",
          file=sys.stderr)
    return 3 if checks else 2


def guard_own_exit():
    """os._exit ends the process without unwinding: the swallowed-error status still
    applies to a script that leaves that way."""
    real_exit, pid = os._exit, os.getpid()

    def _exit(code):
        if os.getpid() != pid:  # a forked worker's exit is its parent's business
            real_exit(code)
        sys.stdout.flush()
        sys.stderr.flush()
        real_exit(swallowed(code))

    os._exit = _exit


def _own(filename):
    """Frames of the runner, the front end, the host side and runpy: not the user's."""
    if filename.startswith("<frozen") or filename == runpy.__file__:
        return True
    from tilelang._core import is_own_file

    return is_own_file(filename)


def report(e):
    """Prints an uncaught exception with tilepipe's and the runner's frames hidden: a user
    error (TilelangError: a kernel or script construct tilepipe refuses, located) as the
    user's frames then `file:line:col: error: ...`, exit 2; anything else as Python's
    traceback without the runner's frames, exit 1. TILEPIPE_TRACEBACK=full shows all."""
    import traceback

    from tilelang import TilelangError

    full = os.environ.get("TILEPIPE_TRACEBACK") == "full"
    frames = traceback.extract_tb(e.__traceback__)
    shown = frames if full else [f for f in frames if not _own(f.filename)]
    from tilelang import KernelCheckError

    user_error = isinstance(e, TilelangError)
    if _out_of_memory(e) and shown:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        gb = f"{limit / 2**30:.1f} GB" if limit != resource.RLIM_INFINITY else "all"
        e = TilelangError(
            f"the host ran out of memory: {str(e).splitlines()[0][:200]}",
            loc=(os.path.basename(shown[-1].filename), shown[-1].lineno),
            hint=f"the script's host-side arrays need more than this machine's RAM + swap "
                 f"({gb}, the address space tilepipe run-py allows; TILEPIPE_MEMORY_LIMIT_GB "
                 f"sets another, 0 none)")
        user_error = True
    out = []
    if shown:
        out.append("Traceback (most recent call last):\n")
        out += traceback.format_list(shown)
    if user_error and e.loc is None and shown:
        # an error about the script's use of the API (no kernel line): at the user's call
        out.append(f"{os.path.basename(shown[-1].filename)}:{shown[-1].lineno}: error: {e}\n")
    elif user_error:
        out.append(f"{str(e)}\n")
    else:
        out += traceback.format_exception_only(type(e), e)
    sys.stderr.write("".join(out))
    sys.stderr.flush()
    if isinstance(e, KernelCheckError):
        return 3
    return 2 if user_error else 1
