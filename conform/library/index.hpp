// conform/library/index.hpp — the vectors index (DIR/index.json, schema tapewise-conform.vectors/1):
// the file names the schema defines, and the strict reading of an index that `check` trusts nothing
// of (every field type-checked, every file name exactly the schema's). No filesystem access here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <tapewise/core.hpp>
#include <tapewise/op.hpp>

namespace tapewise::conform {

// index.json: {schema, tapewise_version, spec_sha256, seed, cases, note, suites: [{id, op, dtype,
// kind: random|special, grading, scalars, same, count, inputs, expected, outputs, rows (special)}]}.
// tapewise_version and spec_sha256 name the writer (absent before 0.2.0); check warns when the spec
// hash differs from its own.
inline constexpr const char* kVectorsSchema = "tapewise-conform.vectors/1";
inline constexpr const char* kIndexFile = "index.json";
// An index of every node at the largest --cases is a few hundred KiB; anything near this is not one.
inline constexpr std::uint64_t kMaxIndexBytes = std::uint64_t{64} << 20;

// Inputs of a suite: x | a, b | a (same); its gradients: dx | da, db | da (the total, same).
std::vector<std::string> suite_input_names(Op op, bool same);
std::vector<std::string> suite_grad_names(Op op, bool same);
// The files of a suite's folder, exactly as `vectors` writes them and `check` reads them.
inline std::string input_file(const std::string& name) { return name + ".npy"; }          // x.npy, g.npy
inline std::string expected_file(const std::string& name) { return "expected_" + name + ".npy"; }
inline std::string output_file(const std::string& name) { return "out_" + name + ".npy"; }

// One suite as the index describes it (its arrays are read later, from its folder).
struct IndexedSuite {
  std::string id;  // a plain folder name inside the vectors folder
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;
  bool same = false;
  bool special = false;                           // graded bit for bit; else against the reference
  std::vector<std::pair<int, std::string>> rows;  // special: (spec line, note) per element
};

struct VectorsIndex {
  std::uint64_t seed = 0;
  std::int64_t cases = 0;
  std::string tapewise_version;  // empty when the index does not say (written before 0.2.0)
  std::string spec_sha256;
  std::vector<IndexedSuite> suites;
};

// Parses and validates index.json's text; `where` (its path) starts every message. Fails with
// InvalidArgument on invalid JSON, a wrong type anywhere, an unknown op/dtype/kind, a seed outside
// [0, 2^64-1], cases outside [0, kMaxCases], a suite id that is not a plain folder name, or a file
// name other than the schema's. Text from the index appears in messages escaped.
[[nodiscard]] Result<VectorsIndex> parse_vectors_index(const std::string& text, const std::string& where);

}  // namespace tapewise::conform
