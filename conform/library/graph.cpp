// conform/library/graph.cpp — the graph checker (graph.hpp): reading and validating the graph file,
// recording it on a Tape, gathering the production's results, grading them node by node against
// the MPFR reference. The `graph` subcommand around it is graph_command.cpp.
#include "graph.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backends/engine.hpp"  // staged_vjp
#include "cases.hpp"           // host_array
#include "dag.hpp"
#include "files.hpp"
#include "json_io.hpp"
#include "measure.hpp"
#include "grade.hpp"  // accepted_above_bound: the rule sweep applies
#include "reference.hpp"
#include "sweep_reference.hpp"  // kY, kGradA, kGradB

namespace tapewise::conform {

// A value exactly, as C's %a ("0x1.8p+1", "-0x0p+0"), or "inf", "-inf", "nan".
std::string hex(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// A value in a few digits, for messages and bounds.
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// `text`, read whole as a C literal and rounded once to `dtype` (strtof for float32).
std::optional<double> read_literal(const std::string& text, DType dtype) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  // float32 and the 16-bit dtypes read through strtof: a 16-bit literal is R16(R32(text)), as ATen
  // builds a c10::Half or c10::BFloat16 from a float (spec/conventions.md §0.3).
  const double v = dtype != DType::float64 ? static_cast<double>(std::strtof(text.c_str(), &end))
                                           : std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return round_to(dtype, v);
}

// The bits of `v` in the dtype, NaN matching NaN.
bool identical(double a, double b, DType dtype) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::signbit(a) == std::signbit(b) && round_to(dtype, a) == round_to(dtype, b);
}

namespace {

namespace ref = tapewise::reference;
using GraphJson = nlohmann::json;
using Values = std::vector<double>;

// A bad graph: the message says what and where.
tl::unexpected<Error> bad_graph(const std::string& message) {
  return fail(ErrorCode::InvalidArgument, "bad graph: " + message);
}

// ---- JSON ---------------------------------------------------------------------------------------

// nlohmann's own DOM builder with three changes that an exact checker needs: a number with a
// fraction or exponent is kept as its text (a float32 value must be rounded once, from its digits,
// not through double); "-0", which nlohmann reads as the integer 0 (only "-0" arrives here as a
// signed 0: "0" is unsigned), is kept as the text "-0"; and a key repeated in one object is refused
// instead of silently keeping the last value.
class ExactJsonReader {
 public:
  explicit ExactJsonReader(GraphJson& root) : dom_(root, false) {}
  bool null() { return counted() && dom_.null(); }
  bool boolean(bool v) { return counted() && dom_.boolean(v); }
  bool number_integer(std::int64_t v) {
    if (!counted()) return false;
    if (v != 0) return dom_.number_integer(v);
    std::string minus_zero = "-0";
    return dom_.string(minus_zero);
  }
  bool number_unsigned(std::uint64_t v) { return counted() && dom_.number_unsigned(v); }
  bool number_float(double, const std::string& text) {
    std::string copy = text;
    return counted() && dom_.string(copy);
  }
  bool string(std::string& s) { return counted() && dom_.string(s); }
  bool binary(GraphJson::binary_t& b) { return counted() && dom_.binary(b); }
  bool start_object(std::size_t n) {
    if (!counted()) return false;
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second) {
      error_ = "duplicate key '" + escaped_prefix(k) + "' in one object";
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return counted() && dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    const std::string what = e.what();
    const auto bracket = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    error_ = bracket == std::string::npos ? what : what.substr(bracket + 2);
    return false;
  }
  const std::string& error() const { return error_; }
  bool too_large() const { return values_ > kMaxGraphJsonValues; }

 private:
  // One more value held in the DOM; false (an error) past kMaxGraphJsonValues, before it is built.
  bool counted() {
    if (++values_ <= kMaxGraphJsonValues) return true;
    error_ = "more than " + std::to_string(kMaxGraphJsonValues) + " JSON values: larger than any graph the checker takes";
    return false;
  }
  std::int64_t values_ = 0;
  nlohmann::detail::json_sax_dom_parser<GraphJson> dom_;
  std::vector<std::set<std::string>> keys_;
  std::string error_;
};

[[nodiscard]] Result<GraphJson> read_json(const std::string& text) {
  if (auto deep = check_json_depth(text, "bad graph"); !deep) return tl::unexpected(deep.error());
  GraphJson doc;
  ExactJsonReader reader(doc);
  if (!GraphJson::sax_parse(text, &reader) || !reader.error().empty())
    return bad_graph((reader.too_large() ? "" : "not valid JSON: ") +
                     escaped(reader.error().empty() ? "parse error" : reader.error()));
  return doc;
}

// `value` shortened and escaped for a message, without walking it: an array or object is named by
// its size (a hostile value may be huge), a string by its first bytes.
std::string quote(const GraphJson& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " elements";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " keys";
  const std::string text = value.is_string() ? value.get_ref<const std::string&>().substr(0, 41) : value.dump();
  return "'" + escaped_prefix(text, 40) + "'";
}

// Every key of `object` must be one of `allowed`.
[[nodiscard]] Result<void> check_keys(const GraphJson& object, std::initializer_list<const char*> allowed,
                                      const std::string& where) {
  std::string list;
  for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* k : allowed) known = known || key == k;
    if (!known) return bad_graph(where + ": unknown key '" + escaped_prefix(key) + "' (allowed: " + list + ")");
  }
  return {};
}

// ---- numbers and shapes -------------------------------------------------------------------------

// The C literal a NUMBER stands for (graph.hpp), or nullopt when `v` is not a NUMBER.
std::optional<std::string> number_text(const GraphJson& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return std::nullopt;
}

std::optional<double> read_number(const GraphJson& v, DType dtype) {
  const auto text = number_text(v);
  return text ? read_literal(*text, dtype) : std::nullopt;
}

[[nodiscard]] Result<Values> read_values(const GraphJson& list, DType dtype, const std::string& where) {
  if (!list.is_array()) return bad_graph(where + ": 'values' must be an array of numbers");
  Values values;
  values.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto v = read_number(list[i], dtype);
    if (!v)
      return bad_graph(where + ": value " + std::to_string(i) + " (" + quote(list[i]) +
                       ") is not a number (a JSON number, a C decimal or hex-float string, inf, -inf or nan)");
    values.push_back(*v);
  }
  return values;
}

[[nodiscard]] Result<Shape> read_shape(const GraphJson& dims, const std::string& where) {
  if (!dims.is_array()) return bad_graph(where + ": 'shape' must be an array of non-negative integers");
  Shape shape;
  for (const GraphJson& d : dims) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      return bad_graph(where + ": shape dim " + quote(d) + " is not a non-negative integer");
    shape.dims.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
  }
  if (!shape.valid()) return bad_graph(where + ": shape " + shape.str() + " has too many elements");
  return shape;
}

// Values with an optional shape (default [count]); the count must be the shape's element count.
[[nodiscard]] Result<std::pair<Shape, Values>> read_shaped_values(const GraphJson& values, const GraphJson* shape,
                                                                  DType dtype, const std::string& where) {
  TAPEWISE_TRY(v, read_values(values, dtype, where));
  Shape s{static_cast<std::int64_t>(v.size())};
  if (shape) {
    TAPEWISE_TRY(given, read_shape(*shape, where));
    s = given;
  }
  if (s.numel() != static_cast<std::int64_t>(v.size()))
    return bad_graph(where + ": " + std::to_string(v.size()) + " values for shape " + s.str() + " (" +
                     std::to_string(s.numel()) + " elements)");
  return std::pair<Shape, Values>{s, std::move(v)};
}

// ---- the graph's structure ----------------------------------------------------------------------

bool is_valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

// The leaf and node entries of the document, in id order (leaves first), with their names.
struct Entries {
  std::vector<const GraphJson*> items;
  std::vector<std::string> names;
  std::map<std::string, std::int64_t> ids;
  std::size_t leaf_count = 0;
};

[[nodiscard]] Result<void> add_entries(Entries& e, const GraphJson& doc, const char* key, const char* kind) {
  if (!doc.contains(key)) return bad_graph(std::string("missing key '") + key + "'");
  const GraphJson& list = doc[key];
  if (!list.is_array()) return bad_graph(std::string("'") + key + "' must be an array of objects");
  if (list.empty())
    return bad_graph(std::string("empty graph: '") + key + "' is empty (a graph needs at least one leaf and one node)");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = std::string(kind) + " #" + std::to_string(e.items.size());
    if (!list[i].is_object()) return bad_graph(where + ": must be an object");
    if (!list[i].contains("name") || !list[i]["name"].is_string()) return bad_graph(where + ": missing 'name' (a string)");
    const std::string name = list[i]["name"].get<std::string>();
    if (!is_valid_name(name))
      return bad_graph(where + ": name " + quote(list[i]["name"]) + " must be 1 to 64 characters of A-Z a-z 0-9 _ . -");
    const auto id = static_cast<std::int64_t>(e.items.size());
    if (!e.ids.emplace(name, id).second)
      return bad_graph(where + ": duplicate name '" + name + "' (also #" + std::to_string(e.ids[name]) + ")");
    e.items.push_back(&list[i]);
    e.names.push_back(name);
  }
  return {};
}

[[nodiscard]] Result<Entries> collect_entries(const GraphJson& doc) {
  Entries e;
  TAPEWISE_CHECK(add_entries(e, doc, "leaves", "leaf"));
  e.leaf_count = e.items.size();
  TAPEWISE_CHECK(add_entries(e, doc, "nodes", "node"));
  if (static_cast<std::int64_t>(e.items.size()) > kMaxGraphEntries)
    return bad_graph(std::to_string(e.items.size()) + " leaves and nodes; the checker takes at most " +
                     std::to_string(kMaxGraphEntries));
  return e;
}

// The ids a node entry names as parents (unknown names skipped): for following references
// before the entry itself has been validated.
std::vector<std::int64_t> raw_parent_ids(const Entries& e, std::int64_t id) {
  std::vector<std::int64_t> out;
  const GraphJson& item = *e.items[static_cast<std::size_t>(id)];
  if (!item.contains("parents") || !item["parents"].is_array()) return out;
  for (const GraphJson& p : item["parents"])
    if (p.is_string() && e.ids.count(p.get<std::string>())) out.push_back(e.ids.at(p.get<std::string>()));
  return out;
}

// A path of parent references from `from` back to `to`, as names "from -> ... -> to"; empty
// when there is none.
std::string reference_path(const Entries& e, std::int64_t from, std::int64_t to) {
  std::map<std::int64_t, std::int64_t> came_from{{from, -1}};
  std::vector<std::int64_t> stack{from};
  while (!stack.empty()) {
    const std::int64_t at = stack.back();
    stack.pop_back();
    if (at == to) {
      std::vector<std::string> names;
      for (std::int64_t n = at; n != -1; n = came_from[n]) names.push_back(e.names[static_cast<std::size_t>(n)]);
      std::string path;
      for (auto it = names.rbegin(); it != names.rend(); ++it) path += (path.empty() ? "" : " -> ") + *it;
      return path;
    }
    for (std::int64_t p : raw_parent_ids(e, at))
      if (came_from.emplace(p, at).second) stack.push_back(p);
  }
  return "";
}

// The id of parent `name` of node `id`: an earlier leaf or node.
[[nodiscard]] Result<std::int64_t> resolve_parent(const Entries& e, std::int64_t id, const GraphJson& name,
                                                  const std::string& where) {
  if (!name.is_string()) return bad_graph(where + ": parent " + quote(name) + " must be a name (a string)");
  const auto found = e.ids.find(name.get<std::string>());
  if (found == e.ids.end()) return bad_graph(where + ": parent " + quote(name) + " is not a leaf or node of this graph");
  const std::int64_t parent = found->second;
  if (parent < id) return parent;
  const std::string me = e.names[static_cast<std::size_t>(id)];
  if (parent == id) return bad_graph(where + ": cycle: '" + me + "' is its own parent");
  const std::string cycle = reference_path(e, parent, id);
  if (!cycle.empty()) return bad_graph(where + ": cycle: " + me + " -> " + cycle);
  return bad_graph(where + ": parent '" + found->first + "' (#" + std::to_string(parent) +
                   ") is defined after it (a forward reference: parents must be earlier leaves or nodes)");
}

std::string op_list() {
  std::string list;
  for (const OpInfo& info : kOps) list += std::string(list.empty() ? "" : ", ") + info.name;
  return list;
}

std::string scalar_list(const OpInfo& info) {
  if (info.scalar_count() == 0) return std::string(info.name) + " takes no scalars";
  std::string list = std::string(info.name) + " takes " + info.scalar_names[0];
  if (info.scalar_count() == 2) list += ", " + std::string(info.scalar_names[1]);
  return list;
}

// A scalar's value is the spec's host double; the row's scalar_contract decides which values are
// allowed once rounded to the dtype (never NaN).
[[nodiscard]] Result<double> read_scalar(const GraphJson& value, const OpInfo& info, const std::string& name,
                                         DType dtype, const std::string& where) {
  const auto v = read_number(value, DType::float64);
  if (!v) return bad_graph(where + ": scalar '" + name + "' (" + quote(value) + ") is not a number");
  if (std::isnan(*v)) return bad_graph(where + ": scalar '" + name + "' is NaN");
  const double rounded = round_to(dtype, *v);
  const std::string in_dtype = std::string(" in ") + dtype_name(dtype);
  const bool needs_finite = info.scalar_contract == ScalarContract::finite || info.scalar_contract == ScalarContract::positive;
  if (needs_finite && !std::isfinite(rounded))
    return bad_graph(where + ": scalar '" + name + "' rounds to " + (rounded > 0 ? "inf" : "-inf") + in_dtype +
                     "; " + info.name + " needs a finite " + name);
  if (info.scalar_contract == ScalarContract::positive && !(rounded > 0))
    return bad_graph(where + ": scalar '" + name + "' " + quote(value) + " rounds to " +
                     (rounded == 0 && std::signbit(rounded) ? "-0" : number(rounded)) + in_dtype + "; " + info.name +
                     " needs " + name + " to round to a positive value (TorchLean's contract)");
  return *v;
}

[[nodiscard]] Result<Scalars> read_scalars(const GraphJson& entry, const OpInfo& info, DType dtype,
                                           const std::string& where) {
  Scalars s;
  const GraphJson empty = GraphJson::object();
  const GraphJson& given = entry.contains("scalars") ? entry["scalars"] : empty;
  if (!given.is_object()) return bad_graph(where + ": 'scalars' must be an object (" + scalar_list(info) + ")");
  for (const auto& [key, value] : given.items()) {
    const bool known = key == info.scalar_names[0] || (info.scalar_count() == 2 && key == info.scalar_names[1]);
    if (!known || key.empty()) return bad_graph(where + ": unknown scalar '" + escaped_prefix(key) + "' (" + scalar_list(info) + ")");
  }
  double* targets[2] = {&s.s0, &s.s1};
  for (int k = 0; k < info.scalar_count(); ++k) {
    const std::string name = info.scalar_names[k];
    if (!given.contains(name)) return bad_graph(where + ": missing scalar '" + name + "' (" + scalar_list(info) + ")");
    TAPEWISE_TRY(v, read_scalar(given[name], info, name, dtype, where));
    *targets[k] = v;
  }
  return s;
}

[[nodiscard]] Result<GraphNode> read_leaf(const Entries& e, std::int64_t id, DType dtype) {
  const GraphJson& item = *e.items[static_cast<std::size_t>(id)];
  const std::string where = "leaf '" + e.names[static_cast<std::size_t>(id)] + "' (#" + std::to_string(id) + ")";
  TAPEWISE_CHECK(check_keys(item, {"name", "values", "shape", "requires_grad"}, where));
  if (!item.contains("values")) return bad_graph(where + ": missing 'values'");
  TAPEWISE_TRY(shaped, read_shaped_values(item["values"], item.contains("shape") ? &item["shape"] : nullptr, dtype, where));
  GraphNode leaf;
  leaf.name = e.names[static_cast<std::size_t>(id)];
  leaf.shape = shaped.first;
  leaf.values = std::move(shaped.second);
  if (item.contains("requires_grad")) {
    if (!item["requires_grad"].is_boolean()) return bad_graph(where + ": 'requires_grad' must be true or false");
    leaf.requires_grad = item["requires_grad"].get<bool>();
  }
  return leaf;
}

// The op of a node entry, and the "node 'name' (#id, op)" that messages about it start with.
[[nodiscard]] Result<const OpInfo*> read_op(const GraphJson& item, std::string& where) {
  if (!item.contains("op")) return bad_graph(where + ": missing 'op'");
  if (!item["op"].is_string()) return bad_graph(where + ": 'op' must be a node name (" + op_list() + ")");
  const auto op = op_from_name(item["op"].get<std::string>());
  if (!op) return bad_graph(where + ": unknown op " + quote(item["op"]) + " (ops: " + op_list() + ")");
  where.insert(where.size() - 1, ", " + std::string(op_name(*op)));
  return &op_info(*op);
}

[[nodiscard]] Result<GraphNode> read_node(const Entries& e, std::int64_t id, const Graph& graph) {
  const GraphJson& item = *e.items[static_cast<std::size_t>(id)];
  std::string where = "node '" + e.names[static_cast<std::size_t>(id)] + "' (#" + std::to_string(id) + ")";
  TAPEWISE_CHECK(check_keys(item, {"name", "op", "parents", "scalars"}, where));
  TAPEWISE_TRY(info, read_op(item, where));
  if (!item.contains("parents") || !item["parents"].is_array())
    return bad_graph(where + ": 'parents' must be an array of names");
  const GraphJson& parents = item["parents"];
  if (static_cast<int>(parents.size()) != info->arity)
    return bad_graph(where + ": wrong arity: " + info->name + " takes " + std::to_string(info->arity) + " parent" +
                     (info->arity == 1 ? "" : "s") + ", got " + std::to_string(parents.size()));
  GraphNode node;
  node.name = e.names[static_cast<std::size_t>(id)];
  node.op = info->op;
  node.arity = info->arity;
  node.requires_grad = false;
  for (int k = 0; k < info->arity; ++k) {
    TAPEWISE_TRY(parent, resolve_parent(e, id, parents[static_cast<std::size_t>(k)], where));
    node.parents[static_cast<std::size_t>(k)] = parent;
    node.requires_grad = node.requires_grad || graph.nodes[static_cast<std::size_t>(parent)].requires_grad;
  }
  node.shape = graph.nodes[static_cast<std::size_t>(node.parents[0])].shape;
  if (info->arity == 2) {
    const GraphNode& a = graph.nodes[static_cast<std::size_t>(node.parents[0])];
    const GraphNode& b = graph.nodes[static_cast<std::size_t>(node.parents[1])];
    if (a.shape != b.shape)
      return bad_graph(where + ": shape mismatch: parents '" + a.name + "' " + a.shape.str() + " and '" + b.name +
                       "' " + b.shape.str() + " differ (no broadcasting)");
  }
  TAPEWISE_TRY(scalars, read_scalars(item, *info, graph.dtype, where));
  node.scalars = scalars;
  return node;
}

[[nodiscard]] Result<DType> read_dtype(const GraphJson& doc) {
  if (!doc.contains("dtype")) return bad_graph("missing key 'dtype' (float32, float64, bfloat16 or float16)");
  const GraphJson& d = doc["dtype"];
  for (DType dtype : kDTypes)
    if (d == dtype_name(dtype)) return dtype;
  return bad_graph("dtype " + quote(d) + " is not float32, float64, bfloat16 or float16");
}

[[nodiscard]] Result<void> check_header(const GraphJson& doc) {
  if (!doc.is_object()) return bad_graph("the document must be a JSON object");
  if (auto ok = check_keys(doc, {"schema", "description", "dtype", "leaves", "nodes", "output", "seed"}, "the graph"); !ok)
    return ok;
  if (!doc.contains("schema")) return bad_graph(std::string("missing key 'schema' (\"") + kGraphSchema + "\")");
  if (doc["schema"] != kGraphSchema)
    return bad_graph("schema " + quote(doc["schema"]) + " is not \"" + kGraphSchema + "\"");
  return {};
}

[[nodiscard]] Result<std::int64_t> read_output(const GraphJson& doc, const Entries& e) {
  if (!doc.contains("output")) return bad_graph("missing key 'output' (the name of a leaf or node)");
  const GraphJson& out = doc["output"];
  if (!out.is_string()) return bad_graph("'output' must be the name of a leaf or node (a string)");
  const auto found = e.ids.find(out.get<std::string>());
  if (found == e.ids.end()) return bad_graph("output " + quote(out) + " is not a leaf or node of this graph");
  return found->second;
}

[[nodiscard]] Result<Values> read_seed(const GraphJson& doc, const Graph& g) {
  if (!doc.contains("seed")) return bad_graph("missing key 'seed' (the output's cotangent)");
  const GraphJson& seed = doc["seed"];
  const GraphNode& out = g.nodes[static_cast<std::size_t>(g.output)];
  const GraphJson* values = &seed;
  const GraphJson* shape = nullptr;
  if (seed.is_object()) {
    TAPEWISE_CHECK(check_keys(seed, {"values", "shape"}, "seed"));
    if (!seed.contains("values")) return bad_graph("seed: missing 'values'");
    values = &seed["values"];
    shape = seed.contains("shape") ? &seed["shape"] : nullptr;
  }
  TAPEWISE_TRY(shaped, read_shaped_values(*values, shape, g.dtype, "seed"));
  if (shape && shaped.first != out.shape)
    return bad_graph("seed shape mismatch: seed shape " + shaped.first.str() + ", output '" + out.name + "' has shape " +
                     out.shape.str());
  if (static_cast<std::int64_t>(shaped.second.size()) != out.shape.numel())
    return bad_graph("seed shape mismatch: " + std::to_string(shaped.second.size()) + " seed values, output '" +
                     out.name + "' has shape " + out.shape.str() + " (" + std::to_string(out.shape.numel()) +
                     " elements)");
  return std::move(shaped.second);
}

}  // namespace

Result<Graph> parse_graph(const std::string& json_text) {
  TAPEWISE_TRY(doc, read_json(json_text));
  TAPEWISE_CHECK(check_header(doc));
  Graph g;
  TAPEWISE_TRY(dtype, read_dtype(doc));
  g.dtype = dtype;
  TAPEWISE_TRY(entries, collect_entries(doc));
  std::int64_t elements = 0;
  for (std::size_t id = 0; id < entries.items.size(); ++id) {
    auto node = id < entries.leaf_count ? read_leaf(entries, static_cast<std::int64_t>(id), dtype)
                                        : read_node(entries, static_cast<std::int64_t>(id), g);
    TAPEWISE_CHECK(node);
    elements += node->shape.numel();
    if (elements > kMaxGraphElements)
      return bad_graph("more than " + std::to_string(kMaxGraphElements) + " elements over the leaves and nodes (at '" +
                       node->name + "'); the checker takes at most that many");
    g.nodes.push_back(std::move(*node));
  }
  TAPEWISE_TRY(output, read_output(doc, entries));
  g.output = output;
  TAPEWISE_TRY(seed, read_seed(doc, g));
  g.seed = std::move(seed);
  return g;
}

// ---- the production: record, backward, re-run each VJP alone ------------------------------------

namespace {

HostArray host_array(DType dtype, const Shape& shape, const Values& values) {
  HostArray h = conform::host_array(dtype, values);  // exact: already values of the dtype
  h.shape = shape;
  return h;
}

Values widen(const HostArray& h) {
  Values out(static_cast<std::size_t>(h.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = h.as_double(static_cast<std::int64_t>(i));
  return out;
}

bool passes_once(const GraphNode& n) {
  return n.arity == 2 && n.parents[0] == n.parents[1] && op_info(*n.op).same_parent == SameParent::once;
}

// The tape's walk (spec §2) on the graph's structure alone: which nodes receive a gradient, which
// run their VJP. Independent of the production, so a production that skips a node is caught.
struct Walk {
  std::vector<bool> reached;
  std::vector<bool> runs_vjp;
};

Walk walk_graph(const Graph& g) {
  Walk w{std::vector<bool>(g.nodes.size(), false), std::vector<bool>(g.nodes.size(), false)};
  w.reached[static_cast<std::size_t>(g.output)] = true;
  for (std::int64_t id = g.output; id >= 0; --id) {
    const GraphNode& n = g.nodes[static_cast<std::size_t>(id)];
    if (!w.reached[static_cast<std::size_t>(id)] || !n.op || !n.requires_grad) continue;
    w.runs_vjp[static_cast<std::size_t>(id)] = true;
    for (int k = 0; k < (passes_once(n) ? 1 : n.arity); ++k) {
      const auto p = static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]);
      if (g.nodes[p].requires_grad) w.reached[p] = true;
    }
  }
  return w;
}

bool slot_expected(const Graph& g, const Walk& w, std::int64_t id, bool dense) {
  return w.reached[static_cast<std::size_t>(id)] || (dense && g.nodes[static_cast<std::size_t>(id)].requires_grad);
}

// The graph's node i is the tape's node at position i (tape.id_at(i)): a graph names nodes by
// position, a tape by ids that carry its serial.
[[nodiscard]] Result<Tape> record(const Graph& g, Backend& backend) {
  Tape tape(backend.shared_from_this());
  for (std::size_t id = 0; id < g.nodes.size(); ++id) {
    const GraphNode& n = g.nodes[id];
    NodeId parents[2] = {-1, -1};
    for (int k = 0; k < n.arity; ++k)
      parents[k] = tape.id_at(static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]));
    auto recorded = n.op ? tape.apply(*n.op, std::span<const NodeId>(parents, static_cast<std::size_t>(n.arity)), n.scalars)
                         : tape.leaf(host_array(g.dtype, n.shape, n.values), n.requires_grad);
    if (!recorded) return fail(recorded.error().code, "recording '" + n.name + "': " + recorded.error().str());
    if (*recorded != tape.id_at(id)) return fail(ErrorCode::InvalidArgument, "recording '" + n.name + "': unexpected tape id");
  }
  return tape;
}

// Node `n`'s VJP alone, on the backend and path the tape used, at the given parent values and g.
[[nodiscard]] Result<std::vector<Values>> rerun_vjp(Backend& backend, const Graph& g, const GraphNode& n,
                                                    const Production& p, const Values& upstream, VjpPath path) {
  std::vector<Buffer> inputs, grads;
  for (int k = 0; k < n.arity; ++k) {
    const auto parent = static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]);
    TAPEWISE_TRY(in, backend.upload(host_array(g.dtype, n.shape, p.values[parent])));
    inputs.push_back(std::move(in));
    TAPEWISE_TRY(out, backend.allocate(n.shape, g.dtype, AllocTag::gradient));
    grads.push_back(std::move(out));
  }
  TAPEWISE_TRY(g_buffer, backend.upload(host_array(g.dtype, n.shape, upstream), AllocTag::gradient));
  const Buffer* in_ptrs[2] = {&inputs[0], &inputs.back()};
  Buffer* out_ptrs[2] = {&grads[0], &grads.back()};
  const std::span<const Buffer* const> in_span(in_ptrs, inputs.size());
  const std::span<Buffer* const> out_span(out_ptrs, grads.size());
  auto ran = path == VjpPath::fused ? backend.vjp_fused(*n.op, n.scalars, in_span, g_buffer, out_span)
                                    : staged_vjp(backend, *n.op, n.scalars, in_span, g_buffer, out_span);
  TAPEWISE_CHECK(ran);
  std::vector<Values> contributions;
  for (const Buffer& b : grads) {
    TAPEWISE_TRY(h, backend.download(b));
    contributions.push_back(widen(h));
  }
  return contributions;
}

[[nodiscard]] Result<Production> run_production(const Graph& g, const Walk& walk, Backend& backend,
                                                const GraphCheckOptions& o) {
  TAPEWISE_TRY(tape, record(g, backend));
  const HostArray seed = host_array(g.dtype, g.nodes[static_cast<std::size_t>(g.output)].shape, g.seed);
  const NodeId output = tape.id_at(static_cast<std::size_t>(g.output));
  auto grads = o.dense ? tape.backward_dense(output, seed, o.path) : tape.backward(output, seed, o.path);
  TAPEWISE_CHECK(grads);
  Production p;
  p.math = math_mode(backend);
  p.contributions.resize(g.nodes.size());
  for (std::size_t id = 0; id < g.nodes.size(); ++id) {
    TAPEWISE_TRY(value, tape.value(tape.id_at(id)));
    p.values.push_back(widen(value));
    std::optional<Values> slot;
    if (grads->has(tape.id_at(id))) {
      TAPEWISE_TRY(h, grads->host(tape.id_at(id)));
      slot = widen(h);
    }
    p.slots.push_back(std::move(slot));
  }
  for (std::size_t id = 0; id < g.nodes.size(); ++id) {
    const GraphNode& n = g.nodes[id];
    if (!walk.runs_vjp[id] || !p.slots[id]) continue;
    if (passes_once(n)) {
      p.contributions[id] = {*p.slots[id]};
      continue;
    }
    TAPEWISE_TRY(c, rerun_vjp(backend, g, n, p, *p.slots[id], o.path));
    p.contributions[id] = std::move(c);
  }
  return p;
}

// ---- grading ------------------------------------------------------------------------------------

constexpr std::size_t kViolationsShown = 5;

void note(NodeCheck& row, const std::string& line) {
  if (row.violations.size() < kViolationsShown) row.violations.push_back(line);
}

// The parents' values at element e, as the reference takes them.
std::array<ref::Real, 2> inputs_at(const GraphNode& n, const Production& p, std::size_t e) {
  std::array<ref::Real, 2> in{ref::real(0), ref::real(0)};
  for (int k = 0; k < n.arity; ++k)
    in[static_cast<std::size_t>(k)] = ref::real(p.values[static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)])][e]);
  return in;
}

std::string inputs_text(const GraphNode& n, const Production& p, std::size_t e) {
  std::string t;
  for (int k = 0; k < n.arity; ++k)
    t += std::string(k ? ", " : "") + hex(p.values[static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)])][e]);
  return t;
}

// One produced value against the exact one, folded into `check`; true when it conforms: within the
// bound, or above it where `accepted()` says the rule that `sweep` applies accepts it (grade.hpp,
// accepted_above_bound).
template <class Accepted>
bool grade_value(LocalCheck& check, const ref::Real& exact, double produced, DType dtype, double w,
                 const Accepted& accepted) {
  const ref::ErrorCheck c = ref::check(exact, produced, dtype, check.bound, w);
  ++check.values;
  if (!c.within && accepted()) {
    ++check.accepted_outside_domain;
    return true;
  }
  check.max_ulps = std::max(check.max_ulps, c.error_ulps);
  check.max_ratio = std::max(check.max_ratio, c.ratio);
  if (!c.within) ++check.violations;
  return c.within;
}

// The value of parent k of node n at element e (0 where the node has no such parent).
double parent_value(const GraphNode& n, const Production& p, int k, std::size_t e) {
  if (k >= n.arity) return 0.0;
  return p.values[static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)])][e];
}

LocalCheck grade_forward(const Graph& g, const GraphNode& n, const Production& p, std::int64_t id, NodeCheck& row) {
  LocalCheck check;
  check.bound = ref::forward_bound(*n.op, g.dtype, p.math);
  const Values& y = p.values[static_cast<std::size_t>(id)];
  for (std::size_t e = 0; e < y.size(); ++e) {
    const auto in = inputs_at(n, p, e);
    const std::span<const ref::Real> in_span(in.data(), static_cast<std::size_t>(n.arity));
    const ref::Real exact = ref::forward(*n.op, g.dtype, n.scalars, in_span);
    const double w = ref::abs_weight(*n.op, g.dtype, n.scalars, in_span, ref::real(0), false);
    const auto accepted = [&] {
      return accepted_above_bound(*n.op, g.dtype, sweep::kY, parent_value(n, p, 0, e), parent_value(n, p, 1, e), 0.0);
    };
    if (!grade_value(check, exact, y[e], g.dtype, w, accepted))
      note(row, "forward, element " + std::to_string(e) + ": inputs (" + inputs_text(n, p, e) + "): produced " +
                    hex(y[e]) + ", reference " + hex(ref::round_to_dtype(exact, g.dtype)));
  }
  return check;
}

// The contributions node `n` sent, each against the reference's VJP at the tape's inputs and slot.
LocalCheck grade_vjp(const Graph& g, const GraphNode& n, const Production& p, std::int64_t id, NodeCheck& row) {
  LocalCheck check;
  check.bound = ref::vjp_bound(*n.op, g.dtype, p.math);
  const Values& upstream = *p.slots[static_cast<std::size_t>(id)];
  const auto& sent = p.contributions[static_cast<std::size_t>(id)];
  for (std::size_t e = 0; e < upstream.size(); ++e) {
    const auto in = inputs_at(n, p, e);
    const std::span<const ref::Real> in_span(in.data(), static_cast<std::size_t>(n.arity));
    const ref::Real gr = ref::real(upstream[e]);
    const auto exact = ref::vjp(*n.op, g.dtype, n.scalars, in_span, gr);
    const double w = ref::abs_weight(*n.op, g.dtype, n.scalars, in_span, gr, true);
    for (int k = 0; k < n.arity; ++k) {
      const auto parent = static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]);
      if (!g.nodes[parent].requires_grad) continue;  // dropped by the tape: not part of the result
      const double produced = sent[static_cast<std::size_t>(k)][e];
      const auto accepted = [&] {
        return accepted_above_bound(*n.op, g.dtype, k == 0 ? sweep::kGradA : sweep::kGradB, parent_value(n, p, 0, e),
                                    parent_value(n, p, 1, e), upstream[e]);
      };
      if (!grade_value(check, exact[static_cast<std::size_t>(k)], produced, g.dtype, w, accepted))
        note(row, std::string("vjp, d") + (n.arity == 1 ? "x" : k == 0 ? "a" : "b") + " element " + std::to_string(e) +
                      ": inputs (" + inputs_text(n, p, e) + "), g " + hex(upstream[e]) + ": produced " + hex(produced) +
                      ", reference " + hex(ref::round_to_dtype(exact[static_cast<std::size_t>(k)], g.dtype)));
    }
  }
  return check;
}

double add_in_dtype(double a, double b, DType dtype) {
  if (dtype == DType::float64) return a + b;
  // float32's add; for a 16-bit dtype, float32's add rounded once to 16 bits (ATen's Half and
  // BFloat16 add, spec/conventions.md §0.3).
  return round_to(dtype, static_cast<double>(static_cast<float>(a) + static_cast<float>(b)));
}

// The slots the tape's accumulation rules (spec §2) build from the production's own contributions,
// and whether each could be rebuilt (a child whose contributions are missing makes it unknown).
struct Replay {
  std::vector<std::optional<Values>> slots;
  std::vector<bool> known;
};

Replay replay_slots(const Graph& g, const Walk& walk, const Production& p, bool dense) {
  Replay r{std::vector<std::optional<Values>>(g.nodes.size()), std::vector<bool>(g.nodes.size(), true)};
  if (dense)
    for (std::size_t id = 0; id < g.nodes.size(); ++id)
      if (g.nodes[id].requires_grad) r.slots[id] = Values(static_cast<std::size_t>(g.nodes[id].shape.numel()), +0.0);
  r.slots[static_cast<std::size_t>(g.output)] = g.seed;
  for (std::int64_t id = g.output; id >= 0; --id) {
    const GraphNode& n = g.nodes[static_cast<std::size_t>(id)];
    if (!walk.runs_vjp[static_cast<std::size_t>(id)]) continue;
    const auto& sent = p.contributions[static_cast<std::size_t>(id)];
    for (int k = 0; k < (passes_once(n) ? 1 : n.arity); ++k) {
      const auto parent = static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]);
      if (!g.nodes[parent].requires_grad) continue;
      if (sent.size() <= static_cast<std::size_t>(k)) {
        r.known[parent] = false;
        continue;
      }
      const Values& c = sent[static_cast<std::size_t>(k)];
      if (!r.slots[parent]) {
        r.slots[parent] = c;  // sparse: the first contribution is kept bit for bit
        continue;
      }
      Values& slot = *r.slots[parent];
      for (std::size_t e = 0; e < slot.size() && e < c.size(); ++e) slot[e] = add_in_dtype(slot[e], c[e], g.dtype);
    }
  }
  return r;
}

void grade_slot(const Graph& g, const Production& p, const Replay& r, bool expected, std::int64_t id, NodeCheck& row) {
  const auto i = static_cast<std::size_t>(id);
  row.slot_expected = expected;
  row.slot_present = p.slots[i].has_value();
  row.slot_replayable = r.known[i];
  if (row.slot_expected != row.slot_present) {
    note(row, std::string("slot: the tape's rules ") + (expected ? "give" : "give no") + " gradient slot here; the production " +
                  (row.slot_present ? "returned one" : "returned none"));
    return;
  }
  if (!row.slot_present || !r.known[i]) return;
  const Values& got = *p.slots[i];
  const Values& want = *r.slots[i];
  for (std::size_t e = 0; e < got.size(); ++e) {
    if (e < want.size() && identical(got[e], want[e], g.dtype)) continue;
    ++row.slot_mismatches;
    note(row, "slot, element " + std::to_string(e) + ": the tape returned " + hex(got[e]) +
                  "; accumulating the contributions it received gives " + (e < want.size() ? hex(want[e]) : "nothing"));
  }
}

// |produced - reference| in ulps of the reference value: 0 when identical, inf when only one is finite.
double ulp_distance(double produced, double reference, DType dtype) {
  if (identical(produced, reference, dtype) || produced == reference) return 0.0;
  if (!std::isfinite(produced) || !std::isfinite(reference)) return std::numeric_limits<double>::infinity();
  const ref::Real diff = abs(ref::real(produced) - ref::real(reference));
  return (diff / ref::real(ref::ulp_of(reference, dtype))).convert_to<double>();
}

double max_ulp_distance(const Values& produced, const Values& reference, DType dtype) {
  double worst = 0.0;
  for (std::size_t e = 0; e < produced.size() && e < reference.size(); ++e)
    worst = std::max(worst, ulp_distance(produced[e], reference[e], dtype));
  return worst;
}

// The reference's own evaluation of the whole graph from the exact leaves (information only).
struct EndToEnd {
  ref::NodeValues values;
  std::vector<std::optional<Values>> slots;
};

EndToEnd reference_dag(const Graph& g, bool dense) {
  std::vector<ref::DagNode> nodes;
  std::vector<Values> leaf_values;
  for (const GraphNode& n : g.nodes) {
    ref::DagNode d;
    d.op = n.op;
    d.s = n.scalars;
    d.parents = n.parents;
    d.arity = n.arity;
    d.requires_grad = n.requires_grad;
    nodes.push_back(d);
    leaf_values.push_back(n.values);
  }
  EndToEnd e;
  e.values = ref::dag_forward(nodes, leaf_values, g.dtype);
  e.slots = ref::dag_backward(nodes, e.values, g.output, g.seed, g.dtype, dense);
  return e;
}

NodeCheck grade_node(const Graph& g, const Walk& walk, const Production& p, const Replay& r, const EndToEnd& e2e,
                     std::int64_t id, bool dense) {
  const auto i = static_cast<std::size_t>(id);
  const GraphNode& n = g.nodes[i];
  NodeCheck row;
  row.id = id;
  row.name = n.name;
  row.op = n.op;
  row.shape = n.shape;
  if (n.op) row.forward = grade_forward(g, n, p, id, row);
  if (walk.runs_vjp[i]) {
    row.vjp_run = !p.slots[i] ? VjpRun::no_slot : passes_once(n) ? VjpRun::pass_once : VjpRun::kernel;
    if (row.vjp_run == VjpRun::kernel) row.vjp = grade_vjp(g, n, p, id, row);
  }
  grade_slot(g, p, r, slot_expected(g, walk, id, dense), id, row);
  row.value_end_to_end_ulps = max_ulp_distance(p.values[i], e2e.values[i], g.dtype);
  if (p.slots[i] && e2e.slots[i]) row.gradient_end_to_end_ulps = max_ulp_distance(*p.slots[i], *e2e.slots[i], g.dtype);
  return row;
}

}  // namespace

bool NodeCheck::passes() const {
  const bool forward_ok = !forward || forward->violations == 0;
  const bool vjp_ok = vjp_run != VjpRun::no_slot && (!vjp || vjp->violations == 0);
  return forward_ok && vjp_ok && slot_ok();
}

int GraphReport::nodes_passing() const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [](const NodeCheck& n) { return n.passes(); }));
}

std::optional<std::int64_t> GraphReport::id_of(const std::string& name) const {
  for (const NodeCheck& n : nodes)
    if (n.name == name) return n.id;
  return std::nullopt;
}

Result<GraphReport> check_graph(const Graph& graph, Backend& backend, const GraphCheckOptions& options) {
  ref::ensure_precision();
  const Walk walk = walk_graph(graph);
  TAPEWISE_TRY(production, run_production(graph, walk, backend, options));
  if (options.tamper) options.tamper(production);
  const Replay replay = replay_slots(graph, walk, production, options.dense);
  const EndToEnd e2e = reference_dag(graph, options.dense);
  GraphReport report;
  report.dtype = graph.dtype;
  report.path = options.path;
  report.dense = options.dense;
  report.backend = backend.describe();
  report.output = graph.output;
  for (std::size_t id = 0; id < graph.nodes.size(); ++id)
    report.nodes.push_back(grade_node(graph, walk, production, replay, e2e, static_cast<std::int64_t>(id), options.dense));
  report.production = std::move(production);
  return report;
}

Result<GraphReport> check_graph(const std::string& json_text, Backend& backend, const GraphCheckOptions& options) {
  TAPEWISE_TRY(graph, parse_graph(json_text));
  return check_graph(graph, backend, options);
}

}  // namespace tapewise::conform
