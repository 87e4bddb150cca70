// conform/library/index.cpp — reading a vectors index (index.hpp) without trusting it: the JSON is
// another implementation's folder, possibly edited by hand, so every access is type-checked and
// every failure is a Result naming the field, never an exception.
#include "index.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "cases.hpp"  // kMaxCases
#include "files.hpp"
#include "json_io.hpp"

namespace tapewise::conform {

namespace {

using Json = nlohmann::ordered_json;  // as parse_json_document gives it

using files_detail::file_error;  // "PATH: why", InvalidArgument

// The member `key` of an object, or nullptr (a const Json's operator[] must not be used on a
// missing key).
const Json* member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

[[nodiscard]] Result<std::string> string_field(const Json& object, const char* key, const std::string& where) {
  const Json* j = member(object, key);
  if (!j || !j->is_string()) return file_error(where, std::string("'") + key + "' is missing or not a string");
  return j->get<std::string>();
}

// Absent means false; present must be a boolean.
[[nodiscard]] Result<bool> optional_bool(const Json& object, const char* key, const std::string& where) {
  const Json* j = member(object, key);
  if (!j) return false;
  if (!j->is_boolean()) return file_error(where, std::string("'") + key + "' is not true or false");
  return j->get<bool>();
}

[[nodiscard]] Result<double> scalar_value(const Json& j, const std::string& where) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    if (s == "nan") return std::nan("");
  }
  return file_error(where, "is neither a number nor \"inf\", \"-inf\", \"nan\"");
}

// Exactly the op's scalars, no others.
[[nodiscard]] Result<Scalars> scalars_of(const Json& entry, Op op, const std::string& where) {
  const OpInfo& info = op_info(op);
  Scalars s;
  const Json* given = member(entry, "scalars");
  if (!given) {
    if (info.scalar_count() == 0) return s;
    return file_error(where, "'scalars' is missing");
  }
  if (!given->is_object()) return file_error(where, "'scalars' is not an object");
  double* slots[2] = {&s.s0, &s.s1};
  for (int i = 0; i < info.scalar_count(); ++i) {
    const Json* value = member(*given, info.scalar_names[i]);
    if (!value) return file_error(where, std::string("scalar '") + info.scalar_names[i] + "' is missing");
    auto v = scalar_value(*value, where + ": scalar '" + info.scalar_names[i] + "'");
    TAPEWISE_CHECK(v);
    *slots[i] = *v;
  }
  if (static_cast<int>(given->size()) != info.scalar_count())
    return file_error(where, std::string("'scalars' names a scalar that ") + info.name + " does not take");
  return s;
}

// `files` must map exactly `names` to the schema's file names (file_of(name)).
[[nodiscard]] Result<void> exact_files(const Json& entry, const char* key, const std::vector<std::string>& names,
                                       std::string (*file_of)(const std::string&), const std::string& where) {
  const Json* files = member(entry, key);
  if (!files || !files->is_object()) return file_error(where, std::string("'") + key + "' is missing or not an object");
  std::string expected;
  for (const std::string& n : names) expected += (expected.empty() ? "" : ", ") + n + ": " + file_of(n);
  if (files->size() != names.size())
    return file_error(where, std::string("'") + key + "' must name exactly {" + expected + "}");
  for (const std::string& n : names) {
    const Json* file = member(*files, n.c_str());
    if (!file || !file->is_string() || file->get<std::string>() != file_of(n))
      return file_error(where, std::string("'") + key + "' must name exactly {" + expected + "}");
  }
  return {};
}

[[nodiscard]] Result<std::vector<std::pair<int, std::string>>> rows_of(const Json& entry, const std::string& where) {
  std::vector<std::pair<int, std::string>> rows;
  const Json* given = member(entry, "rows");
  if (!given) return rows;
  if (!given->is_array()) return file_error(where, "'rows' is not an array");
  for (const Json& r : *given) {
    if (!r.is_object()) return file_error(where, "an element of 'rows' is not an object");
    const Json* line = member(r, "line");
    const Json* note = member(r, "note");
    if (!line || !line->is_number_integer() || line->get<std::int64_t>() < 0 ||
        line->get<std::int64_t>() > std::numeric_limits<int>::max())
      return file_error(where, "a row's 'line' is not a line number");
    if (note && !note->is_string()) return file_error(where, "a row's 'note' is not a string");
    rows.push_back({line->get<int>(), note ? note->get<std::string>() : std::string()});
  }
  return rows;
}

[[nodiscard]] Result<void> check_suite_files(const Json& entry, const IndexedSuite& s, const std::string& where) {
  const std::vector<std::string> grads = suite_grad_names(s.op, s.same);
  std::vector<std::string> inputs = suite_input_names(s.op, s.same);
  inputs.push_back("g");
  std::vector<std::string> outputs{"y"};
  outputs.insert(outputs.end(), grads.begin(), grads.end());
  if (auto ok = exact_files(entry, "inputs", inputs, input_file, where); !ok) return ok;
  if (auto ok = exact_files(entry, "outputs", outputs, output_file, where); !ok) return ok;
  // Random suites are graded against the reference; their expected files are a convenience.
  if (s.special || member(entry, "expected"))
    if (auto ok = exact_files(entry, "expected", outputs, expected_file, where); !ok) return ok;
  return {};
}

[[nodiscard]] Result<IndexedSuite> suite_of(const Json& entry, const std::string& where) {
  if (!entry.is_object()) return file_error(where, "is not an object");
  IndexedSuite s;
  auto id = string_field(entry, "id", where);
  TAPEWISE_CHECK(id);
  if (!is_plain_file_name(*id) || escaped(*id) != *id)
    return file_error(where, "'id' '" + escaped_prefix(*id) + "' is not a plain folder name");
  s.id = *id;
  auto op_text = string_field(entry, "op", where);
  TAPEWISE_CHECK(op_text);
  const auto op = op_from_name(*op_text);
  if (!op) return file_error(where, "unknown op '" + escaped_prefix(*op_text) + "'");
  s.op = *op;
  auto dtype = string_field(entry, "dtype", where);
  TAPEWISE_CHECK(dtype);
  const std::optional<DType> named = dtype_from_name(*dtype);
  if (!named || *dtype != dtype_name(*named))  // the file's names are dtype_name's, no aliases
    return file_error(where, "dtype '" + escaped_prefix(*dtype) + "' is not float32, float64, bfloat16 or float16");
  s.dtype = *named;
  auto kind = string_field(entry, "kind", where);
  TAPEWISE_CHECK(kind);
  if (*kind != "special" && *kind != "random")
    return file_error(where, "kind '" + escaped_prefix(*kind) + "' is not special or random");
  s.special = *kind == "special";
  auto same = optional_bool(entry, "same", where);
  TAPEWISE_CHECK(same);
  s.same = *same;
  if (s.same && op_info(s.op).arity != 2) return file_error(where, "'same' on a unary op");
  if (s.same && !s.special)
    return file_error(where, "'same' on a random suite (vectors writes it for special suites only)");
  auto scalars = scalars_of(entry, s.op, where);
  TAPEWISE_CHECK(scalars);
  s.scalars = *scalars;
  auto rows = rows_of(entry, where);
  TAPEWISE_CHECK(rows);
  s.rows = std::move(*rows);
  TAPEWISE_CHECK(check_suite_files(entry, s, where));
  return s;
}

// seed, cases and the version fields of the top level.
[[nodiscard]] Result<void> header_of(const Json& index, VectorsIndex& out, const std::string& where) {
  const Json* seed = member(index, "seed");
  if (!seed || !seed->is_number_unsigned())
    return file_error(where, "'seed' must be a whole number from 0 to 18446744073709551615");
  out.seed = seed->get<std::uint64_t>();
  const Json* cases = member(index, "cases");
  if (!cases || !cases->is_number_integer() || cases->get<std::int64_t>() < 0 || cases->get<std::int64_t>() > kMaxCases)
    return file_error(where, "'cases' must be a whole number from 0 to " + std::to_string(kMaxCases));
  out.cases = cases->get<std::int64_t>();
  for (const auto& [key, field] : {std::pair{"tapewise_version", &out.tapewise_version},
                                   std::pair{"spec_sha256", &out.spec_sha256}}) {
    const Json* j = member(index, key);
    if (!j) continue;
    if (!j->is_string()) return file_error(where, std::string("'") + key + "' is not a string");
    *field = j->get<std::string>();
  }
  return {};
}

}  // namespace

std::vector<std::string> suite_input_names(Op op, bool same) {
  if (op_info(op).arity == 1) return {"x"};
  if (same) return {"a"};
  return {"a", "b"};
}

std::vector<std::string> suite_grad_names(Op op, bool same) {
  if (op_info(op).arity == 1) return {"dx"};
  if (same) return {"da"};
  return {"da", "db"};
}

Result<VectorsIndex> parse_vectors_index(const std::string& text, const std::string& where) {
  // Depth-checked before any recursive copy; its message says where the text went wrong.
  TAPEWISE_TRY(index, parse_json_document(text, where));
  if (!index.is_object()) return file_error(where, "is not a JSON object");
  const Json* schema = member(index, "schema");
  if (!schema || !schema->is_string() || schema->get<std::string>() != kVectorsSchema)
    return file_error(where, std::string("schema is not ") + kVectorsSchema);
  VectorsIndex out;
  TAPEWISE_CHECK(header_of(index, out, where));
  const Json* suites = member(index, "suites");
  if (!suites || !suites->is_array()) return file_error(where, "no 'suites' array");
  if (suites->empty()) return file_error(where, "lists no suites");
  for (std::size_t i = 0; i < suites->size(); ++i) {
    auto suite = suite_of((*suites)[i], where + ": suites[" + std::to_string(i) + "]");
    TAPEWISE_CHECK(suite);
    out.suites.push_back(std::move(*suite));
  }
  return out;
}

}  // namespace tapewise::conform
