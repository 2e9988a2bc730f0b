"""The corpus report (python/tools/corpus_run.py): its classification rules on made-up
outputs, and a quick subset of the real corpus (a few seconds: the CI subset of the
report; the whole report is `python/tools/corpus_run.py`, about half an hour)."""

import json
import os
import sys

import pytest

from conftest import CORPUS, ROOT

sys.path.insert(0, os.path.join(ROOT, "python", "tools"))
import corpus_run  # noqa: E402

# Scripts that pass in about a second each at their own defaults (docs/python.md).
QUICK = ["activation/gelu_mul.py", "activation/sigmoidv2.py", "activation/sigmoidv2_slice.py",
         "activation/swi_glu.py"]

TB = """Traceback (most recent call last):
  File "/x/python/tilepipe/runner.py", line 48, in main
    runpy.run_path(path, run_name="__main__")
  File "/c/examples/foo/bar.py", line 12, in <module>
    k = kern(1)
  File "/x/python/tilelang/_jit.py", line 99, in wrapper
    raise X
"""


def test_exit_zero_with_a_pass_message_is_passed():
    r = corpus_run.classify(0, "Kernel Output Match!\n", "", "/c/examples")
    assert r["status"] == "passed" and r["reason"] == ""


def test_a_mismatch_count_before_the_scripts_own_pass_verdict_is_passed():
    """The lightning indexer prints its top-k mismatch count, then passes at 99 %."""
    r = corpus_run.classify(0, "mismatch number: 324, accuracy: 0.9997\nTest passed!\n", "",
                            "/c/examples")
    assert r["status"] == "passed" and r["kind"] == ""
    r = corpus_run.classify(0, "mismatch number: 9000, accuracy: 0.9\n", "", "/c/examples")
    assert r["status"] == "failed"


def test_exit_zero_with_a_mismatch_message_is_a_wrong_result():
    r = corpus_run.classify(0, "case 1\n[FAILED] precision test failed!\n", "", "/c/examples")
    assert (r["status"], r["kind"]) == ("failed", "wrong result")


def test_located_tilelang_error_is_unsupported_at_the_kernel_line():
    err = TB + ("tilelang._core.TilelangError: /c/examples/foo/bar.py:30: error: T.tile.sort "
                "has no model\n  hint: x\n")
    r = corpus_run.classify(1, "", err, "/c/examples")
    assert r["status"] == "unsupported" and r["kind"] == "TilelangError"
    assert r["where"] == "foo/bar.py:30" and r["reason"] == "T.tile.sort has no model"


def test_assertion_is_a_wrong_result_at_the_scripts_line():
    r = corpus_run.classify(1, "", TB + "AssertionError: Tensor-likes are not close!\n",
                            "/c/examples")
    assert (r["status"], r["kind"], r["where"]) == ("failed", "wrong result", "foo/bar.py:12")


def test_other_exceptions_and_signals_are_failures_and_timeouts_are_apart():
    r = corpus_run.classify(1, "", TB + "TypeError: bad operand\n", "/c/examples")
    assert (r["status"], r["kind"]) == ("failed", "TypeError")
    assert corpus_run.classify(-11, "", "", "/c")["reason"] == "killed by signal SIGSEGV"
    assert corpus_run.classify(None, "", "", "/c")["status"] == "timeout"


def test_a_located_error_printed_by_the_runner_with_exit_2_is_unsupported():
    r = corpus_run.classify(2, "", "/c/examples/foo/bar.py:7: error: needs 2 devices\n",
                            "/c/examples")
    assert (r["status"], r["where"]) == ("unsupported", "foo/bar.py:7")


def test_quick_subset_of_the_corpus_passes_and_writes_the_report(tmp_path):
    if not os.path.isdir(CORPUS):
        pytest.skip(f"corpus not found at {CORPUS}")
    args = ["--out", str(tmp_path), "--timeout", "30", "--no-language"]
    for s in QUICK:
        args += ["--only", s]
    assert corpus_run.main(args) == 0
    report = json.loads((tmp_path / "corpus_report.json").read_text())
    got = {r["script"]: r["status"] for r in report["examples"]}
    assert got == {s: "passed" for s in QUICK}, report["examples"]
    assert f"**{len(QUICK)} passed**" in (tmp_path / "corpus_report.md").read_text()


def test_checks_logged_on_stderr_count():
    r = corpus_run.classify(0, "", "INFO:root:Kernel Output Match!\n", "/c/examples")
    assert (r["status"], r["kind"]) == ("passed", "")
    r = corpus_run.classify(0, "", "ERROR:root:[FAILED] precision\n", "/c/examples")
    assert (r["status"], r["kind"]) == ("failed", "wrong result")


def _bad_first_run(path, first):
    """A script whose first run does `first` (one statement) and whose next one passes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import os, signal, time\n"
                    "if not os.path.exists('ran'):\n"
                    "    open('ran', 'w').close()\n"
                    f"    {first}\n"
                    "print('Kernel Output Match!')\n")


def _run_examples(tmp_path, root, jobs, timeout):
    import types

    a = types.SimpleNamespace(no_language=True, no_examples=False, only=None, timeout=timeout,
                              language_timeout=60, out=str(tmp_path / "out"), slowest=10)
    rc = corpus_run.run_all(a, jobs, str(root), "")
    return rc, json.loads((tmp_path / "out" / "corpus_report.json").read_text())["examples"]


def test_a_script_killed_beside_another_is_run_again_alone(tmp_path):
    """SIGKILL is the kernel's out-of-memory verdict when two scripts' host references
    share the machine: the script is run once more, alone, and reported as that run."""
    root = tmp_path / "examples"
    _bad_first_run(root / "big" / "ref.py", "os.kill(os.getpid(), signal.SIGKILL)")
    rc, (r,) = _run_examples(tmp_path, root, 1, 60)
    assert rc == 0
    assert (r["script"], r["status"]) == ("big/ref.py", "passed")
    assert r["reason"] == "run alone (killed beside another script)"


def test_a_script_timed_out_beside_another_is_run_again_alone(tmp_path):
    """A script over the limit while another shares the cores gets one more run, alone;
    one that is slow alone stays a timeout."""
    root = tmp_path / "examples"
    _bad_first_run(root / "x" / "a_slow_once.py", "time.sleep(30)")
    (root / "x" / "b_slow.py").write_text("import time\ntime.sleep(30)\n")
    _, (once, slow) = _run_examples(tmp_path, root, 2, 3)
    assert (once["status"], once["reason"]) == ("passed",
                                                "run alone (timed out beside another script)")
    assert slow["status"] == "timeout"


def test_each_example_reports_its_peak_memory_and_the_slowest_are_tabled(tmp_path):
    """The speed benchmark's columns: a script holding 1.5 GB reports at least that as its
    peak (the child's own rusage, not the runner's), a small one run after it far less (the
    front end's own imports take 250-400 MB, depending on the machine); the slowest
    table is in time order and says which are within 60 s and 4 GB."""
    root = tmp_path / "examples"
    root.mkdir()
    (root / "big.py").write_text("import time\nb = bytearray(1536 << 20)\nb[::4096] = b'x' * "
                                 "len(b[::4096])\ntime.sleep(1.5)\nprint('match')\n")
    (root / "small.py").write_text("print('match')\n")
    _, rows = _run_examples(tmp_path, root, 1, 60)
    big, small = rows
    assert big["peak_mb"] >= 1536 > small["peak_mb"] + 512 > 512, rows
    report = json.loads((tmp_path / "out" / "corpus_report.json").read_text())
    assert [r["script"] for r in report["slowest"]] == ["big.py", "small.py"]
    assert all(r["within_60s"] and r["within_4gb"] for r in report["slowest"])
    over = corpus_run.slowest([dict(big, seconds=75.0, peak_mb=5000)], 10)[0]
    assert (over["within_60s"], over["within_4gb"]) == (False, False)
    md = (tmp_path / "out" / "corpus_report.md").read_text()
    assert "| big.py | passed |" in md and "Slowest 2 examples" in md
