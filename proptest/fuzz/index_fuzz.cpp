// proptest/fuzz/index_fuzz.cpp — libFuzzer harness of `check`'s reading of index.json
// (conform/library/index.cpp) on any text: an index or an error, never a crash, a leak, UB or an
// exception; an accepted index holds only plain suite ids and in-range numbers. No filesystem access.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cases.hpp"  // kMaxCases
#include "files.hpp"
#include "index.hpp"

namespace tc = tapewise::conform;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto index = tc::parse_vectors_index(text, "fuzz/index.json");
  if (!index) {
    for (char c : index.error().message)
      if (c == '\0') std::abort();  // text from the index reaches messages escaped
    return 0;
  }
  if (index->suites.empty() || index->cases < 0 || index->cases > tc::kMaxCases) std::abort();
  for (const tc::IndexedSuite& s : index->suites) {
    if (!tc::is_plain_file_name(s.id) || tc::escaped(s.id) != s.id) std::abort();
    if (s.same && (!s.special || tapewise::op_info(s.op).arity != 2)) std::abort();
  }
  return 0;
}
