// conform/common.cpp — what the subcommands share: op and dtype selection, backend names, and
// where spec/special_points is found (the binary may run far from the tree it was built in).
#include <algorithm>
#include <filesystem>
#include <limits>

#include "commands.hpp"
#include "files.hpp"
#include "suggest.hpp"

namespace tapewise::conform {

namespace fs = std::filesystem;

namespace {
// The comma-separated items of an --ops or --dtype value. An empty value or item is refused: a
// stray or trailing comma is a typo, not a request for everything.
Result<std::vector<std::string>> list_items(const std::string& flag, const std::string& text) {
  if (text.empty()) return fail(ErrorCode::InvalidArgument, flag + ": the value is empty (name one, a comma-separated list, or all)");
  std::vector<std::string> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty())
      return fail(ErrorCode::InvalidArgument, flag + ": '" + escaped_prefix(text) + "' has an empty item (a stray comma?)");
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

Result<std::vector<Op>> parse_ops(const std::string& ops) {
  std::vector<Op> chosen_ops;
  if (ops == "all") {
    for (const OpInfo& info : kOps) chosen_ops.push_back(info.op);
    return chosen_ops;
  }
  auto names = list_items("--ops", ops);
  if (!names) return tl::unexpected(names.error());
  std::vector<bool> chosen(kOpCount, false);
  for (const std::string& name : *names) {
    const auto op = op_from_name(name);
    if (!op) {
      std::string known;
      std::vector<std::string> known_names;
      for (const OpInfo& info : kOps) {
        known += std::string(known.empty() ? "" : ", ") + info.name;
        known_names.emplace_back(info.name);
      }
      return fail(ErrorCode::InvalidArgument, "--ops: unknown node '" + escaped_prefix(name) + "'" +
                                                  did_you_mean(name, known_names) + " (nodes: " + known + ")");
    }
    chosen[static_cast<std::size_t>(*op)] = true;
  }
  for (const OpInfo& info : kOps)
    if (chosen[static_cast<std::size_t>(info.op)]) chosen_ops.push_back(info.op);
  return chosen_ops;
}

// A dtype or a comma-separated list of them ("float32,float64"), in the order of `covered`.
Result<std::vector<DType>> parse_dtypes(const std::string& dtype, std::span<const DType> covered) {
  if (dtype == "all") return std::vector<DType>(covered.begin(), covered.end());
  auto names = list_items("--dtype", dtype);
  if (!names) return tl::unexpected(names.error());
  std::vector<bool> wanted(covered.size(), false);
  for (const std::string& name : *names) {
    const std::optional<DType> one = dtype_from_name(name);
    const auto at = one ? std::find(covered.begin(), covered.end(), *one) : covered.end();
    if (at == covered.end()) {
      std::string known;
      for (DType d : covered) known += std::string(dtype_name(d)) + ", ";
      return fail(ErrorCode::InvalidArgument, "--dtype: '" + escaped_prefix(name) + "' is not " + known + "or all" +
                                                  (one ? " (this subcommand does not cover it)" : ""));
    }
    wanted[static_cast<std::size_t>(at - covered.begin())] = true;
  }
  std::vector<DType> dtypes;
  for (std::size_t k = 0; k < covered.size(); ++k)
    if (wanted[k]) dtypes.push_back(covered[k]);
  return dtypes;
}
}  // namespace

Result<Selection> parse_selection(const std::string& ops, const std::string& dtype, std::span<const DType> covered) {
  auto chosen_ops = parse_ops(ops);
  if (!chosen_ops) return tl::unexpected(chosen_ops.error());
  auto dtypes = parse_dtypes(dtype, covered);
  if (!dtypes) return tl::unexpected(dtypes.error());
  return Selection{std::move(*chosen_ops), std::move(*dtypes)};
}

Result<BackendChoice> parse_backend(const std::string& name) {
  if (name == "auto") return BackendChoice::automatic;
  if (name == "cpu") return BackendChoice::cpu;
  if (name == "cuda") return BackendChoice::cuda;
  return fail(ErrorCode::InvalidArgument, "--backend: '" + name + "' is not auto, cpu or cuda");
}

Result<std::optional<MathMode>> parse_math(const std::string& name) {
  if (name.empty()) return std::optional<MathMode>{};
  auto mode = math_mode_named(name);
  if (!mode) return fail(ErrorCode::InvalidArgument, "--math: '" + escaped_prefix(name) + "' is not aten or exact");
  return std::optional<MathMode>{*mode};
}

Result<std::string> find_special_points(const std::string& given) {
  if (!given.empty()) {
    std::error_code ec;
    if (!fs::exists(given, ec)) return fail(ErrorCode::InvalidArgument, "--special-points " + given + ": no such file");
    return given;
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "tapewise" / "special_points");
  candidates.push_back(fs::path("spec") / "special_points");
  std::string tried;
  for (const fs::path& p : candidates) {
    if (fs::exists(p, ec)) return p.lexically_normal().string();
    tried += "\n  " + p.lexically_normal().string();
  }
  return fail(ErrorCode::InvalidArgument,
              "spec/special_points not found (give it with --special-points); tried:" + tried);
}

Result<SpecialPoints> load_spec_points(const std::string& path) {
  auto text = read_small_file(path, kMaxSpecialPointsBytes);
  if (!text) return fail(ErrorCode::InvalidArgument, "special points: " + text.error().message);
  auto spec = parse_special_points(*text, path);
  // The parser quotes the offending token as it is; a control byte must not reach the terminal.
  if (!spec) return fail(ErrorCode::InvalidArgument, escaped(spec.error().message));
  if (spec->points.empty())
    return fail(ErrorCode::InvalidArgument, "special points: " + path + ": holds no rows (is it spec/special_points?)");
  return spec;
}

Result<void> require_rows_for(const SpecialPoints& spec, const Selection& selection, const std::string& path) {
  std::string missing;
  for (Op op : selection.ops)
    for (DType dtype : selection.dtypes) {
      const bool has = std::any_of(spec.points.begin(), spec.points.end(),
                                   [&](const SpecialPoint& p) { return p.op == op && p.dtype == dtype; });
      if (!has) missing += std::string(missing.empty() ? "" : ", ") + op_name(op) + " " + dtype_name(dtype);
    }
  if (missing.empty()) return {};
  return fail(ErrorCode::InvalidArgument, "special points: " + escaped(path) + " has no rows for " + missing +
                                              "; a verdict needs each selected node's special points");
}

namespace {

// Decimal digits only: no sign, no spaces, no hex.
bool all_digits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

// The value of a string of decimal digits, or nullopt above `max`.
std::optional<std::uint64_t> decimal_at_most(const std::string& digits, std::uint64_t max) {
  std::uint64_t v = 0;
  for (char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace

Result<std::int64_t> parse_cases(const std::string& text, const std::string& option) {
  const std::string range = "a whole number from 0 to " + std::to_string(kMaxCases);
  if (!all_digits(text)) return fail(ErrorCode::InvalidArgument, option + ": '" + escaped(text) + "' is not " + range);
  const auto v = decimal_at_most(text, static_cast<std::uint64_t>(kMaxCases));
  if (!v) return fail(ErrorCode::InvalidArgument, option + ": " + escaped(text) + " is too large; it must be " + range);
  return static_cast<std::int64_t>(*v);
}

Result<std::int64_t> parse_whole_number(const std::string& text, const std::string& option, std::int64_t min,
                                        std::int64_t max) {
  const std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (text.starts_with("-") && all_digits(text.substr(1)))
    return fail(ErrorCode::InvalidArgument, option + ": " + escaped(text) + " is negative; it must be " + range);
  if (!all_digits(text)) return fail(ErrorCode::InvalidArgument, option + ": '" + escaped_prefix(text) + "' is not " + range);
  const auto v = decimal_at_most(text, static_cast<std::uint64_t>(max));
  if (!v || static_cast<std::int64_t>(*v) < min)
    return fail(ErrorCode::InvalidArgument, option + ": " + escaped_prefix(text) + " is out of range; it must be " + range);
  return static_cast<std::int64_t>(*v);
}

Result<std::uint64_t> parse_seed(const std::string& text, const std::string& option) {
  const std::string range = "a whole number from 0 to " + std::to_string(std::numeric_limits<std::uint64_t>::max());
  if (text.starts_with("-") && all_digits(text.substr(1)))
    return fail(ErrorCode::InvalidArgument, option + ": " + escaped(text) + " is negative; a seed is " + range);
  if (!all_digits(text)) return fail(ErrorCode::InvalidArgument, option + ": '" + escaped(text) + "' is not " + range);
  const auto v = decimal_at_most(text, std::numeric_limits<std::uint64_t>::max());
  if (!v) return fail(ErrorCode::InvalidArgument, option + ": " + escaped(text) + " is too large; a seed is " + range);
  return *v;
}

}  // namespace tapewise::conform
