// The extension's side of the driver (include/tilepipe/driver.h): a kernel the front end
// built is a driver source (its program and pass configs, the caller's arrays as inputs), so
// compile, profile, advice and the HTML report are the CLI's own; Python files become kernel
// sources of the command line through a resolver written in Python (python/tilepipe/
// sources.py), and cli_main runs the tilepipe command line itself.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "ext.h"
#include "registry.h"
#include "tilepipe/advisor.h"
#include "tilepipe/driver.h"

namespace tilepipe::ext {

py::object& tilepipe_error() {
  static auto* e = new py::object();  // never destroyed: outlives the interpreter
  return *e;
}

[[noreturn]] void raise_diags(const std::vector<Diagnostic>& diags) {
  std::string msg;
  py::list items;
  for (const auto& d : diags) {
    if (!msg.empty()) msg += "\n";
    msg += d.str();
    py::dict item;
    item["file"] = d.loc.file;
    item["line"] = d.loc.line;
    item["kind"] = d.kind;
    item["message"] = d.message;
    item["hint"] = d.hint;
    item["notes"] = d.notes;
    items.append(item);
  }
  if (tilepipe_error().is_none() || !tilepipe_error()) throw std::runtime_error(msg);
  py::object exc = tilepipe_error()(msg, items);
  PyErr_SetObject(tilepipe_error().ptr(), exc.ptr());
  throw py::error_already_set();
}

namespace {

struct Compiled {
  driver::Compiled c;  // the program as built, after the passes, and lowered
  ChipConfig chip;
  double compile_wall_s = 0;
};

passes::PassOptions pass_options(const py::dict& opts) {
  passes::PassOptions o;
  for (auto [k, v] : opts) {
    std::string key = k.cast<std::string>();
    bool on = v.cast<bool>();
    if (key == "auto_sync")
      o.auto_sync = on;
    else if (key == "memory_planning")
      o.memory_planning = on;
    else if (key == "cv_split")
      o.cv_split = on;
    else if (key == "multibuffer")
      o.multibuffer = on;
    else if (key == "vectorize")
      o.vectorize = on;
    else if (key == "fuse")
      o.fuse = on;
    else if (key == "l1_residency")
      o.l1_residency = on;
    else if (key == "reserved_tail")
      o.reserved_tail = on;
    else
      throw std::invalid_argument("unknown pass option " + key);
  }
  return o;
}

/// Tensors by name from a dict of arrays (float64, flattened).
sim::HostData host_data(const py::dict& arrays) {
  sim::HostData io;
  for (auto [k, v] : arrays) {
    auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(v);
    if (!a) throw py::type_error("input must be convertible to a float64 array");
    io[k.cast<std::string>()] = std::vector<double>(a.data(), a.data() + a.size());
  }
  return io;
}

/// A program the front end built, as a driver source: no parameters, the given inputs.
driver::KernelSource program_source(const ir::Program& p, const passes::PassOptions& o,
                                    sim::HostData inputs) {
  driver::KernelSource k;
  k.name = p.name;
  k.origin = p.loc.file;
  k.build = [p, o](const driver::Params&, const std::string&) { return driver::Built(p, o); };
  auto shared = std::make_shared<const sim::HostData>(std::move(inputs));
  k.inputs = [shared](const driver::Params&, uint64_t) { return *shared; };
  return k;
}

std::shared_ptr<Compiled> compile(const ir::Program& p, const std::string& chip_name,
                                  const py::dict& opts) {
  return guarded([&] {
    auto t0 = std::chrono::steady_clock::now();
    auto c = std::make_shared<Compiled>();
    c->chip = load_chip_config(chip_name);
    c->c = driver::compile(program_source(p, pass_options(opts), {}), {}, c->chip);
    c->compile_wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return c;
  });
}

struct RunResult {
  sim::SimResult sim;
  std::map<std::string, py::array_t<double>> outputs;
  std::shared_ptr<prof::Recorder> recorder;
  double wall_s = 0;
  sim::HostData inputs;  // what the run started from (a trace replays it)
  bool exact = false;
};

/// Ctrl-C during a simulation. Python runs its SIGINT handler only between bytecodes, never
/// while the GIL is released for a run, so a run installs its own: it raises the engine's
/// cancel flag (sim::SimOptions::cancel, checked every few thousand steps) and the run ends
/// as KeyboardInterrupt. The previous handler is back when the run returns.
std::atomic<bool> g_sigint{false};

extern "C" void on_sigint(int) {
  g_sigint.store(true, std::memory_order_relaxed);
}

class SigintCancels {
 public:
  SigintCancels() {
    g_sigint.store(false);
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    installed_ = sigaction(SIGINT, &sa, &old_) == 0;
  }
  SigintCancels(const SigintCancels&) = delete;
  SigintCancels& operator=(const SigintCancels&) = delete;
  ~SigintCancels() {
    if (installed_) sigaction(SIGINT, &old_, nullptr);
  }
  const std::atomic<bool>* flag() const { return &g_sigint; }

 private:
  struct sigaction old_ = {};
  bool installed_ = false;
};

/// Runs f(cancel) with the GIL released and Ctrl-C cancelling the simulations it starts: a
/// run stopped by Ctrl-C raises KeyboardInterrupt, other errors go through guarded().
template <class F>
void cancellable(F&& f) {
  SigintCancels sigint;
  bool interrupted = false;
  guarded([&] {
    py::gil_scoped_release nogil;
    try {
      f(sigint.flag());
    } catch (const UserError&) {
      if (!sigint.flag()->load()) throw;
      interrupted = true;
    }
  });
  // A profile's what-if runs end quietly (as rejections) once the flag is up: still Ctrl-C.
  if (interrupted || sigint.flag()->load()) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
}

std::shared_ptr<RunResult> run(const std::shared_ptr<Compiled>& c, const py::dict& inputs,
                               const std::string& mode, bool races, bool record, bool exact) {
  sim::HostData io = host_data(inputs);
  auto r = std::make_shared<RunResult>();
  if (record) r->inputs = io;
  r->exact = exact;
  sim::SimOptions opts;
  opts.mode = mode == "timing" ? sim::Mode::Timing : sim::Mode::Functional;
  opts.detect_races = races;
  opts.fast_forward.enabled = !exact;
  if (record) {
    r->recorder = std::make_shared<prof::Recorder>();
    opts.observer = r->recorder.get();
  }
  cancellable([&](const std::atomic<bool>* cancel) {
    opts.cancel = cancel;
    auto t0 = std::chrono::steady_clock::now();
    r->sim = sim::simulate(c->c.lowered, c->chip, &io, opts);
    r->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  if (opts.mode == sim::Mode::Functional) {
    for (auto& [name, vals] : io) {
      py::array_t<double> a(static_cast<py::ssize_t>(vals.size()));
      std::copy(vals.begin(), vals.end(), a.mutable_data());
      r->outputs[name] = a;
      std::vector<double>().swap(vals);  // one tensor in two copies at a time, not all
    }
  }
  return r;
}

std::string summary_json(const std::shared_ptr<Compiled>& c, const RunResult& r) {
  auto s = prof::summarize(r.sim, c->c.lowered, c->chip);
  nlohmann::ordered_json j;
  j["cycles"] = r.sim.cycles;
  j["time_us"] = r.sim.cycles * c->chip.us_per_cycle();
  nlohmann::ordered_json sj = prof::to_json(s);
  for (auto it = sj.begin(); it != sj.end(); ++it) j[it.key()] = it.value();
  j["instructions"] = r.sim.instructions;
  j["sim_wall_s"] = r.wall_s;
  return j.dump();
}

void write_trace(const std::shared_ptr<Compiled>& c, const RunResult& r, const std::string& path) {
  if (!r.recorder) throw std::runtime_error("a trace needs a run with record=True");
  // Traces are streamed while a run goes (prof::TraceWriter): replay the run in timing
  // mode with the writer attached, from the same inputs (scalar reads of GM steer the
  // control flow) and with the same fast-forward setting; the simulator is deterministic,
  // so the cycles are the same as the recorded run's.
  guarded([&] {
    prof::TraceWriter trace(path, {}, c->chip);
    trace.bind(c->c.lowered);
    prof::Recorder rec(&trace);
    sim::SimOptions opts;
    opts.mode = sim::Mode::Timing;
    opts.observer = &rec;
    opts.fast_forward.enabled = !r.exact;
    sim::HostData io = r.inputs;
    auto res = sim::simulate(c->c.lowered, c->chip, &io, opts);
    trace.finish(res, c->c.lowered);
  });
}

/// Profile through the driver (verified advice unless !verify): the JSON of `tilepipe
/// profile --json` with the timeline, and the advice as text; writes the HTML report to `html`
/// when given.
py::tuple profile(const std::shared_ptr<Compiled>& c, const py::dict& inputs, bool verify,
                  const std::string& html) {
  driver::KernelSource k = program_source(c->c.source, c->c.pass_options, host_data(inputs));
  driver::RunRequest req;
  req.mode = sim::Mode::Timing;
  std::string json_text, text;
  cancellable([&](const std::atomic<bool>* cancel) {
    req.cancel = cancel;
    auto rep = driver::profile_kernel(k, req, c->chip, prof::load_rules(), verify);
    auto j = driver::profile_json(k, rep, req, c->chip);
    j["timeline"] = driver::timeline_json(rep.timeline, rep.core_names);
    if (!html.empty()) prof::write_file_atomic(html, driver::profile_html(k, rep, req, c->chip));
    json_text = j.dump();
    text = prof::to_text(rep.advice);
  });
  return py::make_tuple(json_text, text);
}

// ---- Python objects as kernel sources of the command line ----

/// A Python object held by C++ copies of a source: copied without the GIL (shared_ptr),
/// released with it, and left alone once the interpreter is gone.
struct PyRef {
  explicit PyRef(py::object o) : obj(std::move(o)) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!Py_IsInitialized()) {
      obj.release();
      return;
    }
    py::gil_scoped_acquire gil;
    obj = py::object();
  }
  py::object obj;
};

/// A Python exception raised by a source's callback, as the driver's errors: TilepipeError
/// keeps its diagnostics, a located TilelangError becomes one, anything else is bad input
/// (ParamError) naming the source.
[[noreturn]] void rethrow(const py::error_already_set& e, const std::string& spec) {
  py::object v = e.value();
  if (py::hasattr(v, "diagnostics")) {
    std::vector<Diagnostic> diags;
    for (auto d : v.attr("diagnostics")) {
      Diagnostic x;
      x.loc.file = d["file"].cast<std::string>();
      x.loc.line = d["line"].cast<int>();
      x.kind = d["kind"].cast<std::string>();
      x.message = d["message"].cast<std::string>();
      x.hint = d["hint"].cast<std::string>();
      x.notes = d["notes"].cast<std::vector<std::string>>();
      diags.push_back(std::move(x));
    }
    if (!diags.empty()) throw UserError(std::move(diags));
  }
  if (py::hasattr(v, "loc") && py::hasattr(v, "message") && !v.attr("loc").is_none()) {
    Diagnostic d;
    auto loc = v.attr("loc").cast<py::tuple>();
    d.loc.file = loc[0].cast<std::string>();
    d.loc.line = loc[1].cast<int>();
    d.kind = "front-end";
    d.message = v.attr("message").cast<std::string>();
    if (!v.attr("hint").is_none()) d.hint = v.attr("hint").cast<std::string>();
    throw UserError({d});
  }
  std::string type = py::str(py::type::of(v).attr("__name__")).cast<std::string>();
  std::string what = py::str(v).cast<std::string>();
  if (type == "SourceError") throw driver::ParamError{what};
  throw driver::ParamError{spec + ": " + type + ": " + what};
}

/// Runs `f` (calls into Python) holding the GIL, with rethrow()'s error mapping.
template <class F>
auto in_python(const std::string& spec, F&& f) -> decltype(f()) {
  py::gil_scoped_acquire gil;
  try {
    return f();
  } catch (const py::error_already_set& e) {
    rethrow(e, spec);
  }
}

/// The driver's view of a Python source object (python/tilepipe/sources.py): name, summary,
/// origin, params [(name, default, min, max, help)], build(params, variant) -> (Program,
/// pass options), inputs(params, seed) -> {name: array}.
driver::KernelSource make_source(const py::object& src) {
  driver::KernelSource k;
  k.name = src.attr("name").cast<std::string>();
  k.summary = src.attr("summary").cast<std::string>();
  k.origin = src.attr("origin").cast<std::string>();
  for (auto p : src.attr("params")) {
    auto t = p.cast<py::tuple>();
    k.params.push_back({t[0].cast<std::string>(), t[1].cast<int64_t>(), t[2].cast<int64_t>(),
                        t[3].cast<int64_t>(), t[4].cast<std::string>()});
  }
  auto ref = std::make_shared<PyRef>(src);
  std::string spec = k.name;
  k.validate = [ref, spec](const driver::Params& p) {
    return in_python(spec, [&] { return ref->obj.attr("validate")(p).cast<std::string>(); });
  };
  k.build = [ref, spec](const driver::Params& p, const std::string& variant) {
    return in_python(spec, [&] {
      auto t = ref->obj.attr("build")(p, variant).cast<py::tuple>();
      return driver::Built(t[0].cast<ir::Program>(), pass_options(t[1].cast<py::dict>()));
    });
  };
  k.inputs = [ref, spec](const driver::Params& p, uint64_t seed) {
    return in_python(spec,
                     [&] { return host_data(ref->obj.attr("inputs")(p, seed).cast<py::dict>()); });
  };
  return k;
}

/// `resolve(spec)` returns a source object or None (a spec that is not its kind).
void register_resolver(const py::object& resolve) {
  auto ref = std::make_shared<PyRef>(resolve);
  driver::register_resolver([ref](const std::string& spec) {
    return in_python(spec, [&]() -> std::optional<driver::KernelSource> {
      py::object src = ref->obj(spec);
      if (src.is_none()) return std::nullopt;
      return make_source(src);
    });
  });
}

/// The tilepipe command line, built-in kernels registered: `argv` as the binary's (argv[0] is
/// the program name). Returns the exit code.
int cli_main(const std::vector<std::string>& argv) {
  kernels::register_all();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  py::gil_scoped_release nogil;
  int rc = cli::main(static_cast<int>(argv.size()), args.data());
  std::cout.flush();
  return rc;
}

}  // namespace

void bind_driver(py::module_& m) {
  py::class_<Compiled, std::shared_ptr<Compiled>>(m, "Compiled")
      .def("print", [](const Compiled& c) { return ir::print(c.c.program); })
      .def_property_readonly("us_per_cycle",
                             [](const Compiled& c) { return c.chip.us_per_cycle(); })
      .def_property_readonly("chip", [](const Compiled& c) { return c.chip.name; })
      .def_property_readonly("compile_wall_s", [](const Compiled& c) { return c.compile_wall_s; });
  m.def("compile", &compile, py::arg("program"), py::arg("chip"), py::arg("options"));

  py::class_<RunResult, std::shared_ptr<RunResult>>(m, "RunResult")
      .def_property_readonly("cycles", [](const RunResult& r) { return r.sim.cycles; })
      .def_property_readonly("instructions", [](const RunResult& r) { return r.sim.instructions; })
      .def_property_readonly("wall_s", [](const RunResult& r) { return r.wall_s; })
      .def_property_readonly("outputs", [](const RunResult& r) { return r.outputs; });
  m.def("run", &run, py::arg("compiled"), py::arg("inputs"), py::arg("mode"),
        py::arg("races") = false, py::arg("record") = false, py::arg("exact") = false);
  m.def("summary_json", [](const std::shared_ptr<Compiled>& c,
                           const std::shared_ptr<RunResult>& r) { return summary_json(c, *r); });
  m.def("write_trace", [](const std::shared_ptr<Compiled>& c, const std::shared_ptr<RunResult>& r,
                          const std::string& path) { write_trace(c, *r, path); });
  m.def("profile", &profile, py::arg("compiled"), py::arg("inputs"), py::arg("verify") = true,
        py::arg("html") = "");
  m.def("register_resolver", &register_resolver);
  m.def("cli_main", &cli_main);
}

}  // namespace tilepipe::ext
