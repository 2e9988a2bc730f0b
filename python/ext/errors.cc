// The one mapping of tilepipe's errors (include/tilepipe/error.h) to Python exceptions, used
// by every entry of the extension (guarded, ext.h):
//   UserError, InputError           -> tilelang.TilepipeError (diagnostics: file, line, kind,
//                                      message, hint, notes; an input error is one
//                                      diagnostic whose kind is its category)
//   ... a check finding of a run    -> tilelang.KernelCheckError (a TilepipeError)
//   a run interrupted (Ctrl-C)      -> KeyboardInterrupt
//   InternalError, other exceptions -> RuntimeError asking for a bug report
// (describe_error decides the kind and the text, as it does for the command line.)
#include <pybind11/stl.h>

#include "ext.h"

namespace tilepipe::ext {

namespace {

struct ErrorTypes {
  py::object user = py::none();   // tilelang.TilepipeError
  py::object check = py::none();  // tilelang.KernelCheckError
};

ErrorTypes& error_types() {
  static auto* t = new ErrorTypes();  // never destroyed: outlives the interpreter
  return *t;
}

py::list diagnostic_list(const std::vector<Diagnostic>& diags) {
  py::list items;
  for (const auto& d : diags) {
    py::dict item;
    item["file"] = d.loc.file;
    item["line"] = d.loc.line;
    item["kind"] = d.kind;
    item["message"] = d.message;
    item["hint"] = d.hint;
    item["notes"] = d.notes;
    items.append(item);
  }
  return items;
}

[[noreturn]] void raise_python(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

}  // namespace

void set_error_types(py::object user, py::object check) {
  error_types().user = std::move(user);
  error_types().check = std::move(check);
}

bool is_tilepipe_error(const py::handle& v) {
  return !error_types().user.is_none() && py::isinstance(v, error_types().user);
}

[[noreturn]] void raise_error(std::exception_ptr e) {
  const ErrorReport r = describe_error(e);
  std::vector<Diagnostic> diags;
  std::string message = r.message;
  try {
    std::rethrow_exception(e);
  } catch (const UserError& x) {
    diags = x.diagnostics();
  } catch (const InputError& x) {
    diags = {Diagnostic{x.loc, x.category, x.message, {}, ""}};
    message = x.loc.file.empty() ? x.message : x.what();
  } catch (...) {
  }
  if (r.kind == ErrorKind::Interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  const ErrorTypes& t = error_types();
  py::object type = r.kind == ErrorKind::CheckFinding && !t.check.is_none() ? t.check : t.user;
  if (r.kind == ErrorKind::Internal || type.is_none()) raise_python(PyExc_RuntimeError, message);
  py::object exc = type(message, diagnostic_list(diags));
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw py::error_already_set();
}

}  // namespace tilepipe::ext
