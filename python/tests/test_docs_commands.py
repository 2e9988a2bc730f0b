"""Docs that cannot go stale (issue 46 item 8): every shell command of README.md and
docs/*.md runs against this build and does what the doc says.

A ```sh block is runnable: its commands run in order in one bash session (variables and `cd`
carry over), from a scratch copy of the checkout's layout (the repository's directories
linked in, an empty out/, the examples tree at ../shared when there is one), with
`tilepipe`, `build/tilepipe`, `./build/tilepipe` and `/path/to/build/tilepipe` the build's
binary. A command is its lines joined at a trailing backslash; `# ...` lines are comments,
and `#> TEXT` lines below a command are output it must print (stdout or stderr; `...` in
TEXT stands for anything), `#> exit N` the exit status it must end with (default 0: a
documented check finding, exit 3, says so). A fenced block of any language whose info
string has `file=NAME` (```cpp file=vadd.cc) is a file the doc asks the reader to write
(blocks of one name are its parts, in order): it is written to the scratch checkout before the doc's commands run. A block marked ```sh no-run: REASON is not run: for commands that
need root, the network or minutes (installs, whole test suites, clusters); the reason is
required and the list is kept short (MAX_NO_RUN).

The test of a block fails naming the doc, the command's line, the command, its exit status
and the end of its output."""

import os
import re
import shutil
import signal
import subprocess

import pytest

from conftest import ROOT

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md"))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MAX_NO_RUN = 8
TIMEOUT_S = 120  # a block; the documented commands use small shapes


class Block:
    def __init__(self, doc, line, info, lines):
        self.doc, self.line, self.info = doc, line, info
        self.commands = []  # (line, command, [expected output])
        self.status = {}  # command index -> its documented exit status, when not 0
        pending, start = [], None
        for i, text in enumerate(lines, line + 1):
            stripped = text.strip()
            if not pending and stripped.startswith("#>"):
                if not self.commands:
                    raise ValueError(f"{doc}:{i}: '#>' output before any command")
                text = stripped[2:].strip()
                status = re.fullmatch(r"exit (\d+)", text)
                if status:
                    self.status[len(self.commands) - 1] = int(status.group(1))
                else:
                    self.commands[-1][2].append(text)
                continue
            if not pending and (not stripped or stripped.startswith("#")):
                continue
            if not pending:
                start = i
            pending.append(text.rstrip())
            if not text.rstrip().endswith("\\"):
                self.commands.append((start, "\n".join(pending), []))
                pending = []
        if pending:
            raise ValueError(f"{doc}:{start}: a command ends in a backslash at the block's end")

    @property
    def no_run(self):
        return re.match(r"sh\s+no-run\b", self.info) is not None

    @property
    def reason(self):
        m = re.match(r"sh\s+no-run:\s*(\S.*)", self.info)
        return m.group(1) if m else ""

    def __repr__(self):
        return f"{self.doc}:{self.line}"


def blocks():
    """The ```sh blocks of the docs, and the files they write ({doc: {name: text}})."""
    out, files = [], {}
    for doc in DOCS:
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            lines = f.read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^```(\S.*)?$", lines[i])
            if not m:
                i += 1
                continue
            info = (m.group(1) or "").strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if info == "sh" or info.startswith("sh "):
                out.append(Block(doc, i + 1, info, lines[i + 1:j]))
            name = re.search(r"(?:^|\s)file=(\S+)", info)
            if name:
                doc_files = files.setdefault(doc, {})  # blocks of one file: in order
                doc_files[name.group(1)] = doc_files.get(name.group(1), "") + \
                    "\n".join(lines[i + 1:j]) + "\n"
            i = j + 1
    return out, files


BLOCKS, FILES = blocks()
RUNNABLE = [b for b in BLOCKS if not b.no_run]

# A command's binary: the build's, however the doc spells the path to it.
_BINARY = re.compile(r"(?<![\w/.~-])(?:/path/to/build/|\./build/|build/)?tilepipe(?=\s|$)")


def script(block, outdir):
    """The block as one bash script: each command's output and exit status into outdir/N;
    the script stops after the first command that ends otherwise than the doc says."""
    s = ["tilepipe() { \"$TILEPIPE_BIN\" \"$@\"; }"]
    for n, (_, cmd, _) in enumerate(block.commands):
        cmd = "\n".join(_BINARY.sub("tilepipe", ln) if not ln.lstrip().startswith("#") else ln
                        for ln in cmd.split("\n"))
        s.append(f"{{\n{cmd}\n}} > '{outdir}/{n}.out' 2>&1 < /dev/null\n"
                 f"rc=$?; echo $rc > '{outdir}/{n}.rc'; [ $rc = {block.status.get(n, 0)} ] || exit 0")
    return "\n".join(s) + "\n"


def scratch_checkout(tmp_path):
    """tmp/repo: the checkout's entries linked in, out/ empty; tmp/shared: the examples."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in os.listdir(ROOT):
        if name in ("out", ".git") or name.startswith("."):
            continue
        os.symlink(os.path.join(ROOT, name), repo / name)
    if os.path.realpath(BUILD) != os.path.realpath(os.path.join(ROOT, "build")):
        os.unlink(repo / "build")
        os.symlink(BUILD, repo / "build")
    (repo / "out").mkdir()
    if os.path.isdir(SHARED):
        os.symlink(SHARED, tmp_path / "shared")
    return repo


def expected(text):
    return re.compile(".*".join(re.escape(p) for p in text.split("...")))


def test_the_docs_have_runnable_blocks_and_few_excused_ones():
    assert len(RUNNABLE) >= 10, RUNNABLE
    excused = [b for b in BLOCKS if b.no_run]
    for b in excused:
        assert b.reason, f"{b}: a no-run block says why (```sh no-run: REASON)"
    assert len(excused) <= MAX_NO_RUN, excused


def test_the_binary_is_substituted_however_the_doc_spells_it():
    for spelling in ("tilepipe", "build/tilepipe", "./build/tilepipe", "/path/to/build/tilepipe"):
        assert _BINARY.sub("tilepipe", f"X=1 {spelling} run gemm") == "X=1 tilepipe run gemm"
    # other paths ending in tilepipe, and words containing it, are left alone
    for other in ("~/tp/bin/tilepipe run", "out/tilepipe.json", "tilepipe-x run"):
        assert _BINARY.sub("tilepipe", other) == other


@pytest.mark.parametrize("block", RUNNABLE, ids=repr)
def test_documented_commands_run(block, tmp_path):
    if not os.access(os.path.join(BUILD, "tilepipe"), os.X_OK):
        pytest.skip("needs the tilepipe binary")
    if "../shared" in "\n".join(c for _, c, _ in block.commands) and not os.path.isdir(SHARED):
        pytest.skip(f"{block} runs the examples tree, not at {SHARED}")
    repo = scratch_checkout(tmp_path)
    for name, text in FILES.get(block.doc, {}).items():
        (repo / name).write_text(text)
    outdir = tmp_path / "results"
    outdir.mkdir()
    env = dict(os.environ, TILEPIPE_BIN=os.path.join(BUILD, "tilepipe"),
               TILEPIPE_BUILD_DIR=BUILD, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen(["bash", "-c", script(block, outdir)], cwd=repo, env=env,
                            start_new_session=True)
    try:
        proc.wait(timeout=TIMEOUT_S)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the command running, not only bash
        proc.wait()
        timed_out = True
    for n, (line, cmd, outputs) in enumerate(block.commands):
        where = f"{block.doc}:{line}: `{cmd}`"
        rc_file = outdir / f"{n}.rc"
        assert not (timed_out and not rc_file.exists()), \
            f"{where} was still running when the block's {TIMEOUT_S} s ran out: show a " \
            "faster command (smaller shapes) or mark the block no-run with the reason"
        assert rc_file.exists(), f"{where} did not run"
        rc = int(rc_file.read_text())
        out = (outdir / f"{n}.out").read_text(errors="replace")
        want = block.status.get(n, 0)
        assert rc == want, f"{where} exited {rc}, the doc says {want}:\n{out[-3000:]}"
        for text in outputs:
            assert expected(text).search(out), \
                f"{where}: its documented output `{text}` is not in what it printed:\n{out[-3000:]}"
    shutil.rmtree(repo / "out", ignore_errors=True)
