// cuda/kernels/exact/log.cuh — tapewise's own natural logarithm for exact mode: float32 correctly rounded on
// every input, float64 within 1 ulp, the same bits from g++, nvcc and NVRTC (only the operations of bits.cuh).
#pragma once

#include "bits.cuh"

namespace tapewise::exact {
namespace detail {

// x = 2^k * m with m in [0.6855, 1.3711), cut into 128 intervals by the bits of m; interval i has a float
// inv_c near 2 / (its ends), so r = m * inv_c - 1 has |r| <= 2^-8, and log(1 / inv_c) = log_c_hi + log_c_lo
// within 2^-80. Interval 80 holds m in [1 - 2^-9, 1 + 2^-8) and has inv_c = 1, log_c = 0: near 1 nothing
// cancels. In every other interval |log_c_hi| >= max |r| there (log_of_double's Fast2Sums need it) and
// |log m| >= 0.4995 |log_c| (no cancellation). Generated with mpmath at 300 bits, which checked those
// bounds; 16 bytes an entry, 2 KiB.
struct LogTableEntry {
  double log_c_hi;
  float inv_c;
  float log_c_lo;
};

// clang-format off
#define TW_EXACT_LOG_TABLE \
TW_LOG_ROW(-0x1.7fafa5bd81514p-2, 0x1.745d18p+0f, 0x1.218ffap-58f) TW_LOG_ROW(-0x1.79e266a7cfb3ep-2, 0x1.724288p+0f, 0x1.e16882p-56f) \
TW_LOG_ROW(-0x1.741d881c67bbp-2, 0x1.702e06p+0f, -0x1.bca4eep-56f) TW_LOG_ROW(-0x1.6e60ec72f196ap-2, 0x1.6e1f76p+0f, -0x1.575efep-56f) \
TW_LOG_ROW(-0x1.68ac8589c6a0fp-2, 0x1.6c16c2p+0f, 0x1.6cd89ep-57f) TW_LOG_ROW(-0x1.6300334baac3cp-2, 0x1.6a13cep+0f, 0x1.c7e704p-57f) \
TW_LOG_ROW(-0x1.5d5bdfa595f2ap-2, 0x1.681682p+0f, 0x1.6a0872p-59f) TW_LOG_ROW(-0x1.57bf73648d1f4p-2, 0x1.661ec6p+0f, -0x1.25ee3cp-58f) \
TW_LOG_ROW(-0x1.522ae1b38a3d5p-2, 0x1.642c86p+0f, 0x1.47bf4cp-56f) TW_LOG_ROW(-0x1.4c9e0b8172c37p-2, 0x1.623fa8p+0f, 0x1.648d8p-56f) \
TW_LOG_ROW(-0x1.4718dc171c41bp-2, 0x1.605816p+0f, -0x1.0fb4c2p-60f) TW_LOG_ROW(-0x1.419b438d5e8c4p-2, 0x1.5e75bcp+0f, 0x1.41226ap-56f) \
TW_LOG_ROW(-0x1.3c2525533317bp-2, 0x1.5c9882p+0f, 0x1.4ad28cp-56f) TW_LOG_ROW(-0x1.36b67563e110fp-2, 0x1.5ac056p+0f, 0x1.4e93cep-56f) \
TW_LOG_ROW(-0x1.314f20fd35cd3p-2, 0x1.58ed24p+0f, -0x1.452d1ep-57f) TW_LOG_ROW(-0x1.2bef087dc9353p-2, 0x1.571ed4p+0f, 0x1.4adad8p-56f) \
TW_LOG_ROW(-0x1.269623134db8ap-2, 0x1.555556p+0f, -0x1.e0efb8p-56f) TW_LOG_ROW(-0x1.21445520eb8cfp-2, 0x1.539094p+0f, 0x1.cc28bep-56f) \
TW_LOG_ROW(-0x1.1bf99425a6b8cp-2, 0x1.51d07ep+0f, -0x1.6ea898p-56f) TW_LOG_ROW(-0x1.16b5ced2cfb6bp-2, 0x1.501502p+0f, 0x1.ab0422p-56f) \
TW_LOG_ROW(-0x1.1178e6c27e478p-2, 0x1.4e5e0ap+0f, -0x1.6338a6p-58f) TW_LOG_ROW(-0x1.0c42d516162dfp-2, 0x1.4cab88p+0f, -0x1.258b1ap-56f) \
TW_LOG_ROW(-0x1.071385f4d5862p-2, 0x1.4afd6ap+0f, -0x1.c5b16ep-56f) TW_LOG_ROW(-0x1.01eae4aa6c69p-2, 0x1.49539ep+0f, 0x1.141488p-58f) \
TW_LOG_ROW(-0x1.f991c3cb3b37p-3, 0x1.47ae14p+0f, -0x1.f664fep-57f) TW_LOG_ROW(-0x1.ef5adb2dcffdcp-3, 0x1.460cbcp+0f, -0x1.aea97cp-59f) \
TW_LOG_ROW(-0x1.e530edde7100ep-3, 0x1.446f86p+0f, 0x1.c76282p-57f) TW_LOG_ROW(-0x1.db13d8bd4893bp-3, 0x1.42d662p+0f, 0x1.1dee34p-58f) \
TW_LOG_ROW(-0x1.d10383e655e65p-3, 0x1.414142p+0f, 0x1.bf3a94p-58f) TW_LOG_ROW(-0x1.c6ffbc8f00f71p-3, 0x1.3fb014p+0f, 0x1.9e58b2p-57f) \
TW_LOG_ROW(-0x1.bd0874c3bd8abp-3, 0x1.3e22ccp+0f, -0x1.fba6acp-57f) TW_LOG_ROW(-0x1.b31d83a5bce39p-3, 0x1.3c995ap+0f, -0x1.78ac52p-57f) \
TW_LOG_ROW(-0x1.a93ed8c8ad9cap-3, 0x1.3b13b2p+0f, -0x1.bcafd4p-57f) TW_LOG_ROW(-0x1.9f6c3b808964cp-3, 0x1.3991c2p+0f, 0x1.3697c2p-57f) \
TW_LOG_ROW(-0x1.95a5b2ef70165p-3, 0x1.381382p+0f, 0x1.0bd356p-58f) TW_LOG_ROW(-0x1.8beb03b38fe73p-3, 0x1.3698ep+0f, -0x1.55aadep-58f) \
TW_LOG_ROW(-0x1.823c18551a3bep-3, 0x1.3521dp+0f, 0x1.1232ccp-57f) TW_LOG_ROW(-0x1.7898da4444c6fp-3, 0x1.33ae46p+0f, -0x1.f3c7bap-57f) \
TW_LOG_ROW(-0x1.6f01247756aaap-3, 0x1.323e34p+0f, 0x1.cde5b6p-57f) TW_LOG_ROW(-0x1.6574eb68c133ap-3, 0x1.30d19p+0f, 0x1.3a69e2p-57f) \
TW_LOG_ROW(-0x1.5bf407b543db1p-3, 0x1.2f684cp+0f, 0x1.1f5b4p-61f) TW_LOG_ROW(-0x1.527e5e2a1b58dp-3, 0x1.2e025cp+0f, 0x1.38d4b4p-60f) \
TW_LOG_ROW(-0x1.4913d2733b54p-3, 0x1.2c9fb4p+0f, 0x1.8d5684p-58f) TW_LOG_ROW(-0x1.3fb454c9928adp-3, 0x1.2b404ap+0f, 0x1.9c7ea4p-57f) \
TW_LOG_ROW(-0x1.365fc6c159004p-3, 0x1.29e412p+0f, -0x1.fa81cep-59f) TW_LOG_ROW(-0x1.2d16169868118p-3, 0x1.288b02p+0f, -0x1.b9991p-60f) \
TW_LOG_ROW(-0x1.23d715e49c1f7p-3, 0x1.27350cp+0f, -0x1.471fd6p-59f) TW_LOG_ROW(-0x1.1aa2bea23f6fcp-3, 0x1.25e228p+0f, -0x1.4e44ap-57f) \
TW_LOG_ROW(-0x1.1178ee227e458p-3, 0x1.24924ap+0f, 0x1.0e6316p-58f) TW_LOG_ROW(-0x1.08598e99e39fcp-3, 0x1.234568p+0f, 0x1.d6ffe2p-61f) \
TW_LOG_ROW(-0x1.fe89129dbd565p-4, 0x1.21fb78p+0f, -0x1.4d82f8p-60f) TW_LOG_ROW(-0x1.ec738d30a10e3p-4, 0x1.20b47p+0f, -0x1.2e9fc4p-58f) \
TW_LOG_ROW(-0x1.da727838446ap-4, 0x1.1f7048p+0f, -0x1.401fa8p-58f) TW_LOG_ROW(-0x1.c885845bc4b1ap-4, 0x1.1e2ef4p+0f, -0x1.838cbcp-58f) \
TW_LOG_ROW(-0x1.b6ac7c9ad5ad1p-4, 0x1.1cf06ap+0f, 0x1.405922p-59f) TW_LOG_ROW(-0x1.a4e763cb1bc38p-4, 0x1.1bb4a4p+0f, 0x1.7b5ca2p-58f) \
TW_LOG_ROW(-0x1.9335e4d594988p-4, 0x1.1a7b96p+0f, -0x1.70eaf4p-59f) TW_LOG_ROW(-0x1.8197e2740e3fp-4, 0x1.194538p+0f, 0x1.18348p-62f) \
TW_LOG_ROW(-0x1.700d3deeac089p-4, 0x1.181182p+0f, -0x1.636becp-59f) TW_LOG_ROW(-0x1.5e959c59791a7p-4, 0x1.16e068p+0f, -0x1.738712p-58f) \
TW_LOG_ROW(-0x1.4d31165207eacp-4, 0x1.15b1e6p+0f, -0x1.ed3e86p-59f) TW_LOG_ROW(-0x1.3bdf4d7d1ee1p-4, 0x1.1485fp+0f, 0x1.42b5p-58f) \
TW_LOG_ROW(-0x1.2aa0580471746p-4, 0x1.135c82p+0f, -0x1.d473fap-63f) TW_LOG_ROW(-0x1.1973b6346554fp-4, 0x1.12358ep+0f, -0x1.7aa794p-59f) \
TW_LOG_ROW(-0x1.08599959e39a5p-4, 0x1.111112p+0f, 0x1.dd6f24p-58f) TW_LOG_ROW(-0x1.eea338406b7b4p-5, 0x1.0fef02p+0f, -0x1.636418p-60f) \
TW_LOG_ROW(-0x1.ccb7265ddb24dp-5, 0x1.0ecf56p+0f, 0x1.2484ecp-62f) TW_LOG_ROW(-0x1.aaef1ccfb10bap-5, 0x1.0db20ap+0f, -0x1.635256p-61f) \
TW_LOG_ROW(-0x1.894a8349fb262p-5, 0x1.0c9714p+0f, -0x1.a8ba32p-60f) TW_LOG_ROW(-0x1.67c937ed4bad1p-5, 0x1.0b7e6ep+0f, -0x1.d04b82p-61f) \
TW_LOG_ROW(-0x1.466ad942de386p-5, 0x1.0a681p+0f, 0x1.cdd79ep-59f) TW_LOG_ROW(-0x1.252f4078d1811p-5, 0x1.0953f4p+0f, -0x1.5c05dp-62f) \
TW_LOG_ROW(-0x1.0415c89e74404p-5, 0x1.08421p+0f, -0x1.c05c9cp-59f) TW_LOG_ROW(-0x1.c63d06c14aa2ap-6, 0x1.07326p+0f, 0x1.ce0458p-60f) \
TW_LOG_ROW(-0x1.8492858c8c979p-6, 0x1.0624dep+0f, -0x1.ae6fe2p-60f) TW_LOG_ROW(-0x1.432ab25980c41p-6, 0x1.05198p+0f, 0x1.8cda48p-60f) \
TW_LOG_ROW(-0x1.0205a38935667p-6, 0x1.041042p+0f, 0x1.b0647cp-61f) TW_LOG_ROW(-0x1.8244e0388a0dcp-7, 0x1.03091cp+0f, 0x1.f6904cp-63f) \
TW_LOG_ROW(-0x1.01014f588de6dp-7, 0x1.020408p+0f, -0x1.46662cp-62f) TW_LOG_ROW(-0x1.0081539588355p-8, 0x1.010102p+0f, -0x1.797b1p-62f) \
TW_LOG_ROW(0.0, 0x1p+0f, 0.0f) TW_LOG_ROW(0x1.fe02b6b106791p-8, 0x1.fc07fp-1f, -0x1.e44b54p-67f) \
TW_LOG_ROW(0x1.fc0a890fc03e4p-7, 0x1.f81f82p-1f, 0x1.f3db4ep-64f) TW_LOG_ROW(0x1.7b91acfd5b11cp-6, 0x1.f4465ap-1f, 0x1.893faap-61f) \
TW_LOG_ROW(0x1.f82990e78338p-6, 0x1.f07c2p-1f, 0x1.33e346p-60f) TW_LOG_ROW(0x1.39e86e1febd8dp-5, 0x1.ecc07cp-1f, 0x1.c80a72p-60f) \
TW_LOG_ROW(0x1.77459be32dd23p-5, 0x1.e9131ap-1f, 0x1.58d3f4p-59f) TW_LOG_ROW(0x1.b42de091971d5p-5, 0x1.e573acp-1f, 0x1.4a3464p-59f) \
TW_LOG_ROW(0x1.f0a30a01162a7p-5, 0x1.e1e1e2p-1f, 0x1.85f326p-59f) TW_LOG_ROW(0x1.1653710a37ae3p-4, 0x1.de5d6ep-1f, 0x1.5312e2p-59f) \
TW_LOG_ROW(0x1.341d7461bd1ddp-4, 0x1.dae608p-1f, 0x1.29980ep-60f) TW_LOG_ROW(0x1.51b06dd061852p-4, 0x1.d77b66p-1f, 0x1.593c4cp-59f) \
TW_LOG_ROW(0x1.6f0d272e56b4dp-4, 0x1.d41d42p-1f, -0x1.106d9ap-58f) TW_LOG_ROW(0x1.8c3465e319b45p-4, 0x1.d0cb58p-1f, 0x1.5acc1p-60f) \
TW_LOG_ROW(0x1.a926d8a4ad57p-4, 0x1.cd8568p-1f, -0x1.af42b4p-60f) TW_LOG_ROW(0x1.c5e54bf5bc748p-4, 0x1.ca4b3p-1f, -0x1.a8a79ep-58f) \
TW_LOG_ROW(0x1.e27074e2af2e8p-4, 0x1.c71c72p-1f, -0x1.615782p-60f) TW_LOG_ROW(0x1.fec9141dbeabbp-4, 0x1.c3f8fp-1f, 0x1.51728cp-59f) \
TW_LOG_ROW(0x1.0d77e8cd08e5ap-3, 0x1.c0e07p-1f, 0x1.9a5dc6p-57f) TW_LOG_ROW(0x1.1b72b012f67a8p-3, 0x1.bdd2b8p-1f, -0x1.1be7e8p-57f) \
TW_LOG_ROW(0x1.29552c41ff52ep-3, 0x1.bacf92p-1f, -0x1.1fd134p-58f) TW_LOG_ROW(0x1.371fc161e8f75p-3, 0x1.b7d6c4p-1f, -0x1.80c9a4p-57f) \
TW_LOG_ROW(0x1.44d2b38cb7d29p-3, 0x1.b4e81cp-1f, -0x1.058532p-60f) TW_LOG_ROW(0x1.526e5e5a1b438p-3, 0x1.b20364p-1f, -0x1.646ff8p-57f) \
TW_LOG_ROW(0x1.5ff3060a793d5p-3, 0x1.af286cp-1f, -0x1.bc60fp-58f) TW_LOG_ROW(0x1.6d60fce19d21fp-3, 0x1.ac5702p-1f, -0x1.ab89f6p-63f) \
TW_LOG_ROW(0x1.7ab890410d909p-3, 0x1.a98ef6p-1f, 0x1.fe36b2p-59f) TW_LOG_ROW(0x1.87fa08620c915p-3, 0x1.a6d01ap-1f, -0x1.76ffb2p-58f) \
TW_LOG_ROW(0x1.9525a80f456b8p-3, 0x1.a41a42p-1f, -0x1.e6fb4p-57f) TW_LOG_ROW(0x1.a23bbffe2b567p-3, 0x1.a16d4p-1f, 0x1.93711p-59f) \
TW_LOG_ROW(0x1.af3c91880bffep-3, 0x1.9ec8eap-1f, 0x1.e672e8p-58f) TW_LOG_ROW(0x1.bc286be2d8cecp-3, 0x1.9c2d14p-1f, -0x1.c818a4p-57f) \
TW_LOG_ROW(0x1.c8ff7a79a9a26p-3, 0x1.99999ap-1f, -0x1.4f68a2p-57f) TW_LOG_ROW(0x1.d5c21434fbb98p-3, 0x1.970e5p-1f, -0x1.91bbdp-57f) \
TW_LOG_ROW(0x1.e27075e2af2e7p-3, 0x1.948b1p-1f, -0x1.615782p-59f) TW_LOG_ROW(0x1.ef0adfddc594p-3, 0x1.920fb4p-1f, 0x1.618e0ep-59f) \
TW_LOG_ROW(0x1.fb918bd5e3e44p-3, 0x1.8f9c18p-1f, -0x1.caaabcp-57f) TW_LOG_ROW(0x1.04025b6b4d04ap-2, 0x1.8d3018p-1f, -0x1.d1d81p-58f) \
TW_LOG_ROW(0x1.0a3250a7390fp-2, 0x1.8acb9p-1f, -0x1.04601ap-57f) TW_LOG_ROW(0x1.1058bd1ae4ae2p-2, 0x1.886e6p-1f, -0x1.9d8192p-56f) \
TW_LOG_ROW(0x1.1675c97aba611p-2, 0x1.861862p-1f, 0x1.1ce63ap-57f) TW_LOG_ROW(0x1.1c898b36999fdp-2, 0x1.83c978p-1f, -0x1.f0e5c8p-56f) \
TW_LOG_ROW(0x1.22941e6cf7969p-2, 0x1.818182p-1f, 0x1.442848p-58f) TW_LOG_ROW(0x1.2895a0bde86a4p-2, 0x1.7f406p-1f, -0x1.0a5b68p-57f) \
TW_LOG_ROW(0x1.2e8e2bee11d31p-2, 0x1.7d05f4p-1f, -0x1.0f4cdcp-56f) TW_LOG_ROW(0x1.347ddb2987d59p-2, 0x1.7ad22p-1f, 0x1.5915a2p-56f) \
TW_LOG_ROW(0x1.3a64c596945eap-2, 0x1.78a4c8p-1f, -0x1.8d0ca4p-58f) TW_LOG_ROW(0x1.404309206a7e5p-2, 0x1.767dcep-1f, -0x1.d39f6cp-57f)
// clang-format on

#define TW_LOG_ROW(log_c_hi, inv_c, log_c_lo) {log_c_hi, inv_c, log_c_lo},
TW_EXACT_TABLE LogTableEntry kLogTable[128] = {TW_EXACT_LOG_TABLE};
#undef TW_LOG_ROW
// The float fast path's two fields again as columns. On the GPU a warp's 32 random indices then touch
// about 4 + 8 of the L1's 128-byte lines (inv_c as floats, log_c_hi), where its two reads of the 16-byte
// entries touched about 14 each. On the host inv_c is a double: vector lanes gather doubles.
#define TW_LOG_ROW(log_c_hi, inv_c, log_c_lo) log_c_hi,
TW_EXACT_TABLE double kLogCHi[128] = {TW_EXACT_LOG_TABLE};
#undef TW_LOG_ROW
#if defined(__CUDA_ARCH__)
#define TW_LOG_ROW(log_c_hi, inv_c, log_c_lo) inv_c,
TW_EXACT_TABLE float kLogInvC[128] = {TW_EXACT_LOG_TABLE};
#else
#define TW_LOG_ROW(log_c_hi, inv_c, log_c_lo) static_cast<double>(inv_c),
TW_EXACT_TABLE double kLogInvC[128] = {TW_EXACT_LOG_TABLE};
#endif
#undef TW_LOG_ROW
#undef TW_EXACT_LOG_TABLE

TW_EXACT_HD LogTableEntry log_table_entry(int index) { return kLogTable[index]; }

// x (positive, normal) = 2^exponent * m, m in [0.6855, 1.3711), and m's interval in kLogTable. The offset
// puts 1 - 2^-9 on an interval's start, so that m = 1 lies inside interval 80 and never on an edge.
struct LogReduction {
  double m;
  int exponent;
  int index;
};
TW_EXACT_HD LogReduction log_reduce(double x) {
  constexpr std::uint64_t kOffset = 0x3fe5f00000000000ull;  // the bits of 0.685546875
  std::uint64_t bits = bits_of(x);
  std::uint64_t shifted = bits - kOffset;
  int exponent = static_cast<int>(static_cast<std::int64_t>(shifted) >> 52);
  int index = static_cast<int>((shifted >> 45) & 127);
  double m = double_of(bits - (shifted & (0xfffull << 52)));
  return {m, exponent, index};
}

// log1p(r) - r for |r| <= 2^-8, as r^2 q(r): q holds the Taylor series to r^5 / 7 (log1p to degree 7).
// Truncation |r|^8 / 8 / (1 - |r|) <= 2^-59 |r|; q's evaluation errs by < 2^-51 relative, r^2 q <= 2^-9 |r|.
TW_EXACT_CONSTANT double kLog1pTaylor[4] = {0x1.2492492492492p-3, -0x1.5555555555555p-3, 0x1.999999999999ap-3,
                                            0x1.5555555555555p-2};  // 1/7, -1/6, 1/5, 1/3
TW_EXACT_HD double log1p_minus_r_over_r2(double r) {
  const double high_terms = fma(r, fma(r, fma(r, kLog1pTaylor[0], kLog1pTaylor[1]), kLog1pTaylor[2]), -0.25);
  return fma(r, fma(r, high_terms, kLog1pTaylor[3]), -0.5);
}

// The same reduction read off a positive normal float's bits (the offset 0.685546875f): the same m, exponent and
// index, with no conversion of x to double and no 64-bit integer arithmetic. The GPU's first pass uses it: a
// 64-bit conversion issues to the pipe that also runs MUFU, at 16 results a clock per SM on sm_90, and log's
// conversions kept that pipe 48% busy at the H100's copy speed (Nsight Compute, 2026-12-06).
TW_EXACT_HD LogReduction log_reduce_normal_float(float x) {
  constexpr std::uint32_t kOffset = 0x3f2f8000u;
  std::uint32_t bits = bits_of(x);
  std::uint32_t shifted = bits - kOffset;
  int exponent = static_cast<std::int32_t>(shifted) >> 23;
  int index = static_cast<int>((shifted >> 16) & 127);
  return {double_of_positive_normal_float(bits - (shifted & 0xff800000u)), exponent, index};
}

// log(x) for a float x > 0 reduced to m, exponent, index: k ln2 + log_c + log1p(r), r = m * inv_c - 1 exact
// (24 + 24 bits). Within 4.1 * 2^-53 |log x|, so within 4.1 ulps of the double returned: k != 0: |log x| >=
// 0.31, and ln2's rounding (k 2^-55.3 <= 0.66), log_c's (<= 0.79), s1's (1.02) and y's (1) in units of 2^-53
// |log x|; k = 0 off interval 80: |log_c| <= 2.002 |log x| (the table's check), log_c's rounding, t's and
// y's; interval 80: s1 = 0, y = t within 2^-53 |t| + 2^-58 |r|.
TW_EXACT_CONSTANT double kLn2 = 0x1.62e42fefa39efp-1;
TW_EXACT_HD double log_of_reduced_float_fast(LogReduction reduced) {
  const auto index = static_cast<std::uint32_t>(reduced.index);
  // r is exact: a multiple of 2^-48, below 2^-8.
  double r = fma(reduced.m, static_cast<double>(table_read(kLogInvC, index)), -1.0);
  double s1 = fma(static_cast<double>(reduced.exponent), kLn2, table_read(kLogCHi, index));
  double t = fma(r * r, log1p_minus_r_over_r2(r), r);
  return s1 + t;
}

#if !defined(__CUDA_ARCH__)
// The CPU's first pass for log: the same reduction without the table, whose two reads are vector gathers
// there. f = m - 1 (exact, Sterbenz) is a multiple of 2^-24 below 0.38, so f + 2 is exact; s = f / (f + 2) is
// rounded once, |s| < 0.1866, w = s^2 < 0.0349, and log m = 2 atanh s = 2s + 2s w (1/3 + w/5 + ... + w^9/21):
// the rest is < w^11 / 23 / (1 - w) < 2^-57.7 of it. log m's relative error: s's rounding times atanh's
// condition 1 / (1 - w) (< 1.036 * 2^-53), the last fma's (2^-53), the tail's (< 0.04 * 2^-53, as 2s w P(w) <
// 0.0119 |log m|): < 2.12 * 2^-53. y = k ln2 + log m by one fma: |ln2 - kLn2| < 2^-55.26, and |y| >= 0.3154
// where k != 0 (|log m| <= 0.3777), so y is within (2^-55.26 + 0.3777 * 2.12 * 2^-53) / 0.3154 + 2^-53 < 4.3 *
// 2^-53 |y| of log x (at k = 1; less for larger |k|): under the 8 ulps the certainty test allows. On every
// float32 input the CPU's two passes give exact::log's bits (tapewise_tests with TAPEWISE_VECTOR_MATH_ALL=log).
inline double log_of_normal_float_without_table(float x) {
  const LogReduction reduced = log_reduce_normal_float(x);
  const double f = reduced.m - 1.0;
  const double s = f / (f + 2.0);
  const double w = s * s;
  double tail = fma(w, 0x1.8618618618618p-5, 0x1.af286bca1af28p-5);  // 1/21, 1/19
  tail = fma(w, tail, 0x1.e1e1e1e1e1e1ep-5);                         // 1/17
  tail = fma(w, tail, 0x1.1111111111111p-4);                         // 1/15
  tail = fma(w, tail, 0x1.3b13b13b13b14p-4);                         // 1/13
  tail = fma(w, tail, 0x1.745d1745d1746p-4);                         // 1/11
  tail = fma(w, tail, 0x1.c71c71c71c71cp-4);                         // 1/9
  tail = fma(w, tail, 0x1.2492492492492p-3);                         // 1/7
  tail = fma(w, tail, 0x1.999999999999ap-3);                         // 1/5
  tail = fma(w, tail, 0x1.5555555555555p-2);                         // 1/3
  const double two_s = s + s;
  return fma(static_cast<double>(reduced.exponent), kLn2, fma(two_s * w, tail, two_s));
}
#endif

TW_EXACT_HD double log_of_float_fast(float x) {  // any float x > 0, subnormals included
  return log_of_reduced_float_fast(log_reduce(static_cast<double>(x)));
}

// log(x) for x positive and normal, times 2^exponent_bias: (k ln2 + log_c) + log1p(r), r exact as ph - 1 + pl,
// the sums' roundings kept (Fast2Sum) and ln2 and log_c in two parts. Error before the last addition
// <= 2^-57 |log x| (k != 0: absolute 2^-66 against |log| >= 0.31; k = 0 off interval 80: 2^-66 against
// >= 2^-9; interval 80: log1p's 2^-59 |r| and 2^-60 |r|), so the double returned is within 0.57 ulp.
TW_EXACT_HD double log_of_double(double x, int exponent_bias) {
  constexpr double kLn2Hi = 0x1.62e42fefa38p-1;    // 42 bits: k * kLn2Hi is exact for |k| < 2^11
  constexpr double kLn2Lo = 0x1.ef35793c7673p-45;  // ln2 - kLn2Hi - kLn2Lo within 2^-102
  LogReduction reduced = log_reduce(x);
  LogTableEntry entry = log_table_entry(reduced.index);
  double inv_c = entry.inv_c;
  double ph = reduced.m * inv_c;
  double pl = fma(reduced.m, inv_c, -ph);
  double r = ph - 1.0;  // exact: ph in [1 - 2^-7, 1 + 2^-7]
  double k = static_cast<double>(reduced.exponent + exponent_bias);
  double a = k * kLn2Hi;
  double s1 = a + entry.log_c_hi;  // Fast2Sum: |a| >= 0.69 > |log_c| or a = 0
  double s1_err = (a - s1) + entry.log_c_hi;
  double s2 = s1 + r;  // Fast2Sum: |s1| >= |r| or s1 = 0 (the table's check)
  double s2_err = (s1 - s2) + r;
  double pl_term = fma(-r, pl, pl);  // log1p(r + pl) - log1p(r) = pl (1 - r) + O(r^2 pl)
  double small = (k * kLn2Lo + static_cast<double>(entry.log_c_lo)) + pl_term + (s1_err + s2_err);
  double lo = (r * r) * log1p_minus_r_over_r2(r) + small;
  return s2 + lo;
}

struct DoubleDouble {
  double hi, lo;
};
TW_EXACT_HD DoubleDouble fast_two_sum(double a, double b) {  // exact when |a| >= |b| or a = 0
  double s = a + b;
  return {s, (a - s) + b};
}
TW_EXACT_HD DoubleDouble two_product(double a, double b) {
  double p = a * b;
  return {p, fma(a, b, -p)};
}
// For a and b of one sign, or sums that do not cancel (as here): relative error below 2^-103.
TW_EXACT_HD DoubleDouble dd_add(DoubleDouble a, DoubleDouble b) {
  double s = a.hi + b.hi;
  double b_part = s - a.hi;
  double s_err = (a.hi - (s - b_part)) + (b.hi - b_part);  // Knuth's TwoSum: exact
  return fast_two_sum(s, s_err + (a.lo + b.lo));
}
TW_EXACT_HD DoubleDouble dd_mul(DoubleDouble a, DoubleDouble b) {  // relative error below 2^-102
  DoubleDouble p = two_product(a.hi, b.hi);
  return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}

// T(z) = (atanh(s) - s) / s^3 = sum over j >= 0 of z^j / (2j + 3), 0 <= z = s^2 <= 0.0349 (below), truncated
// after z^16 / 35: the rest is below z^17 / 37 / (1 - z) < 2^-87.5. Terms from z^7 / 17 on (< 2^-38) are summed
// in double: their rounding errors stay below 2^-90.
TW_EXACT_HD DoubleDouble atanh_minus_s_over_s3(DoubleDouble z) {
  constexpr double kTail[] = {0x1.e1e1e1e1e1e1ep-5, 0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5,
                              0x1.47ae147ae147bp-5, 0x1.2f684bda12f68p-5, 0x1.1a7b9611a7b96p-5, 0x1.0842108421084p-5,
                              0x1.f07c1f07c1f08p-6, 0x1.d41d41d41d41dp-6};  // 1/17, 1/19, ..., 1/35
  constexpr DoubleDouble kHead[] = {
      {0x1.5555555555555p-2, 0x1.5555555555555p-56},  {0x1.999999999999ap-3, -0x1.999999999999ap-57},
      {0x1.2492492492492p-3, 0x1.2492492492492p-57},  {0x1.c71c71c71c71cp-4, 0x1.c71c71c71c71cp-58},
      {0x1.745d1745d1746p-4, -0x1.745d1745d1746p-59}, {0x1.3b13b13b13b14p-4, -0x1.3b13b13b13b14p-58},
      {0x1.1111111111111p-4, 0x1.1111111111111p-60}};  // 1/3, 1/5, ..., 1/15 as double-doubles
  double tail = kTail[9];
  for (int j = 8; j >= 0; --j) tail = fma(z.hi, tail, kTail[j]);
  DoubleDouble sum = {tail, 0.0};
  for (int j = 6; j >= 0; --j) sum = dd_add(kHead[j], dd_mul(z, sum));
  return sum;
}

// log(m) = 2 atanh(s) = 2 (s + s z T(z)), s = (m - 1) / (m + 1), z = s^2: |s| <= 0.1866 for m in [0.6855,
// 1.3711); m - 1 and m + 1 are exact for a float's m. Relative error below 2^-92: T's 2^-87.5 weighs z < 2^-4.8;
// the double-double steps add below 2^-98 (measured against MPFR: 2^-92.3 at worst).
TW_EXACT_HD DoubleDouble log_of_reduced_float(double m) {
  double num = m - 1.0, den = m + 1.0;
  double s_hi = num / den;
  double s_lo = fma(-s_hi, den, num) / den;  // the remainder is exact
  DoubleDouble z = two_product(s_hi, s_hi);
  z = fast_two_sum(z.hi, z.lo + 2.0 * s_hi * s_lo);
  DoubleDouble s = {s_hi, s_lo};
  DoubleDouble s_z_tail = dd_mul(s, dd_mul(z, atanh_minus_s_over_s3(z)));  // atanh(s) - s, of s's sign
  DoubleDouble half_log = dd_add(s, s_z_tail);
  return {2.0 * half_log.hi, 2.0 * half_log.lo};
}

// hi + lo (|lo| <= ulp(hi) / 2, hi in float's normal range) rounded once to float: hi decides unless it
// lies exactly on a midpoint between floats, where lo's sign does.
TW_EXACT_HD float round_to_float(DoubleDouble y) {
  std::uint64_t bits = bits_of(y.hi);
  bool on_midpoint = (bits & 0x1fffffffull) == 0x10000000ull;
  if (on_midpoint && y.lo != 0.0) bits = ((y.lo > 0.0) == (y.hi > 0.0)) ? bits + 1 : bits - 1;  // toward lo
  return static_cast<float>(double_of(bits));
}

// The float case log_of_float_fast could not decide: the same reduction, log(m) to 2^-92 relative, and k ln2
// from three parts (k * kLn2Hi and k * kLn2Mid exact for |k| < 2^11). No cancellation: |k ln2| >= 0.69 > 0.38
// >= |log m| when k != 0. The whole is within 2^-90 |log x|, and every float's log lies farther than 2^-57.7
// |log x| from a midpoint between floats (the exhaustive check's closest: 2^-57.78, x = 0x65d890d3), so the
// rounding is right; run alone on every float it gives the correct rounding too.
TW_EXACT_HD_NOINLINE float log_float_slow(float x) {
  constexpr double kLn2Hi = 0x1.62e42fefa38p-1;
  constexpr double kLn2Mid = 0x1.ef35793c768p-45;
  constexpr double kLn2Tail = -0x1.9ff0342542fc3p-90;  // within 2^-144 of ln2 with the two above
  LogReduction reduced = log_reduce(static_cast<double>(x));
  DoubleDouble log_m = log_of_reduced_float(reduced.m);
  double k = static_cast<double>(reduced.exponent);
  DoubleDouble k_ln2 = fast_two_sum(k * kLn2Hi, k * kLn2Mid);
  k_ln2 = fast_two_sum(k_ln2.hi, k_ln2.lo + k * kLn2Tail);
  return round_to_float(dd_add(k_ln2, log_m));
}

// log at zeros (-inf, either sign), +inf (+inf), NaN (quieted, payload kept) and negatives (the default NaN).
TW_EXACT_HD float log_float_special(float x) {
  std::uint32_t bits = bits_of(x);
  if ((bits << 1) == 0) return float_of(0xff800000u);
  if (bits == 0x7f800000u) return x;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return float_of(bits | 0x00400000u);
  return float_of(0x7fc00000u);
}
TW_EXACT_HD double log_double_special(double x) {
  std::uint64_t bits = bits_of(x);
  if ((bits << 1) == 0) return double_of(0xfff0000000000000ull);
  if (bits == 0x7ff0000000000000ull) return x;
  if ((bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return double_of(bits | 0x0008000000000000ull);
  return double_of(0x7ff8000000000000ull);
}

}  // namespace detail

// Correctly rounded (to nearest even) for every float. log_of_float_fast's double is within 4.1 of its ulps
// of log x, so unless a midpoint between floats lies within 8 of them (y's low 29 bits, those below a float's,
// within 8 of 2^28) its rounding is log x's. The rest, 2^-25 of inputs, take the slow path. Subnormal floats
// are normal doubles: nothing to scale.
TW_EXACT_HD float log(float x) {
  if (bits_of(x) - 1u >= 0x7f7fffffu) return detail::log_float_special(x);  // not positive and finite
  double y = detail::log_of_float_fast(x);
  std::uint32_t below_float = static_cast<std::uint32_t>(bits_of(y)) & 0x1fffffffu;
  if (below_float - (0x10000000u - 8u) > 16u) return static_cast<float>(y);
  return detail::log_float_slow(x);
}

// Within 0.57 ulp (log_of_double's bound); subnormals are scaled by 2^52 first.
TW_EXACT_HD double log(double x) {
  std::uint64_t bits = bits_of(x);
  if (bits - 1u >= 0x7fefffffffffffffull) return detail::log_double_special(x);
  bool subnormal = bits < 0x0010000000000000ull;
  return detail::log_of_double(subnormal ? x * 0x1p52 : x, subnormal ? -52 : 0);
}

}  // namespace tapewise::exact
