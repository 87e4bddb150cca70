// cuda/backends/cuda_architectures.cpp — parsing a build's CMAKE_CUDA_ARCHITECTURES and the error a GPU
// gets when the build holds no kernel image for it (see cuda_architectures.hpp).
#include "backends/cuda_architectures.hpp"

#include <algorithm>
#include <charconv>

namespace tapewise::detail {
namespace {

// A number "80" (or "100a"'s leading digits with the suffix kept out): true when the whole text was read.
bool read_architecture(std::string_view text, int& value) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || value <= 0) return false;
  // Family and feature suffixes (100a, 100f) run on their own architecture's devices.
  return ptr == end || (ptr + 1 == end && (*ptr == 'a' || *ptr == 'f'));
}

void add_sorted(std::vector<int>& to, int value) {
  if (std::find(to.begin(), to.end(), value) == to.end()) to.insert(std::upper_bound(to.begin(), to.end(), value), value);
}

std::string join_architectures(const std::vector<int>& values, std::string_view prefix) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::string(prefix) + std::to_string(values[i]);
  }
  return text;
}

}  // namespace

CudaArchitectures parse_cuda_architectures(std::string_view cmake_list) {
  CudaArchitectures archs;
  while (!cmake_list.empty()) {
    const auto semicolon = cmake_list.find(';');
    std::string_view entry = cmake_list.substr(0, semicolon);
    cmake_list = semicolon == std::string_view::npos ? std::string_view{} : cmake_list.substr(semicolon + 1);
    if (entry.empty()) continue;
    bool sass = true, ptx = true;
    std::string_view number = entry;
    if (entry.ends_with("-real")) {
      ptx = false;
      number.remove_suffix(5);
    } else if (entry.ends_with("-virtual")) {
      sass = false;
      number.remove_suffix(8);
    }
    int value = 0;
    if (!read_architecture(number, value)) {
      archs.symbolic += (archs.symbolic.empty() ? "" : ";") + std::string(entry);
      continue;
    }
    if (sass) add_sorted(archs.sass, value);
    if (ptx) add_sorted(archs.ptx, value);
  }
  return archs;
}

std::string describe_cuda_architectures(const CudaArchitectures& archs) {
  std::string text;
  if (!archs.sass.empty()) text = "machine code for " + join_architectures(archs.sass, "sm_");
  if (!archs.ptx.empty())
    text += (text.empty() ? "" : " and ") + std::string("PTX for ") + join_architectures(archs.ptx, "compute_");
  if (!archs.symbolic.empty()) text += (text.empty() ? "" : ", plus ") + std::string("CMake's '") + archs.symbolic + "'";
  return text.empty() ? "no CUDA architecture" : text;
}

std::string no_kernel_image_message(int device, std::string_view device_name, int major, int minor,
                                    std::string_view cmake_list) {
  const std::string cc = std::to_string(major) + "." + std::to_string(minor);
  const std::string arch = std::to_string(major * 10 + minor);
  return "CUDA device " + std::to_string(device) + " (" + std::string(device_name) + ", compute capability " + cc +
         ") has no kernel image in this build of tapewise, which holds " +
         describe_cuda_architectures(parse_cuda_architectures(cmake_list)) + " (CMAKE_CUDA_ARCHITECTURES=" +
         std::string(cmake_list) + "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=\"" + std::string(cmake_list) + ";" +
         arch + "\" (pip: -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=\"" + std::string(cmake_list) + ";" + arch + "\")";
}

}  // namespace tapewise::detail
