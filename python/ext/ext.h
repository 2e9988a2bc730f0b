// Shared by the extension's two files: module.cc (the IR builder the front end drives) and
// driver.cc (compile, run, profile and the command line, through the driver).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "tilepipe/lang.h"
#include "tilepipe/verify.h"

namespace tilepipe::ext {

namespace py = pybind11;

/// tilelang's TilepipeError class (set from Python at import; None before).
py::object& tilepipe_error();

/// Raises TilepipeError carrying `diags` (file, line, kind, message, hint, notes each).
[[noreturn]] void raise_diags(const std::vector<Diagnostic>& diags);

/// Runs `f`, turning the library's user errors into TilepipeError.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const UserError& e) {
    raise_diags(e.diagnostics());
  } catch (const lang::BuildError& e) {
    raise_diags({Diagnostic{e.loc, "build", e.message, {}, ""}});
  } catch (const ConfigError& e) {
    throw std::runtime_error(e.message);
  }
}

/// The IR dtype of the front end's short names ("f16", "bf16", "f32", "i32", ...).
ir::DType dtype_of(const std::string& s);

/// Registers Compiled, run, profile, report, trace and the command line on `m`.
void bind_driver(py::module_& m);

}  // namespace tilepipe::ext
