// The extension's side of the driver (include/tilepipe/driver.h): a kernel the front end
// built is a driver source (its program and pass configs, the caller's arrays as inputs), so
// compile, profile, advice and the HTML report are the CLI's own; Python files become kernel
// sources of the command line through a resolver written in Python (python/tilepipe/
// sources.py), and cli_main runs the tilepipe command line itself. Tuning on a cluster: the
// workers' entry (evaluate) and the executor of `tune --scheduler` (python/tilepipe/cluster.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "ext.h"
#include "registry.h"
#include "tilepipe/advisor.h"
#include "tilepipe/driver.h"
#include "tilepipe/numeric.h"

namespace tilepipe::ext {

namespace {

/// A kernel the front end built, compiled once for the calls that run it.
struct Compiled {
  driver::KernelSource source;  // the program as a driver source (program_source)
  driver::Compiled c;           // the program as built, after the passes, and lowered
  ChipConfig chip;
  double compile_wall_s = 0;
};

/// A Python kernel's pass options ({name: value}, python/tilelang's pass_options) through the
/// passes layer's option table.
passes::PassOptions pass_options(const py::dict& opts) {
  passes::PassOptions o;
  for (auto [k, v] : opts) passes::set_option(o, k.cast<std::string>(), v.cast<int64_t>());
  return o;
}

/// One entry of a host dict: an array, with the dtype its bits hold for a `(bits, "bf16")`
/// pair (numpy has no bfloat16).
struct HostEntry {
  py::object array;
  std::optional<ir::DType> bits_of;
};

HostEntry host_entry(const py::handle& v) {
  if (!py::isinstance<py::tuple>(v)) return {py::reinterpret_borrow<py::object>(v), std::nullopt};
  auto t = v.cast<py::tuple>();
  return {t[0], dtype_of(t[1].cast<std::string>())};
}

/// The entry's values as the simulator takes them through HostData (float64, flattened).
std::vector<double> host_values(const HostEntry& e) {
  if (e.bits_of) {
    auto bits = py::array::ensure(e.array, py::array::c_style);
    if (!bits || bits.itemsize() != ir::dtype_bytes(*e.bits_of))
      throw py::type_error("input bits must be a contiguous array of the dtype's size");
    std::vector<double> out(static_cast<size_t>(bits.size()));
    load_elems(*e.bits_of, static_cast<const uint8_t*>(bits.data()), out.data(), out.size());
    return out;
  }
  auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(e.array);
  if (!a) throw py::type_error("input must be convertible to a float64 array");
  return {a.data(), a.data() + a.size()};
}

/// The arrays as simulator inputs. `consume`: each entry leaves the dict once copied, so a
/// caller holding no other reference frees it at once (one tensor in two copies at a time).
sim::HostData host_data(const py::dict& arrays, bool consume = false) {
  sim::HostData io;
  for (const auto& k : py::list(arrays.attr("keys")())) {
    io[k.cast<std::string>()] = host_values(host_entry(arrays[k]));
    if (consume && PyDict_DelItem(arrays.ptr(), k.ptr()) != 0) throw py::error_already_set();
  }
  return io;
}

/// The element type of a numpy array the simulator can read in place, if any.
std::optional<ir::DType> raw_dtype(const py::array& a) {
  static const std::map<std::pair<char, py::ssize_t>, ir::DType> types = {
      {{'f', 2}, ir::DType::F16}, {{'f', 4}, ir::DType::F32}, {{'i', 1}, ir::DType::I8},
      {{'i', 2}, ir::DType::I16}, {{'i', 4}, ir::DType::I32}, {{'u', 1}, ir::DType::U8},
      {{'u', 2}, ir::DType::U16}, {{'u', 4}, ir::DType::U32}, {{'i', 8}, ir::DType::I64},
      {{'u', 8}, ir::DType::U64}, {{'b', 1}, ir::DType::Bool}};
  auto it = types.find({a.dtype().kind(), a.itemsize()});
  if (it == types.end()) return std::nullopt;
  return it->second;
}

/// The inputs of a functional run: arrays of a type the simulator reads in place (float16,
/// float32, the integer types, and `(uint16 bits, "bf16")` pairs) by reference — no float64
/// copy of a tensor that may be gigabytes — and any other as host_data's values.
struct HostInputs {
  sim::HostData values;
  std::map<std::string, sim::RawTensor> raw;
  std::vector<py::array> keep;  // what `raw` points into, alive until the run ends
};

HostInputs host_inputs(const py::dict& arrays, bool consume) {
  HostInputs in;
  for (const auto& k : py::list(arrays.attr("keys")())) {
    const std::string name = k.cast<std::string>();
    HostEntry e = host_entry(arrays[k]);
    std::optional<ir::DType> dt;
    if (py::isinstance<py::array>(e.array)) {
      py::array a = e.array.cast<py::array>();
      dt = e.bits_of ? e.bits_of : raw_dtype(a);
      if (dt && (a.flags() & py::array::c_style) && a.itemsize() == ir::dtype_bytes(*dt)) {
        in.raw[name] = {a.data(), *dt, static_cast<int64_t>(a.size())};
        in.keep.push_back(a);
      } else {
        dt.reset();
      }
    }
    if (!dt) in.values[name] = host_values(e);
    if (consume && PyDict_DelItem(arrays.ptr(), k.ptr()) != 0) throw py::error_already_set();
  }
  return in;
}

/// A program the front end built, as a driver source: no parameters; its inputs are each
/// call's arrays (driver::RunRequest::inputs), or `inputs` for a profile's runs.
driver::KernelSource program_source(const ir::Program& p, const passes::PassOptions& o,
                                    sim::HostData inputs = {}) {
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
    c->source = program_source(p, pass_options(opts));
    c->c = driver::compile(c->source, {}, c->chip);
    c->compile_wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return c;
  });
}

struct RunResult {
  driver::RunReport rep;
  driver::RunRequest req;                    // what ran (its host arrays are gone)
  std::map<std::string, py::array> outputs;  // float64, or int64 / uint64 (exact) ones
  std::shared_ptr<prof::Recorder> recorder;
  sim::HostData inputs;  // what the run started from (a trace replays it)
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
/// run stopped by Ctrl-C is KeyboardInterrupt (errors.cc), other errors go through guarded().
template <class F>
void cancellable(F&& f) {
  SigintCancels sigint;
  guarded([&] {
    py::gil_scoped_release nogil;
    f(sigint.flag());
  });
  // A profile's what-if runs end quietly (as rejections) once the flag is up: still Ctrl-C.
  if (sigint.flag()->load()) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
}

/// A kernel call: the caller's arrays in, the outputs (functional mode) back as arrays.
std::shared_ptr<RunResult> run(const std::shared_ptr<Compiled>& c, const py::dict& inputs,
                               const std::string& mode, bool races, bool record, bool exact,
                               const std::vector<std::string>& outputs, bool consume,
                               double max_cycles) {
  // A recorded run keeps its inputs for the trace's replay: as values.
  HostInputs in = record ? HostInputs{host_data(inputs), {}, {}} : host_inputs(inputs, consume);
  auto r = std::make_shared<RunResult>();
  if (record) r->inputs = in.values;
  driver::RunRequest& req = r->req;
  req.mode = mode == "timing" ? sim::Mode::Timing : sim::Mode::Functional;
  req.detect_races = races;
  req.fast_forward.enabled = !exact;
  req.max_cycles = max_cycles;
  req.write_back = outputs;
  req.inputs = &in.values;
  req.raw_inputs = in.raw;
  std::map<std::string, std::vector<uint8_t>> wide;
  req.raw_outputs = &wide;
  if (record) {
    r->recorder = std::make_shared<prof::Recorder>();
    req.observer = r->recorder.get();
  }
  cancellable([&](const std::atomic<bool>* cancel) {
    req.cancel = cancel;
    r->rep = driver::run_compiled(c->source, c->c, req, c->chip);
  });
  req.inputs = nullptr;
  req.raw_inputs.clear();
  req.raw_outputs = nullptr;
  req.cancel = nullptr;
  for (auto& [name, vals] : r->rep.outputs) {
    py::array_t<double> a(static_cast<py::ssize_t>(vals.size()));
    std::copy(vals.begin(), vals.end(), a.mutable_data());
    r->outputs[name] = a;
    std::vector<double>().swap(vals);  // one tensor in two copies at a time, not all
  }
  for (auto& [name, bytes] : wide) {
    const auto& gm = c->c.lowered.gm;
    const auto b =
        std::find_if(gm.begin(), gm.end(), [&](const auto& t) { return t.buffer->name == name; });
    py::array a(py::dtype(b->buffer->dtype == ir::DType::I64 ? "int64" : "uint64"),
                static_cast<py::ssize_t>(bytes.size() / 8));
    std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
    r->outputs[name] = a;
  }
  return r;
}

/// The run's report: the JSON `tilepipe run --json` prints (driver::run_json).
std::string summary_json(const std::shared_ptr<Compiled>& c, const RunResult& r) {
  auto s = prof::summarize(r.rep.sim, r.rep.lowered, c->chip);
  return driver::run_json(c->source, r.rep, r.req, c->chip, s).dump();
}

void write_trace(const std::shared_ptr<Compiled>& c, const RunResult& r, const std::string& path) {
  if (!r.recorder) throw py::value_error("a trace needs a run with record=True");
  // Traces are streamed while a run goes (prof::TraceWriter): replay the run in timing
  // mode with the writer attached, from the same inputs (scalar reads of GM steer the
  // control flow) and with the same fast-forward setting; the simulator is deterministic,
  // so the cycles are the same as the recorded run's.
  guarded([&] {
    prof::TraceWriter trace(path, {}, c->chip);
    prof::Recorder rec(&trace);
    driver::RunRequest req;
    req.mode = sim::Mode::Timing;
    req.observer = &rec;
    req.fast_forward = r.req.fast_forward;
    sim::HostData io = r.inputs;
    req.inputs = &io;
    req.on_lowered = [&](const lower::LoweredProgram& p) { trace.bind(p); };
    auto rep = driver::run_compiled(c->source, c->c, req, c->chip);
    trace.finish(rep.sim, rep.lowered);
  });
}

/// Profile through the driver (verified advice unless !verify): the JSON of `tilepipe
/// profile --json` with the timeline, and the advice as text; writes the HTML report to `html`
/// when given.
py::tuple profile(const std::shared_ptr<Compiled>& c, const py::dict& inputs, bool verify,
                  const std::string& html, double max_cycles) {
  driver::KernelSource k = program_source(c->c.source, c->c.pass_options, host_data(inputs));
  driver::RunRequest req;
  req.mode = sim::Mode::Timing;
  req.max_cycles = max_cycles;
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
  // Another exception of the user's code: at its line in the user's file when it has one.
  py::object where = py::none();
  try {
    where = py::module_::import("tilepipe.sources").attr("located")(v);
  } catch (const py::error_already_set&) {
  }
  if (!where.is_none()) {
    auto t = where.cast<py::tuple>();
    Diagnostic d;
    d.loc.file = t[0].cast<std::string>();
    d.loc.line = t[1].cast<int>();
    d.kind = "python-error";
    d.message = fmt::format("{} raised {}: {}", spec, type, what);
    d.hint = t[2].cast<std::string>();
    throw UserError({d});
  }
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
/// origin, variants (the front end's lowerings), params [(name, default, min, max, help)],
/// build(params, variant) -> (Program, pass options), inputs(params, seed) -> {name: array}.
driver::KernelSource make_source(const py::object& src) {
  driver::KernelSource k;
  k.name = src.attr("name").cast<std::string>();
  k.summary = src.attr("summary").cast<std::string>();
  k.origin = src.attr("origin").cast<std::string>();
  k.variants = src.attr("variants").cast<std::vector<std::string>>();
  k.profile_variants = k.variants.size() > 1;
  k.seeded_inputs = src.attr("seeded_inputs").cast<bool>();
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

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] { kernels::register_all(); });
}

/// The tilepipe command line, built-in kernels registered: `argv` as the binary's (argv[0] is
/// the program name). Returns the exit code.
int cli_main(const std::vector<std::string>& argv) {
  register_builtins();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  py::gil_scoped_release nogil;
  int rc = cli::main(static_cast<int>(argv.size()), args.data());
  std::cout.flush();
  return rc;
}

/// cli_main with what it prints on stdout returned instead of printed: (exit code, text).
/// One at a time (stdout is the process's).
py::tuple cli_capture(const std::vector<std::string>& argv) {
  static std::mutex mu;
  std::ostringstream out;
  int rc = 0;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu);
    std::streambuf* old = std::cout.rdbuf(out.rdbuf());
    try {
      py::gil_scoped_acquire gil;
      rc = cli_main(argv);
    } catch (...) {
      std::cout.rdbuf(old);
      throw;
    }
    std::cout.rdbuf(old);
  }
  return py::make_tuple(rc, out.str());
}

/// Tensors as flat float64 arrays.
py::dict arrays(const sim::HostData& data) {
  py::dict d;
  for (const auto& [name, vals] : data) {
    py::array_t<double> a(static_cast<py::ssize_t>(vals.size()));
    std::copy(vals.begin(), vals.end(), a.mutable_data());
    d[py::str(name)] = a;
  }
  return d;
}

/// A registered kernel run as `tilepipe run` runs it, functional (inputs from `seed`) or
/// timing: (cycles, inputs, outputs) by tensor name, what a program emitted from it is
/// compared with (python/tests/test_emit.py).
py::tuple run_registered(const std::string& spec, const std::string& variant,
                         const driver::RawParams& params, bool functional, uint64_t seed) {
  register_builtins();
  return guarded([&] {
    driver::KernelSource k = driver::find_kernel(spec);
    driver::RunRequest req;
    req.variant = variant;
    req.params = driver::resolve_params(k, params);
    req.mode = functional ? sim::Mode::Functional : sim::Mode::Timing;
    req.seed = seed;
    driver::RunReport rep;
    {
      py::gil_scoped_release nogil;
      rep = driver::run_kernel(k, req, load_chip_config("a3"));
    }
    sim::HostData in = functional && k.inputs ? k.inputs(req.params, seed) : sim::HostData{};
    return py::make_tuple(rep.sim.cycles, arrays(in), arrays(rep.outputs));
  });
}

/// Whether a registered kernel's program after the passes, every on-chip buffer placed
/// where its lowering put it (what `tilepipe emit` pins), equals `c`'s (ir::equal: up to
/// renaming of loop variables): `c` a file emitted from it, compiled by the front end.
bool registered_equal(const std::string& spec, const std::string& variant,
                      const driver::RawParams& params, const std::shared_ptr<Compiled>& c) {
  register_builtins();
  return guarded([&] {
    driver::KernelSource k = driver::find_kernel(spec);
    driver::CompileRequest req;
    req.variant = variant;
    req.params = driver::resolve_params(k, params);
    driver::Compiled mine = driver::compile(k, req, c->chip);
    mine.program.addresses = mine.lowered.addresses;
    return ir::equal(mine.program, c->c.program);
  });
}

// ---- tuning on a cluster (python/tilepipe/cluster.py) ----

driver::TuneJob tune_job(const py::dict& j) {
  return {j["spec"].cast<std::string>(), j["variant"].cast<std::string>(),
          j["params"].cast<driver::Params>(), j["chip_text"].cast<std::string>(),
          j["chip_origin"].cast<std::string>()};
}

py::dict job_dict(const driver::TuneJob& job) {
  py::dict j;
  j["spec"] = job.spec;
  j["variant"] = job.variant;
  j["params"] = job.params;
  j["chip_text"] = job.chip_text;
  j["chip_origin"] = job.chip_origin;
  return j;
}

py::tuple simulated_tuple(const tune::Simulated& s) {
  return py::make_tuple(s.ok, s.reason, s.cycles, s.bound);
}

tune::Simulated simulated_from(const py::handle& t) {
  auto x = t.cast<py::tuple>();
  if (x.size() != 4) throw std::invalid_argument("a result is (ok, reason, cycles, bound)");
  return {x[0].cast<bool>(), x[1].cast<std::string>(), x[2].cast<double>(),
          x[3].cast<std::string>()};
}

/// A worker's entry: one config of a search, as the local search simulates it; returns (ok,
/// reason, cycles, bound). The kernel is resolved once per spec and `search` (an id of the
/// search: a file edited between two searches is loaded again).
py::tuple evaluate(const py::dict& job_d, const tune::Point& p, const std::string& search) {
  register_builtins();
  driver::TuneJob job = tune_job(job_d);
  tune::Simulated s;
  guarded([&] {
    py::gil_scoped_release nogil;
    // Resolved sources of the latest searches (leaked: they may hold Python objects).
    static auto* mu = new std::mutex;
    static auto* sources = new std::vector<std::pair<std::string, driver::KernelSource>>;
    std::string id = job.spec + "\n" + search;
    std::optional<driver::KernelSource> k;
    {
      std::lock_guard<std::mutex> lock(*mu);
      for (const auto& [key, src] : *sources)
        if (key == id) k = src;
    }
    if (!k) {
      k = driver::find_kernel(job.spec);
      std::lock_guard<std::mutex> lock(*mu);
      sources->emplace_back(id, *k);
      if (sources->size() > 4) sources->erase(sources->begin());
    }
    s = driver::evaluate(*k, job, p);
  });
  return simulated_tuple(s);
}

/// `connect(address, job)` (called for each search of `tune --scheduler ADDRESS`) returns
/// an executor, `executor(points, wanted, done)`: tune::Executor with each result reported as
/// `done(k, (ok, reason, cycles, bound))`. Python errors become bad input naming the address.
void register_scheduler(const py::object& connect) {
  auto ref = std::make_shared<PyRef>(connect);
  driver::register_scheduler(
      [ref](const std::string& address, const driver::TuneJob& job) -> tune::Executor {
        auto fail = [address](const py::error_already_set& e) {
          py::object v = e.value();
          std::string type = py::str(py::type::of(v).attr("__name__")).cast<std::string>();
          std::string what = py::str(v).cast<std::string>();
          const bool plain = type == "ValueError" || is_tilepipe_error(v);
          return driver::ParamError{
              fmt::format("--scheduler {}: {}", address, plain ? what : type + ": " + what)};
        };
        py::gil_scoped_acquire gil;
        std::shared_ptr<PyRef> exec;
        try {
          exec = std::make_shared<PyRef>(ref->obj(address, job_dict(job)));
        } catch (const py::error_already_set& e) {
          throw fail(e);
        }
        return [exec, fail](const std::vector<tune::Point>& points,
                            const std::function<bool(size_t)>& wanted,
                            const std::function<void(size_t, const tune::Simulated&)>& done) {
          py::gil_scoped_acquire gil;
          py::cpp_function want([&wanted](size_t k) { return wanted(k); });
          py::cpp_function report(
              [&done](size_t k, const py::object& r) { done(k, simulated_from(r)); });
          try {
            exec->obj(py::cast(points), want, report);
          } catch (const py::error_already_set& e) {
            throw fail(e);
          }
        };
      });
}

}  // namespace

void bind_driver(py::module_& m) {
  py::class_<Compiled, std::shared_ptr<Compiled>>(m, "Compiled")
      .def("print", [](const Compiled& c) { return ir::print(c.c.program); })
      .def_property_readonly("us_per_cycle",
                             [](const Compiled& c) { return c.chip.us_per_cycle(); })
      .def_property_readonly("chip", [](const Compiled& c) { return c.chip.name; })
      .def_property_readonly("compile_wall_s", [](const Compiled& c) { return c.compile_wall_s; })
      // The verifier's warnings: [{file, line, column, kind, message, fix}] (docs/errors.md).
      .def_property_readonly("warnings", [](const Compiled& c) {
        py::list out;
        for (const auto& w : c.c.warnings) {
          py::dict d;
          d["file"] = w.loc.file;
          d["line"] = w.loc.line;
          d["column"] = w.loc.column;
          d["kind"] = w.kind;
          d["message"] = w.message;
          d["fix"] = w.hint;
          out.append(d);
        }
        return out;
      });
  m.def("compile", &compile, py::arg("program"), py::arg("chip"), py::arg("options"));

  py::class_<RunResult, std::shared_ptr<RunResult>>(m, "RunResult")
      .def_property_readonly("cycles", [](const RunResult& r) { return r.rep.sim.cycles; })
      .def_property_readonly("instructions",
                             [](const RunResult& r) { return r.rep.sim.instructions; })
      .def_property_readonly("wall_s", [](const RunResult& r) { return r.rep.sim_wall_s; })
      .def_property_readonly("outputs", [](const RunResult& r) { return r.outputs; });
  m.def("run", &run, py::arg("compiled"), py::arg("inputs"), py::arg("mode"),
        py::arg("races") = false, py::arg("record") = false, py::arg("exact") = false,
        py::arg("outputs") = std::vector<std::string>{}, py::arg("consume") = false,
        py::arg("max_cycles") = 1e13);
  m.def("summary_json", [](const std::shared_ptr<Compiled>& c,
                           const std::shared_ptr<RunResult>& r) { return summary_json(c, *r); });
  m.def("write_trace", [](const std::shared_ptr<Compiled>& c, const std::shared_ptr<RunResult>& r,
                          const std::string& path) { write_trace(c, *r, path); });
  m.def("profile", &profile, py::arg("compiled"), py::arg("inputs"), py::arg("verify") = true,
        py::arg("html") = "", py::arg("max_cycles") = 1e13);
  m.def(
      "emit",
      [](const std::shared_ptr<Compiled>& c, const std::string& factory,
         const driver::Params& params, const std::string& label) {
        return guarded([&] { return driver::emit_expert(c->c, {factory, params, label}); });
      },
      py::arg("compiled"), py::arg("factory"), py::arg("params"), py::arg("label"));
  m.def("note_input", &prof::note_input, py::arg("path"), py::arg("what"));
  m.def("run_registered", &run_registered, py::arg("spec"), py::arg("variant"), py::arg("params"),
        py::arg("functional"), py::arg("seed") = 1);
  m.def("registered_equal", &registered_equal, py::arg("spec"), py::arg("variant"),
        py::arg("params"), py::arg("compiled"));
  m.def("register_resolver", &register_resolver);
  m.def("cli_main", &cli_main);
  m.def("cli_capture", &cli_capture);
  m.def("evaluate", &evaluate, py::arg("job"), py::arg("point"), py::arg("search") = "");
  m.def("register_scheduler", &register_scheduler);
}

}  // namespace tilepipe::ext
