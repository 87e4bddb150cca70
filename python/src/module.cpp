// python/src/module.cpp — the nanobind extension tapewise._tapewise: registers the classes and turns
// a tapewise Error into the Python exception of its code (tapewise._errors).
#include <new>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <tapewise/version.hpp>

#include "bindings.hpp"

namespace tapewise::py {
namespace {

void raise_python(const Error& error) {
  try {
    nb::object errors = nb::module_::import_("tapewise._errors");
    nb::object exc = errors.attr("make_error")(error_code_name(error.code), error.message);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (nb::python_error& pe) {
    pe.restore();
  }
}

// Raises tapewise.<Code>Error(code, message); if even that fails, the import error stands. A
// std::bad_alloc from a host allocation in the module becomes OutOfMemoryError, like the backend's.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ErrorException& e) {
    raise_python(e.error);
  } catch (const std::bad_alloc&) {
    raise_python(Error{ErrorCode::OutOfMemory, "a host allocation failed (std::bad_alloc)"});
  }
}

nb::list ops() {
  nb::list ops;
  for (const OpInfo& info : kOps) {
    std::vector<std::string> scalars;
    for (int k = 0; k < info.scalar_count(); ++k) scalars.emplace_back(info.scalar_names[k]);
    ops.append(nb::make_tuple(std::string(info.name), info.arity, scalars));
  }
  return ops;
}

nb::list scalar_sets(const OpInfo& info, const ScalarSets& sets) {
  nb::list list;
  for (const Scalars& s : sets) {
    nb::dict set;
    const double values[2] = {s.s0, s.s1};
    for (int k = 0; k < info.scalar_count(); ++k) set[info.scalar_names[k]] = values[k];
    list.append(set);
  }
  return list;
}

// Every column of spec/ops.def, one dict per node: the same keys and values as the "ops" list of
// `tapewise-conform ops --json` (conform/ops_command.cpp).
nb::list op_table() {
  nb::list rows;
  for (const OpInfo& info : kOps) {
    nb::list names;
    for (int k = 0; k < info.scalar_count(); ++k) names.append(info.scalar_names[k]);
    nb::dict row;
    row["name"] = info.name;
    row["index"] = static_cast<int>(info.op);
    row["arity"] = info.arity;
    row["scalars"] = names;
    row["scalar_contract"] = scalar_contract_name(info.scalar_contract);
    row["domain_log2_lo"] = info.domain_log2_lo;
    row["domain_log2_hi"] = info.domain_log2_hi;
    row["positive_only"] = info.positive_only;
    row["kink"] = kink_name(info.kink);
    row["same_parent"] = same_parent_name(info.same_parent);
    row["bench_inputs"] = bench_inputs_name(info.bench_inputs);
    row["aten_parity"] = aten_parity_name(info.aten_parity);
    row["vjp_reads"] = vjp_reads_name(info.vjp_reads);
    row["sweep_reference"] = sweep_reference_name(info.sweep_reference);
    row["run_scalars"] = scalar_sets(info, info.run_scalars);
    row["graded_scalars"] = scalar_sets(info, info.graded_scalars);
    row["edge_scalars"] = scalar_sets(info, info.edge_scalars);
    row["staged"] = info.staged;
    rows.append(row);
  }
  return rows;
}

}  // namespace
}  // namespace tapewise::py

NB_MODULE(_tapewise, m) {
  using namespace tapewise::py;
  m.doc() = "tapewise's C++ core (nanobind); use it through the `tapewise` package.";
  // An array that shares a tape's memory (torch.from_dlpack of a value, a region's output) keeps the
  // tape alive until the array goes; one still alive when the interpreter exits outlives nanobind's
  // leak check, which would then print a page of "leaked instances" about memory nothing leaked.
  nb::set_leak_warnings(false);
  nb::register_exception_translator(translate);
  bind_backend(m);
  bind_tape(m);
  m.def("_bfloat16_dlpack", &bfloat16_dlpack, nb::arg("bits"), nb::arg("read_only"),
        "A DLPack object of dtype bfloat16 over a uint16 numpy array of bfloat16 bit patterns (for\n"
        "tapewise._arrays: numpy cannot export ml_dtypes.bfloat16 itself).");
  m.def("ops", &ops,
        "The nodes in table order (spec/ops.def): a list of (name, arity, scalar names); the index of\n"
        "a node is its op_index for Backend.forward_ptrs.");
  m.def("op_table", &op_table,
        "Every column of the op table (spec/ops.def), one dict per node in table order: name, index,\n"
        "arity, scalars, domain_log2_lo, domain_log2_hi (random magnitudes in [2^lo, 2^hi)),\n"
        "positive_only, kink, bench_inputs, aten_parity, run_scalars, graded_scalars, edge_scalars\n"
        "(lists of {scalar name: value}) and staged. The same rows as `tapewise-conform ops --json`.");
  m.attr("__version__") = TAPEWISE_VERSION_STRING;
  m.attr("spec_sha256") = TAPEWISE_SPEC_SHA256;
}
