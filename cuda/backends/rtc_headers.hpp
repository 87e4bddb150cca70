// cuda/backends/rtc_headers.hpp — the headers a compiled piece's source includes, as text for NVRTC
// (which reads no files): the kernels' own headers, embedded by the build
// (cmake/embed_rtc_headers.cmake), so a compiled piece is built from the code nvcc compiled.
#pragma once

namespace tapewise::detail {

struct RtcHeader {
  const char* name;  // as an #include names it: "interpreter.hpp", "tapewise/op.hpp"
  const char* text;
};
extern const RtcHeader kRtcHeaders[];
extern const int kRtcHeaderCount;

}  // namespace tapewise::detail
