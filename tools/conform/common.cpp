// tools/conform/common.cpp — what the subcommands share: op and dtype selection, backend names, and
// where spec/special_points is found (the binary may run far from the tree it was built in).
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "commands.hpp"

#ifndef TAPEWISE_SOURCE_DIR
#define TAPEWISE_SOURCE_DIR "."
#endif

namespace tapewise::conform {

namespace fs = std::filesystem;

Result<Selection> parse_selection(const std::string& ops, const std::string& dtype) {
  Selection s;
  if (ops.empty() || ops == "all") {
    for (const OpInfo& info : kOps) s.ops.push_back(info.op);
  } else {
    std::vector<bool> chosen(kOpCount, false);
    std::stringstream list(ops);
    std::string name;
    while (std::getline(list, name, ',')) {
      const auto op = op_from_name(name);
      if (!op) {
        std::string known;
        for (const OpInfo& info : kOps) known += std::string(known.empty() ? "" : ", ") + info.name;
        return fail(ErrorCode::InvalidArgument, "--ops: unknown node '" + name + "' (nodes: " + known + ")");
      }
      chosen[static_cast<std::size_t>(*op)] = true;
    }
    for (const OpInfo& info : kOps)
      if (chosen[static_cast<std::size_t>(info.op)]) s.ops.push_back(info.op);
  }
  if (dtype.empty() || dtype == "all") {
    s.dtypes = {DType::float32, DType::float64};
  } else if (dtype == "float32" || dtype == "f32") {
    s.dtypes = {DType::float32};
  } else if (dtype == "float64" || dtype == "f64") {
    s.dtypes = {DType::float64};
  } else {
    return fail(ErrorCode::InvalidArgument, "--dtype: '" + dtype + "' is not float32, float64 or all");
  }
  return s;
}

Result<BackendChoice> parse_backend(const std::string& name) {
  if (name == "auto") return BackendChoice::automatic;
  if (name == "cpu") return BackendChoice::cpu;
  if (name == "cuda") return BackendChoice::cuda;
  return fail(ErrorCode::InvalidArgument, "--backend: '" + name + "' is not auto, cpu or cuda");
}

Result<std::string> find_special_points(const std::string& given) {
  if (!given.empty()) {
    if (!fs::exists(given)) return fail(ErrorCode::InvalidArgument, given + ": no such file");
    return given;
  }
  std::vector<fs::path> candidates{fs::path(TAPEWISE_SOURCE_DIR) / "spec" / "special_points"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / ".." / ".." / "spec" / "special_points");
  candidates.push_back(fs::path("spec") / "special_points");
  std::string tried;
  for (const fs::path& p : candidates) {
    if (fs::exists(p)) return p.lexically_normal().string();
    tried += "\n  " + p.lexically_normal().string();
  }
  return fail(ErrorCode::InvalidArgument,
              "spec/special_points not found (give it with --special-points); tried:" + tried);
}

Result<SpecialPoints> load_spec_points(const std::string& given) {
  auto path = find_special_points(given);
  if (!path) return tl::unexpected(path.error());
  return load_special_points(*path);
}

}  // namespace tapewise::conform
