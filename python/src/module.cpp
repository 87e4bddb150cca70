// python/src/module.cpp — the nanobind extension tapewise._tapewise: registers the classes and turns
// a tapewise Error into the Python exception of its code (tapewise._errors).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <tapewise/version.hpp>

#include "bindings.hpp"

namespace tapewise::py {
namespace {

// Raises tapewise.<Code>Error(code, message); if even that fails, the import error stands.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ErrorException& e) {
    try {
      nb::object errors = nb::module_::import_("tapewise._errors");
      nb::object exc = errors.attr("make_error")(error_code_name(e.error.code), e.error.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    } catch (nb::python_error& pe) {
      pe.restore();
    }
  }
}

nb::list op_table() {
  nb::list ops;
  for (const OpInfo& info : kOps) {
    std::vector<std::string> scalars;
    for (const char* s : info.scalar_names)
      if (s[0]) scalars.emplace_back(s);
    ops.append(nb::make_tuple(std::string(info.name), info.arity, scalars));
  }
  return ops;
}

}  // namespace
}  // namespace tapewise::py

NB_MODULE(_tapewise, m) {
  using namespace tapewise::py;
  m.doc() = "tapewise's C++ core (nanobind); use it through the `tapewise` package.";
  nb::register_exception_translator(translate);
  bind_backend(m);
  bind_tape(m);
  m.def("ops", &op_table,
        "The 23 nodes in table order (spec/ops.def): a list of (name, arity, scalar names); the index of\n"
        "a node is its op_index for Backend.forward_ptrs.");
  m.attr("__version__") = TAPEWISE_VERSION_STRING;
  m.attr("spec_sha256") = TAPEWISE_SPEC_SHA256;
}
