"""Fuzzer of the data files: chip configs and advice-rules files that keep the real files'
shape (configs/a3.json, configs/advice_rules.json) with hostile values (issue 26)."""

import copy
import json
import os

from hypothesis import strategies as st

import fuzz_support as fz

with open(os.path.join(fz.CONFIGS, "a3.json")) as f:
    A3 = json.load(f)
with open(os.path.join(fz.CONFIGS, "advice_rules.json")) as f:
    RULES = json.load(f)

# Numbers a value may take: zero, negative, tiny, huge, past int64, fractions of counts.
HOSTILE_NUMBERS = [0, -1, 1e-9, 1e300, 2 ** 63 - 1, 2 ** 64, -2 ** 63, 0.5, 1e-300, 1.5,
                   3, 7, 1e9]
WRONG_TYPES = ["NaN", "inf", "-Infinity", "1e3", None, True, [], {}, "", "60"]


def leaves(cfg):
    """Dotted paths of every value object {"value", "unit", ...} of a chip config."""
    out = []

    def walk(node, path):
        if isinstance(node, dict) and "value" in node:
            out.append(path)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
    walk(cfg, ())
    return out


LEAVES = leaves(A3)


def at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def chip_configs(draw):
    """(config document, mutations): 1-3 mutations of a3.json."""
    cfg = copy.deepcopy(A3)
    muts = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(LEAVES))
        if not isinstance(cfg.get(path[0]), dict):
            continue  # its section was replaced by an earlier mutation
        try:
            obj = at(cfg, path)
        except (KeyError, TypeError):
            continue  # dropped by an earlier mutation
        if not isinstance(obj, dict):
            continue  # made bare by an earlier mutation
        how = fz.pick(draw, ["number"], ["type", "drop", "bare", "extra", "unit", "conf",
                                         "basis", "section"], 0.35)
        key = ".".join(path)
        if how == "number":
            val = draw(st.sampled_from(HOSTILE_NUMBERS))
            obj["value"] = val
            muts.append((key, val))
        elif how == "type":
            obj["value"] = draw(st.sampled_from(WRONG_TYPES))
            muts.append((key, obj["value"]))
        elif how == "drop":
            del at(cfg, path[:-1])[path[-1]]
            muts.append((key, "<missing>"))
        elif how == "bare":
            at(cfg, path[:-1])[path[-1]] = obj["value"]
            muts.append((key, "<bare number>"))
        elif how == "extra":
            at(cfg, path[:-1])[path[-1] + "_x"] = copy.deepcopy(obj)
            muts.append((key + "_x", "<extra key>"))
        elif how in ("unit", "conf", "basis"):
            obj[how] = draw(st.sampled_from(["", "GHz", "X", None, 7]))
            muts.append((f"{key}.{how}", obj[how]))
        else:
            cfg[path[0]] = draw(st.sampled_from([[], None, 0, "x"]))
            muts.append((path[0], cfg[path[0]]))
    return cfg, muts


KERNELS = [["gemm", "--param", "M=64", "N=64", "K=64"], ["softmax", "--param", "R=16", "C=64"],
           ["elementwise", "--param", "N=4096", "tile=256"], ["fa", "--param", "S=256", "H=1"]]

def names_culprit(key, stderr):
    """Whether an error names the mutated `key`: the key itself or, for a memory size in
    range but too small for the kernel, that memory's overflow ("UB overflow")."""
    parts = key.split(".")
    return parts[-1] in stderr or (parts[0] == "memory" and len(parts) > 2
                                   and f"{parts[1].upper()} overflow" in stderr)


def mutated(key, value):
    cfg = copy.deepcopy(A3)
    at(cfg, key.split("."))["value"] = value
    return cfg, [(key, value)]


@fz.fuzz_test(st.tuples(chip_configs(), st.sampled_from(KERNELS), st.sampled_from(["run", "profile"])),
              ci=40, explicit=[(mutated("die.hbm_bw", 1e-9), KERNELS[0], "run")])
def test_chip_configs(case, log):
    """A hostile chip config: refused with exit 2 naming the key, or a run that keeps the
    invariants; never a hang, a crash or a changed config file."""
    (cfg, muts), kernel, verb = case
    with fz.Sandbox() as box:
        chip = box.write("chip.json", json.dumps(cfg, indent=1))
        argv = [fz.TILEPIPE, verb] + kernel + ["--chip", chip, "--max-cycles", "1e6", "--json"]
        if verb == "profile":
            argv.append("--no-verify")
        else:
            argv += ["--mode", "timing"]
        o = fz.run(argv, box, inputs=[chip])
        if o.rc == 2 and not any(names_culprit(k, o.stderr) for k, _ in muts):
            # A refusal must point at the culprit (one of the mutated keys or sections).
            o.violations.append(fz.Violation("message", "the error names none of the mutated "
                                             f"keys {[k for k, _ in muts]}"))
        fz.settle(o, fz.NEW_DEFECTS, context=f"mutations: {muts}", log=log)


# --- advice rules ----------------------------------------------------------------------

METRICS = sorted({c["metric"] for r in RULES["rules"] for c in r["when"]})
# Each mutation: (what, must the file be refused?). Unknown names and wrong types must be.
RULE_MUTATIONS = {
    "metric": (["no.such_metric", "", "AIC.M", "V.busy_pct.x", 7], True),
    "op": (["=~", "", "!", "<<", None], True),
    "value": (["NaN", None, "x", [], {}], True),
    "number": ([0, -1, 1e300, -1e300, 1e-9, 2 ** 64], False),
    "action": (["explode", "", None], True),
    "severity": (["urgent", "", 3], True),
    "whatif": (["nope", ""], True),
    "knob_role": (["nope", ""], True),
    "drop_when": ([None], False),
    "text": (["{nope} at {where}", "", "x" * 10000], False),
    "factor": ([0, -1, 1e300, "x", None], None),
    "top": ([-1, 1e300, "x", None, 0], None),
}


@st.composite
def rules_files(draw):
    doc = copy.deepcopy(RULES)
    muts = []
    for _ in range(draw(st.integers(1, 2))):
        what = draw(st.sampled_from(sorted(RULE_MUTATIONS)))
        vals, _ = RULE_MUTATIONS[what]
        val = draw(st.sampled_from(vals))
        i = draw(st.integers(0, len(doc["rules"]) - 1))
        rule = doc["rules"][i]
        if what in ("metric", "op", "value", "number"):
            cond = rule["when"][draw(st.integers(0, len(rule["when"]) - 1))]
            cond["value" if what == "number" else what] = val
        elif what == "drop_when":
            rule.pop("when")
        elif what == "factor":
            rule.setdefault("predict", {"metric": METRICS[0]})["factor"] = val
        elif what == "top":
            doc[draw(st.sampled_from(["min_verified_gain_pct", "error_band_pct",
                                      "core_first_min_gain_pct"]))] = val
        elif what == "knob_role":
            next(r for r in doc["rules"] if "knob_role" in r)["knob_role"] = val
        else:
            rule[what] = val
        muts.append((what, rule.get("id"), val))
    return doc, muts


@fz.fuzz_test(st.tuples(rules_files(), st.sampled_from(KERNELS[:3])), ci=30)
def test_rules_files(case, log):
    """A hostile rules file: refused with exit 2, or advice that keeps the invariants. Unknown
    metrics, operators, actions, severities and wrong types are refused, not ignored."""
    (doc, muts), kernel = case
    with fz.Sandbox() as box:
        rules = box.write("rules.json", json.dumps(doc, indent=1))
        argv = [fz.TILEPIPE, "profile"] + kernel + ["--rules", rules, "--json"]
        o = fz.run(argv, box, inputs=[rules])
        if o.rc == 0:
            for kind in sorted({w for w, _, _ in muts if RULE_MUTATIONS[w][1]}):
                o.violations.append(fz.Violation("accepted", f"a rules file with a bad {kind} "
                                                 "was accepted", path=kind))
        fz.settle(o, fz.NEW_DEFECTS, context=f"mutations: {muts}", log=log)


@fz.fuzz_test(st.sampled_from(KERNELS[:3]), ci=3)
def test_rules_file_that_is_a_chip_config(kernel, log):
    """`--rules configs/a3.json`: a clear exit 2, not a raw json exception."""
    with fz.Sandbox() as box:
        rules = box.write("a3.json", json.dumps(A3))
        o = fz.run([fz.TILEPIPE, "profile"] + kernel + ["--rules", rules], box, inputs=[rules])
        if o.rc == 0:
            o.violations.append(fz.Violation("accepted", "a chip config taken as rules"))
        fz.settle(o, fz.NEW_DEFECTS, log=log)
