// Shared by the extension's two files: module.cc (the IR builder the front end drives) and
// driver.cc (compile, run, profile and the command line, through the driver).
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <new>
#include <string>
#include <vector>

#include "tilepipe/lang.h"
#include "tilepipe/verify.h"

namespace tilepipe::ext {

namespace py = pybind11;

/// The Python exceptions tilepipe's errors become (errors.cc): tilelang.TilepipeError and
/// KernelCheckError, set from Python at import (before: RuntimeError).
void set_error_types(py::object user, py::object check);
/// Whether `v` is a TilepipeError (or a subclass).
bool is_tilepipe_error(const py::handle& v);

/// Raises the Python exception of `e` (errors.cc: the one mapping).
[[noreturn]] void raise_error(std::exception_ptr e);

/// Runs `f`, turning every C++ exception into its Python one (raise_error); Python's own
/// exceptions (pybind11's, and an allocation failure: MemoryError) pass as they are.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (...) {
    raise_error(std::current_exception());
  }
}

/// The IR dtype of the front end's short names ("f16", "bf16", "f32", "i32", ...).
ir::DType dtype_of(const std::string& s);

/// Registers Compiled, run, profile, report, trace and the command line on `m`.
void bind_driver(py::module_& m);

}  // namespace tilepipe::ext
