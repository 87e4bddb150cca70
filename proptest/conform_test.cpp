// proptest/conform_test.cpp — tests of the conformance runner (conform): the strict .npy reader
// and writer (round trip, every rejection, no crash on any bytes), and tapewise-conform's commands
// end to end as a user runs them (run, audit, eval, vectors, check, exit codes). It does not test
// the nodes' accuracy: the runner does that, and accuracy_test.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference.hpp"
#include "test_support.hpp"

// The tests target links tapewise and tapewise_reference only; the runner's sources build the
// tapewise-conform executable; the .npy codec is the library target tapewise_npy.
#include "escaped.hpp"
#include "npy.hpp"

namespace tapewise::testing {
namespace {

namespace fs = std::filesystem;
using conform::descr_of;
using conform::encode_npy;
using conform::parse_npy;
using conform::read_npy;
using conform::write_npy;

// --- .npy --------------------------------------------------------------------------------------

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b;
  for (char c : s) b.push_back(static_cast<std::byte>(c));  // no memcpy: an empty vector's data() is null
  return b;
}

// A .npy file assembled by hand (independently of the writer): version, header text (padded
// with spaces to a 64-byte multiple and ended by '\n' unless `raw_header`), then `data`.
std::vector<std::byte> npy_file(const std::string& header, const std::string& data, int major = 1,
                                bool raw_header = false) {
  std::string h = header;
  const std::size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
  if (!raw_header) {
    while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
    h += '\n';
  }
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  const std::uint32_t n = static_cast<std::uint32_t>(h.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) file += static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes_of(file + h + data);
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

std::string rejection(const std::vector<std::byte>& file) {
  auto parsed = parse_npy(file, "t.npy");
  EXPECT_FALSE(parsed) << "accepted a malformed file";
  return parsed ? std::string() : parsed.error().message;
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // numpy.save(np.array([1, -0., 2.5], dtype='<f4')) — header as numpy 1.x/2.x writes it.
  const auto file = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", float_bytes({1.0f, -0.0f, 2.5f}));
  auto a = parse_npy(file, "t.npy");
  ASSERT_TRUE(a) << a.error().str();
  EXPECT_EQ(a->dtype, DType::float32);
  EXPECT_EQ(a->shape, (Shape{3}));
  EXPECT_EQ(a->at<float>(0), 1.0f);
  EXPECT_TRUE(std::signbit(a->at<float>(1)));
  EXPECT_EQ(a->at<float>(2), 2.5f);
}

TEST(Npy, ReadsVersion2AndOtherSpellings) {
  double d[2] = {3.0, -7.25};
  std::string data(16, '\0');
  std::memcpy(data.data(), d, 16);
  auto a = parse_npy(npy_file("{\"shape\":(1,2),\"fortran_order\":False,\"descr\":\"<f8\"}", data, 2), "t.npy");
  ASSERT_TRUE(a) << a.error().str();
  EXPECT_EQ(a->dtype, DType::float64);
  EXPECT_EQ(a->shape, (Shape{1, 2}));
  EXPECT_EQ(a->at<double>(1), -7.25);
  auto scalar = parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", float_bytes({5.0f})), "t");
  ASSERT_TRUE(scalar) << scalar.error().str();
  EXPECT_EQ(scalar->shape, Shape{});
  EXPECT_EQ(scalar->numel(), 1);
  auto empty = parse_npy(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }", ""), "t");
  ASSERT_TRUE(empty) << empty.error().str();
  EXPECT_EQ(empty->numel(), 0);
}

TEST(Npy, RejectsBadMagic) {
  auto file = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", float_bytes({1.0f}));
  file[1] = std::byte{'M'};
  EXPECT_NE(rejection(file).find("bad magic"), std::string::npos);
  EXPECT_NE(rejection(bytes_of("")).find("bad magic"), std::string::npos);
  EXPECT_NE(rejection(bytes_of("1,2,3\n")).find("bad magic"), std::string::npos);
}

TEST(Npy, RejectsWrongDtype) {
  for (const char* descr : {"<i4", "<u4", "|u1", "<c8", "|b1", "<U3"}) {
    const std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }";
    const std::string why = rejection(npy_file(header, "\0\0\0\0\0\0\0\0"));
    EXPECT_NE(why.find("not supported"), std::string::npos) << descr << ": " << why;
  }
  EXPECT_NE(rejection(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", float_bytes({1.0f})))
                .find("big-endian"),
            std::string::npos);
  EXPECT_NE(rejection(npy_file("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", float_bytes({1.0f})))
                .find("structured"),
            std::string::npos);
}

// float16 is numpy's '<f2'; bfloat16, which numpy lacks, travels as its bits in a '<u2' array, read
// as bfloat16 only where the caller expects it (a bfloat16 suite, eval --dtype bfloat16).
TEST(Npy, ReadsFloat16AndBfloat16Bits) {
  const std::string half_bits("\x00\x3c\x00\xc0", 4);  // float16 1.0, -2.0
  auto h = parse_npy(npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", half_bits), "t.npy");
  ASSERT_TRUE(h) << h.error().str();
  EXPECT_EQ(h->dtype, DType::float16);
  EXPECT_EQ(h->as_double(0), 1.0);
  EXPECT_EQ(h->as_double(1), -2.0);
  const std::string bf_bits("\x80\x3f\xc0\x3f", 4);  // bfloat16 1.0, 1.5
  const auto u2 = npy_file("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", bf_bits);
  EXPECT_NE(rejection(u2).find("only as bfloat16 bits"), std::string::npos) << rejection(u2);
  auto b = parse_npy(u2, "t.npy", true);
  ASSERT_TRUE(b) << b.error().str();
  EXPECT_EQ(b->dtype, DType::bfloat16);
  EXPECT_EQ(b->as_double(0), 1.0);
  EXPECT_EQ(b->as_double(1), 1.5);
  EXPECT_EQ(std::string(descr_of(DType::bfloat16)), "<u2");
  EXPECT_EQ(std::string(descr_of(DType::float16)), "<f2");
  EXPECT_NE(rejection(npy_file("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", half_bits)).find("big-endian"),
            std::string::npos);
}

TEST(Npy, RejectsFortranOrder) {
  const std::string why =
      rejection(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", float_bytes({1, 2, 3, 4})));
  EXPECT_NE(why.find("Fortran order"), std::string::npos) << why;
}

TEST(Npy, RejectsTruncatedAndOverlongData) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string six = float_bytes({1, 2, 3, 4, 5, 6});
  EXPECT_NE(rejection(npy_file(header, six.substr(0, 23))).find("truncated data"), std::string::npos);
  EXPECT_NE(rejection(npy_file(header, "")).find("truncated data"), std::string::npos);
  EXPECT_NE(rejection(npy_file(header, six + "x")).find("after the data"), std::string::npos);
  // Cut inside the prefix and inside the header.
  const auto whole = npy_file(header, six);
  EXPECT_NE(rejection({whole.begin(), whole.begin() + 7}).find("truncated"), std::string::npos);
  EXPECT_NE(rejection({whole.begin(), whole.begin() + 9}).find("truncated"), std::string::npos);
  EXPECT_NE(rejection({whole.begin(), whole.begin() + 40}).find("truncated"), std::string::npos);
}

TEST(Npy, RejectsMalformedHeaders) {
  const std::string data = float_bytes({1.0f});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '<f4', 'fortran_order': False}", "lacks"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unknown key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "repeats"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "malformed"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", "too many"},
      {"['descr', '<f4']", "dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing", "after the dict"},
  };
  for (const auto& [header, expected] : cases) {
    const std::string why = rejection(npy_file(header, data));
    EXPECT_NE(why.find(expected), std::string::npos) << header << " -> " << why;
  }
  // No newline at the end of the header; an unsupported version.
  EXPECT_NE(rejection(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data, 1, true)).find("newline"),
            std::string::npos);
  auto v3 = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data, 2);
  v3[6] = std::byte{3};
  EXPECT_NE(rejection(v3).find("version 3.0"), std::string::npos);
}

// numpy refuses to load these (too many dimensions, a size that overflows); so does the reader.
TEST(Npy, RejectsShapesBeyondTheLimits) {
  std::string ones = "(";
  for (int i = 0; i < 5000; ++i) ones += "1, ";
  ones += ")";
  EXPECT_NE(rejection(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + ones + ", }", float_bytes({1.0f})))
                .find("5000 dimensions; the limit is 32"),
            std::string::npos);
  std::string dims32 = "(";
  for (int i = 0; i < 32; ++i) dims32 += "1, ";
  dims32 += ")";
  EXPECT_TRUE(parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + dims32 + ", }", float_bytes({1.0f})), "t"));
  for (const char* shape : {"(0, 9223372036854775807)", "(268435457,)", "(0, 65536, 65536)", "(16384, 16385)"})
    EXPECT_NE(rejection(npy_file(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }", ""))
                  .find("too many elements"),
              std::string::npos)
        << shape;
  // The largest allowed shape is read up to its (missing) data.
  EXPECT_NE(rejection(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (16384, 16384), }", "")).find("truncated data"),
            std::string::npos);
}

// Header bytes are printable ASCII; a control byte or NUL is refused and shown escaped, never raw.
TEST(Npy, RejectsControlBytesAndNeverEchoesThem) {
  for (const std::string& bad : {std::string("\x01"), std::string("\x1b[2J"), std::string(1, '\0'), std::string("\x7f")}) {
    const std::string why =
        rejection(npy_file("{'descr': '<f4" + bad + "', 'fortran_order': False, 'shape': (1,), }", float_bytes({1.0f})));
    EXPECT_NE(why.find("not printable ASCII"), std::string::npos) << why;
    for (char c : why) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw byte " << static_cast<int>(c) << " in: " << why;
  }
  EXPECT_NE(rejection(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n ", float_bytes({1.0f}), 1, true))
                .find("not printable ASCII (\\x0a)"),
            std::string::npos)
      << "a newline before the last byte";
}

TEST(Npy, RoundTripsBitExactly) {
  const std::vector<float> f = {0.0f, -0.0f, 1e-45f, -3.5f, INFINITY, NAN};
  const std::vector<double> d = {0.0, -0.0, 5e-324, 1.0 / 3.0, -INFINITY, 1e300};
  const std::vector<float16> h = {float16(0.0f), float16(-0.0f), float16::from_bits(0x0001), float16(65504.0f)};
  const std::vector<bfloat16> bf = {bfloat16(1.0f), bfloat16(-3.0e38f), bfloat16::from_bits(0x7fc0)};
  for (const HostArray& original : {HostArray::of<float>(Shape{2, 3}, f), HostArray::of<double>(Shape{6}, d),
                                    HostArray::of<double>(Shape{}, std::vector<double>{2.0}),
                                    HostArray::of<float>(Shape{0}, std::vector<float>{}),
                                    HostArray::of<float16>(Shape{2, 2}, h), HostArray::of<bfloat16>(Shape{3}, bf)}) {
    const std::vector<std::byte> file = encode_npy(original);
    EXPECT_EQ(0u, (file.size() - original.bytes.size()) % 64) << "numpy aligns the header to 64 bytes";
    auto back = parse_npy(file, "t.npy", original.dtype == DType::bfloat16);
    ASSERT_TRUE(back) << back.error().str();
    EXPECT_EQ(back->dtype, original.dtype);
    EXPECT_EQ(back->shape, original.shape);
    EXPECT_EQ(back->bytes, original.bytes);
  }
  // Through a file, too.
  const fs::path path = fs::temp_directory_path() / ("tapewise_npy_" + std::to_string(::getpid()) + ".npy");
  const HostArray a = HostArray::of<float>(Shape{3}, std::vector<float>(f.begin(), f.begin() + 3));
  ASSERT_TRUE(write_npy(path.string(), a));
  auto back = read_npy(path.string());
  ASSERT_TRUE(back) << back.error().str();
  EXPECT_EQ(back->bytes, a.bytes);
  fs::remove(path);
  EXPECT_FALSE(read_npy(path.string()));  // missing file: an error, not a crash
}

// Any bytes at all — random, or a valid file cut short or with one byte changed — give an array or
// an error, never a crash; an accepted array always holds exactly its shape's bytes.
RC_GTEST_PROP(Npy, NeverCrashesOnAnyBytes, ()) {
  const HostArray valid = HostArray::of<double>(Shape{2, 2}, std::vector<double>{1, 2, 3, 4});
  std::vector<std::byte> file = encode_npy(valid);
  const int mode = *rc::gen::inRange(0, 3);
  if (mode == 0) {
    const auto raw = *rc::gen::container<std::vector<std::uint8_t>>(rc::gen::arbitrary<std::uint8_t>());
    file.assign(reinterpret_cast<const std::byte*>(raw.data()), reinterpret_cast<const std::byte*>(raw.data()) + raw.size());
  } else if (mode == 1) {
    file.resize(*rc::gen::inRange<std::size_t>(0, file.size() + 1));
  } else {
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, file.size());
    file[at] = static_cast<std::byte>(*rc::gen::arbitrary<std::uint8_t>());
  }
  auto parsed = parse_npy(file, "fuzz.npy");
  if (parsed) {
    RC_ASSERT(parsed->shape.valid());
    RC_ASSERT(parsed->bytes.size() == static_cast<std::size_t>(parsed->shape.numel()) * dtype_size(parsed->dtype));
  } else {
    RC_ASSERT(parsed.error().message.rfind("fuzz.npy: ", 0) == 0);
  }
}

// --- tapewise-conform, end to end ----------------------------------------------------------------

// The built tool sits beside this test binary (CMake puts every executable in build/bin).
fs::path conform_binary() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path() / "tapewise-conform";
}

struct Invocation {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Invocation conform(const std::string& args) {
  const std::string command = conform_binary().string() + " " + args + " 2>&1";
  Invocation r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh folder under the system's temp folder, removed at the end of the test.
class ConformTool : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(conform_binary()))
        << conform_binary() << " is missing: build the tapewise-conform target with the tests";
    static int counter = 0;
    dir_ = fs::temp_directory_path() / ("tapewise_conform_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const HostArray& a) { ASSERT_TRUE(write_npy(path(name), a)); }
  void write_bytes(const std::string& name, const std::vector<std::byte>& bytes) {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  fs::path dir_;
};

TEST_F(ConformTool, RunPrintsTheTableAndReproducesWithItsSeed) {
  const auto first = conform("run --ops relu,sin,max,scale --cases 300 --seed 42 --json " + path("a.json"));
  EXPECT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("backend: "), std::string::npos);
  EXPECT_NE(first.out.find("seed: 42"), std::string::npos);
  EXPECT_NE(first.out.find("4/4 nodes conform"), std::string::npos) << first.out;
  EXPECT_EQ(first.out.find('\r'), std::string::npos) << "no progress display when the output is piped";
  const auto second = conform("--ops relu,sin,max,scale --cases 300 --seed 42 --json " + path("b.json"));  // run is the default
  EXPECT_EQ(second.status, 0) << second.out;

  auto read_json = [&](const std::string& name) { return nlohmann::json::parse(std::ifstream(path(name))); };
  nlohmann::json a = read_json("a.json"), b = read_json("b.json");
  EXPECT_EQ(a["schema"], "tapewise-conform.report/1");
  EXPECT_EQ(a["seed"], 42);
  // Every dtype by default: 4 nodes x float32, float64, bfloat16, float16.
  EXPECT_EQ(a["dtypes"], (nlohmann::json{"float32", "float64", "bfloat16", "float16"}));
  ASSERT_EQ(a["rows"].size(), 16u);
  for (std::size_t i = 0; i < a["rows"].size(); ++i) {
    nlohmann::json ra = a["rows"][i], rb = b["rows"][i];
    EXPECT_EQ(ra["cases"], 300);
    EXPECT_EQ(ra["conforms"], true) << ra["op"] << " " << ra["dtype"];
    EXPECT_EQ(ra["fused_vs_staged"]["mismatches"], 0);
    EXPECT_EQ(ra["workspace"]["leaking_calls"], 0);
    EXPECT_GT(ra["special_points"]["total"].get<int>(), 0) << ra["op"] << " " << ra["dtype"];
    ra.erase("throughput");
    rb.erase("throughput");
    EXPECT_EQ(ra, rb) << "the same seed must grade the same cases";
  }
  EXPECT_EQ(a["summary"]["line"], "4/4 nodes conform");
}

// Every node in each 16-bit dtype, graded against the reference with spec/bounds.def's 16-bit rows
// (no special points for these dtypes yet); --dtype takes the short names too.
TEST_F(ConformTool, RunGradesEveryNodeInBfloat16AndFloat16) {
  for (const char* dtype : {"bfloat16", "f16"}) {
    const auto r = conform(std::string("run --backend cpu --cases 400 --seed 7 --dtype ") + dtype + " --json " + path("r.json"));
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("23/23 nodes conform"), std::string::npos) << r.out;
    const nlohmann::json report = nlohmann::json::parse(std::ifstream(path("r.json")));
    ASSERT_EQ(report["rows"].size(), 23u);
    for (const auto& row : report["rows"]) {
      EXPECT_EQ(row["dtype"], std::string(dtype) == "f16" ? "float16" : "bfloat16");
      EXPECT_GT(row["forward"]["values"].get<int>(), 0) << row["op"];
    }
  }
  // The audit runs the 16-bit special points.
  const auto audit = conform("audit --backend cpu --dtype bfloat16,float16");
  EXPECT_EQ(audit.status, 0) << audit.out;
  EXPECT_NE(audit.out.find("bf16"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("f16"), std::string::npos) << audit.out;
}

// prove covers the 16-bit dtypes: a row per node and dtype, every claim proven. scale (its scalar
// rounded to float32, then to 16 bits) and abs are proven by identical graphs, so no solver runs and
// the test needs no bitwuzla.
TEST_F(ConformTool, ProveCoversBfloat16AndFloat16) {
  const auto prove = conform("prove --ops scale,abs --dtype bf16,float16 --backend cpu --json " + path("p.json"));
  EXPECT_EQ(prove.status, 0) << prove.out;
  EXPECT_NE(prove.out.find("bfloat16"), std::string::npos) << prove.out;
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(path("p.json")));
  ASSERT_EQ(report["nodes"].size(), 4u) << report.dump(1);
  const char* expected[][2] = {{"scale", "bfloat16"}, {"scale", "float16"}, {"abs", "bfloat16"}, {"abs", "float16"}};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& node = report["nodes"][i];
    EXPECT_EQ(node["op"], expected[i][0]);
    EXPECT_EQ(node["dtype"], expected[i][1]);
    for (const char* column : {"forward", "vjp", "tape"}) EXPECT_EQ(node["columns"][column]["status"], "proven") << node.dump(1);
    EXPECT_FALSE(node["claims"].empty());
  }
  EXPECT_EQ(report["summary"]["claims_not_proven"], 0);
  EXPECT_EQ(report["summary"]["model_errors"], 0);
}

TEST_F(ConformTool, UsageErrorsExitWithTwo) {
  EXPECT_EQ(conform("run --ops nosuchnode").status, 2);
  EXPECT_EQ(conform("run --dtype float8").status, 2);
  EXPECT_EQ(conform("run --backend tpu").status, 2);
  EXPECT_EQ(conform("frobnicate").status, 2);
  EXPECT_EQ(conform("run --special-points " + path("missing")).status, 2);
  EXPECT_EQ(conform("--help").status, 0);
}

TEST_F(ConformTool, AuditShowsEveryConventionAndWritesMarkdown) {
  const auto r = conform("audit --ops relu,max,clamp --markdown " + path("audit.md"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("why: "), std::string::npos);
  EXPECT_NE(r.out.find("points hold"), std::string::npos);
  std::ifstream md(path("audit.md"));
  const std::string doc((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  for (const char* part : {"# tapewise derivative conventions", "## relu", "## max", "## clamp", "| line | dtype |", "> "})
    EXPECT_NE(doc.find(part), std::string::npos) << part;
  EXPECT_EQ(doc.find("## sin"), std::string::npos);
  // A point the backend does not meet is a FAIL: a spec file that claims relu'(0) = g.
  std::ofstream(path("wrong_points")) << "why relu: deliberately wrong\n"
                                      << "op=relu dtype=f32 x=+0 g=1 y=+0 dx=1\n";
  const auto wrong = conform("audit --special-points " + path("wrong_points"));
  EXPECT_EQ(wrong.status, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("FAIL: dx (fused) dx (staged)"), std::string::npos) << wrong.out;
}

TEST_F(ConformTool, EvalWritesWhatTheBackendComputes) {
  const std::vector<double> x = {-2.0, -0.0, 0.0, 0.5, 3.0, INFINITY};
  const std::vector<double> g = {1.0, -1.0, 2.0, 0.25, -3.0, 1.0};
  write("x.npy", HostArray::of<double>(Shape{2, 3}, x));
  write("g.npy", HostArray::of<double>(Shape{2, 3}, g));
  for (const char* path_flag : {"--fused", "--staged"}) {
    const auto r = conform(std::string("eval sigmoid --backend cpu --x ") + path("x.npy") + " --g " + path("g.npy") + " " +
                           path_flag + " --out " + dir_.string());
    ASSERT_EQ(r.status, 0) << r.out;
    auto y = read_npy(path("y.npy"));
    auto dx = read_npy(path("dx.npy"));
    ASSERT_TRUE(y && dx);
    EXPECT_EQ(y->shape, (Shape{2, 3}));
    // The same node on the same backend, through the public API.
    auto be = make_cpu_backend();
    Tape tape(be);
    const NodeId leaf = must(tape.leaf(HostArray::of<double>(Shape{2, 3}, x)));
    const NodeId node = must(tape.sigmoid(leaf));
    auto grads = tape.backward(node, HostArray::of<double>(Shape{2, 3}, g),
                               std::string(path_flag) == "--fused" ? VjpPath::fused : VjpPath::staged);
    ASSERT_TRUE(grads);
    EXPECT_EQ(y->bytes, must(tape.value(node)).bytes);
    EXPECT_EQ(dx->bytes, must(grads->host(leaf)).bytes);
  }
  // Binary node, scalars, the `same` form and a prefix.
  write("a.npy", HostArray::of<float>(Shape{3}, std::vector<float>{1, 2, 3}));
  write("b.npy", HostArray::of<float>(Shape{3}, std::vector<float>{3, 2, 1}));
  write("gf.npy", HostArray::of<float>(Shape{3}, std::vector<float>{1, 1, 1}));
  auto r = conform("eval max --a " + path("a.npy") + " --b " + path("b.npy") + " --g " + path("gf.npy") + " --out " +
                   dir_.string() + " --prefix out_");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_npy(path("out_da.npy"))->to_vector<float>(), (std::vector<float>{0, 0.5f, 1}));
  EXPECT_EQ(read_npy(path("out_db.npy"))->to_vector<float>(), (std::vector<float>{1, 0.5f, 0}));
  r = conform("eval max --same --a " + path("a.npy") + " --g " + path("gf.npy") + " --out " + dir_.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_npy(path("da.npy"))->to_vector<float>(), (std::vector<float>{1, 1, 1})) << "max(a, a) contributes g once";
  r = conform("eval scale --c 0.5 --x " + path("a.npy") + " --out " + dir_.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_npy(path("y.npy"))->to_vector<float>(), (std::vector<float>{0.5f, 1, 1.5f}));
}

// eval on 16-bit inputs: float16 from '<f2', bfloat16 from '<u2' bits with --dtype bfloat16 (and
// written back as '<u2'); each output is the node's 16-bit result, R16(op32(x)).
TEST_F(ConformTool, EvalTakesFloat16AndBfloat16Bits) {
  write("h.npy", HostArray::of<float16>(Shape{2}, std::vector<float16>{float16(4.0f), float16(0.25f)}));
  write("gh.npy", HostArray::of<float16>(Shape{2}, std::vector<float16>{float16(1.0f), float16(1.0f)}));
  const auto half = conform("eval sqrt --backend cpu --x " + path("h.npy") + " --g " + path("gh.npy") + " --out " + path("h"));
  ASSERT_EQ(half.status, 0) << half.out;
  HostArray y = must(read_npy(path("h/y.npy")));
  EXPECT_EQ(y.dtype, DType::float16);
  EXPECT_EQ(y.as_double(0), 2.0);
  EXPECT_EQ(y.as_double(1), 0.5);
  write("b.npy", HostArray::of<bfloat16>(Shape{2}, std::vector<bfloat16>{bfloat16(1.0f), bfloat16(3.0f)}));
  const auto refused = conform("eval neg --backend cpu --x " + path("b.npy") + " --out " + path("b"));
  EXPECT_EQ(refused.status, 2) << refused.out;
  EXPECT_NE(refused.out.find("--dtype bfloat16"), std::string::npos) << refused.out;
  const auto bits = conform("eval neg --backend cpu --dtype bfloat16 --x " + path("b.npy") + " --out " + path("b"));
  ASSERT_EQ(bits.status, 0) << bits.out;
  HostArray neg = must(read_npy(path("b/y.npy"), true));
  EXPECT_EQ(neg.dtype, DType::bfloat16);
  EXPECT_EQ(neg.as_double(1), -3.0);
  const auto wrong = conform("eval neg --backend cpu --dtype float16 --x " + path("b.npy") + " --out " + path("b"));
  EXPECT_EQ(wrong.status, 2) << wrong.out;
}

TEST_F(ConformTool, EvalRejectsMalformedInputsClearly) {
  write("x.npy", HostArray::of<float>(Shape{3}, std::vector<float>{1, 2, 3}));
  write("g4.npy", HostArray::of<float>(Shape{4}, std::vector<float>{1, 2, 3, 4}));
  write("g64.npy", HostArray::of<double>(Shape{3}, std::vector<double>{1, 2, 3}));
  write_bytes("magic.npy", bytes_of("PK\x03\x04 not an npy file"));
  write_bytes("int.npy", npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", std::string(12, '\0')));
  write_bytes("fortran.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", float_bytes({1, 2, 3})));
  write_bytes("short.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", float_bytes({1, 2})));
  const std::string x = " --x " + path("x.npy");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval sin --x " + path("magic.npy"), "bad magic"},
      {"eval sin --x " + path("int.npy"), "'<i4' is not supported"},
      {"eval sin --x " + path("fortran.npy"), "Fortran order"},
      {"eval sin --x " + path("short.npy"), "truncated data"},
      {"eval sin --x " + path("nonexistent.npy"), "cannot open"},
      {"eval sin" + x + " --g " + path("g4.npy"), "shape mismatch"},
      {"eval sin" + x + " --g " + path("g64.npy"), "is float64 but"},
      {"eval sin --a " + path("x.npy") + " --b " + path("x.npy"), "unary"},
      {"eval max" + x, "binary"},
      {"eval scale" + x, "needs --c"},
      {"eval sin --c 2" + x, "not a scalar of sin"},
      {"eval nosuch" + x, "unknown node"},
      {"eval sin" + x + " --fused --staged", "excludes"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = conform(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
}

// Fills a vectors folder with tapewise's own outputs (eval, CPU) as another implementation would.
void answer_every_suite(const fs::path& dir) {
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  for (const auto& suite : index["suites"]) {
    const fs::path folder = dir / suite["id"].get<std::string>();
    std::string args = "eval " + suite["op"].get<std::string>() + " --backend cpu --prefix out_ --out " + folder.string();
    for (const auto& [name, file] : suite["inputs"].items()) args += " --" + name + " " + (folder / file.get<std::string>()).string();
    if (suite["same"].get<bool>()) args += " --same";
    args += " --dtype " + suite["dtype"].get<std::string>();  // bfloat16's '<u2' files need it
    for (const auto& [name, value] : suite["scalars"].items()) {
      char buf[64];
      if (value.is_number()) std::snprintf(buf, sizeof buf, "%a", value.get<double>());
      args += " --" + name + " " + (value.is_number() ? std::string(buf) : value.get<std::string>());
    }
    const auto r = conform(args);
    ASSERT_EQ(r.status, 0) << args << "\n" << r.out;
  }
}

// The expected values of a random suite are the reference's, rounded once, for inputs in the domain.
void expect_reference_values(const std::string& suite) {
  auto x = read_npy(suite + "/sin_float64_random0/x.npy");
  auto y = read_npy(suite + "/sin_float64_random0/expected_y.npy");
  ASSERT_TRUE(x && y);
  ASSERT_EQ(x->numel(), 64);
  for (std::int64_t i = 0; i < 64; ++i) {
    const double v = std::fabs(x->as_double(i));
    EXPECT_TRUE(v >= std::ldexp(1.0, op_info(Op::sin).domain_log2_lo) && v < std::ldexp(1.0, op_info(Op::sin).domain_log2_hi)) << v;
    const reference::Real in[1] = {reference::real(x->as_double(i))};
    EXPECT_EQ(y->as_double(i), reference::round_to_dtype(reference::forward(Op::sin, DType::float64, {}, in), DType::float64));
  }
}

// Two deliberate faults in an answered suite: sin's float32 gradient 8 ulp high, and relu'(0) = g.
void answer_wrongly(const fs::path& suite) {
  const std::string dx_path = (suite / "sin_float32_random0" / "out_dx.npy").string();
  HostArray dx = must(read_npy(dx_path));
  for (std::int64_t i = 0; i < dx.numel(); ++i) {
    float v = dx.at<float>(i);
    for (int k = 0; k < 8; ++k) v = std::nextafter(v, INFINITY);
    std::memcpy(dx.bytes.data() + i * 4, &v, 4);
  }
  ASSERT_TRUE(write_npy(dx_path, dx));
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(suite / "index.json"));
  for (const auto& s : index["suites"]) {
    if (s["op"] != "relu" || s["kind"] != "special") continue;
    const fs::path folder = suite / s["id"].get<std::string>();
    const bool bits = s["dtype"] == "bfloat16";  // its files hold the bits as '<u2'
    HostArray xs = must(read_npy((folder / "x.npy").string(), bits));
    HostArray gs = must(read_npy((folder / "g.npy").string(), bits));
    HostArray out = must(read_npy((folder / "out_dx.npy").string(), bits));
    const std::size_t width = dtype_size(out.dtype);
    for (std::int64_t i = 0; i < xs.numel(); ++i)
      if (xs.as_double(i) == 0.0) std::memcpy(out.bytes.data() + i * width, gs.bytes.data() + i * width, width);
    ASSERT_TRUE(write_npy((folder / "out_dx.npy").string(), out));
  }
}

// check's report on answer_wrongly's suite: exactly the two faulty nodes fail, each for its fault.
void expect_the_two_faults(const nlohmann::json& report) {
  EXPECT_EQ(report["command"], "check");
  EXPECT_FALSE(report["summary"]["conforms"].get<bool>());
  for (const auto& row : report["rows"]) {
    const bool wrong_sin = row["op"] == "sin" && row["dtype"] == "float32";
    // relu's fault is at its special points, which every dtype has.
    const bool wrong_relu = row["op"] == "relu";
    EXPECT_EQ(row["conforms"].get<bool>(), !(wrong_sin || wrong_relu)) << row["op"] << " " << row["dtype"];
    if (wrong_sin) {
      EXPECT_GT(row["vjp"]["violations"].get<int>(), 0);
    }
    if (wrong_relu) {
      EXPECT_LT(row["special_points"]["passed"], row["special_points"]["total"]);
    }
    EXPECT_TRUE(row["fused_vs_staged"].is_null()) << "check grades outputs only";
  }
}

TEST_F(ConformTool, VectorsAndCheckGradeAnImplementation) {
  const std::string suite = (dir_ / "suite").string();
  const auto made = conform("vectors " + suite + " --ops relu,sin,max,clamp --cases 64 --seed 9");
  ASSERT_EQ(made.status, 0) << made.out;
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir_ / "suite" / "index.json"));
  EXPECT_EQ(index["schema"], "tapewise-conform.vectors/1");
  EXPECT_EQ(index["seed"], 9);
  expect_reference_values(suite);

  // Nothing answered yet: no verdict (exit 2), not a violation.
  EXPECT_EQ(conform("check " + suite).status, 2);

  // tapewise itself, through eval: conforms.
  answer_every_suite(dir_ / "suite");
  const auto good = conform("check " + suite + " --json " + path("good.json"));
  EXPECT_EQ(good.status, 0) << good.out;
  EXPECT_NE(good.out.find("4/4 nodes conform"), std::string::npos) << good.out;

  answer_wrongly(dir_ / "suite");
  const auto bad = conform("check " + suite + " --json " + path("bad.json"));
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("2/4 nodes conform"), std::string::npos) << bad.out;
  expect_the_two_faults(nlohmann::json::parse(std::ifstream(path("bad.json"))));
}

// A malformed output is the implementation's violation (exit 1); a malformed suite is an input
// error (exit 2).
TEST_F(ConformTool, MalformedOutputsFailTheNodeAndMalformedSuitesAreInputErrors) {
  const std::string suite = (dir_ / "suite").string();
  ASSERT_EQ(conform("vectors " + suite + " --ops max --cases 16 --seed 9").status, 0);
  answer_every_suite(dir_ / "suite");
  write_bytes("suite/max_float32_random0/out_y.npy", bytes_of("garbage"));
  const auto garbage = conform("check " + suite);
  EXPECT_EQ(garbage.status, 1);
  EXPECT_NE(garbage.out.find("bad magic"), std::string::npos) << garbage.out;
  write("suite/max_float32_random0/out_y.npy", HostArray::of<float>(Shape{2}, std::vector<float>{1, 2}));
  const auto misshapen = conform("check " + suite);
  EXPECT_EQ(misshapen.status, 1);
  EXPECT_NE(misshapen.out.find("output y has shape [2]"), std::string::npos) << misshapen.out;
  write_bytes("suite/max_float32_random0/a.npy", bytes_of("garbage"));
  EXPECT_EQ(conform("check " + suite).status, 2);
  std::ofstream(dir_ / "suite" / "index.json") << "{ not json";
  EXPECT_EQ(conform("check " + suite).status, 2);
  EXPECT_EQ(conform("check " + path("nowhere")).status, 2);
}

// The runner's main runs under exit_status_guarded: the reference's std::invalid_argument (a real
// throw: a node given the wrong number of inputs) and a throw of a non-std type both become exit 2
// with a message naming what escaped; a command that returns keeps its status.
TEST(EscapedException, IsExitTwoNamingIt) {
  const reference::Real x = reference::real(1.0);
  ::testing::internal::CaptureStderr();
  const int status = conform::exit_status_guarded("tapewise-conform", [&] {
    const reference::Real one[1] = {x};
    (void)reference::forward(Op::add, DType::float32, Scalars{}, one);  // add takes two
    return 0;
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 2);
  EXPECT_NE(err.find("tapewise-conform: internal error: std::invalid_argument: reference::forward: wrong input "
                     "count for add escaped"),
            std::string::npos)
      << err;

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(conform::exit_status_guarded("tapewise-conform", []() -> int { throw 42; }), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("int (not a std::exception) escaped"), std::string::npos);
  EXPECT_EQ(conform::exit_status_guarded("tapewise-conform", [] { return 1; }), 1);
}

}  // namespace
}  // namespace tapewise::testing
