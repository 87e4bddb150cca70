// proptest/cli_test.cpp — tapewise-conform's reliability as a command: every bad input (a folder
// or device where a file belongs, a hostile index.json, out-of-range numbers, paths that leave the
// output folder) is a usage error (exit 2) with a message naming it, never an abort, a hang or a
// write elsewhere; plus --version, the version fields of the reports, and a relocated binary.
// Each test runs the built binary (TAPEWISE_CONFORM_BIN) in a fresh temp folder; CMake compiles this
// file only where the runner is built.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <tapewise/op.hpp>
#include <tapewise/version.hpp>

#include "json_schema.hpp"
#include "npy.hpp"
#include "test_support.hpp"

#ifndef TAPEWISE_CONFORM_BIN
#error "cli_test.cpp runs tapewise-conform: proptest/CMakeLists.txt compiles it only beside the runner"
#endif

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Ran {
  int status = -1;  // exit status; -1 when killed by a signal (an abort)
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// A fresh folder per test: `work/` is the command's cwd and holds its files; the captured output
// lies beside it, so "nothing was written outside work/" can be checked.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tapewise_cli_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    work_ = root_ / "work";
    fs::create_directory(work_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs `binary args` in work/ with stdout and stderr to files; `timeout` turns a hang into a
  // failure rather than a stuck suite.
  Ran conform(const std::string& args, const fs::path& binary = ::tapewise::testing::conform_binary()) {
    const std::string command = "cd " + quoted(work_) + " && " + shell_setup_ + "timeout 120 " + quoted(binary) + " " +
                                args + " >" + quoted(root_ / "stdout") + " 2>" + quoted(root_ / "stderr") + " </dev/null";
    const int raw = std::system(command.c_str());
    Ran r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(root_ / "stdout");
    r.err = slurp(root_ / "stderr");
    return r;
  }
  // Expects a usage error whose stderr names `message`.
  void expect_usage_error(const std::string& args, const std::string& message) {
    const Ran r = conform(args);
    EXPECT_EQ(r.status, 2) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\nstderr: " << r.err;
  }
  fs::path path(const std::string& name) const { return work_ / name; }
  std::string arg(const std::string& name) const { return quoted(path(name)); }
  // Everything in root_ except work/ and the captured output: what a command wrote where it must not.
  std::vector<std::string> strays() const {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(root_)) {
      const std::string name = e.path().filename().string();
      if (name != "work" && name != "stdout" && name != "stderr") found.push_back(name);
    }
    return found;
  }
  Json read_json(const std::string& name) const { return Json::parse(slurp(path(name))); }
  void write_json(const std::string& name, const Json& j) const { std::ofstream(path(name)) << j.dump(1); }
  // A small vectors folder `v` for relu and max, with its pristine index kept as `index.orig`.
  Json make_vectors() {
    const Ran made = conform("vectors v --ops relu,max --cases 8 --seed 5");
    EXPECT_EQ(made.status, 0) << made.err;
    fs::copy_file(path("v/index.json"), path("index.orig"));
    return read_json("v/index.json");
  }
  // Answers every suite of the vectors folder `dir` with tapewise itself (eval --prefix out_).
  void answer_vectors(const std::string& dir) {
    const Json index = read_json(dir + "/index.json");
    ASSERT_FALSE(index["suites"].empty());
    for (const Json& suite : index["suites"]) {
      const std::string folder = dir + "/" + suite["id"].get<std::string>();
      std::string args = "eval " + suite["op"].get<std::string>() + " --backend cpu --prefix out_ --out " + folder;
      for (const auto& [name, file] : suite["inputs"].items()) args += " --" + name + " " + folder + "/" + file.get<std::string>();
      if (suite.value("same", false)) args += " --same";
      args += " --dtype " + suite["dtype"].get<std::string>();  // bfloat16's '<u2' files need it
      for (const auto& [name, value] : suite["scalars"].items()) args += " --" + name + " " + value.dump();
      const Ran r = conform(args);
      ASSERT_EQ(r.status, 0) << args << "\n" << r.err;
    }
  }
  fs::path root_, work_;
  std::string shell_setup_;  // shell commands run before the binary (ulimit)
};

void write_float_npy(const fs::path& path, std::vector<float> values) {
  const tapewise::HostArray a = tapewise::HostArray::of<float>(tapewise::Shape{static_cast<std::int64_t>(values.size())}, values);
  ASSERT_TRUE(tapewise::conform::write_npy(path.string(), a));
}

// Sets element `i` of a float32 .npy file to `value`, leaving the others as they are.
void set_float_element(const fs::path& path, std::size_t i, float value) {
  auto a = tapewise::conform::read_npy(path.string());
  ASSERT_TRUE(a) << a.error().str();
  ASSERT_EQ(a->dtype, tapewise::DType::float32);
  ASSERT_LT(i, static_cast<std::size_t>(a->numel()));
  std::memcpy(a->bytes.data() + i * sizeof value, &value, sizeof value);
  ASSERT_TRUE(tapewise::conform::write_npy(path.string(), *a));
}

// --- 1: a folder where a file belongs ---------------------------------------------------------------

TEST_F(Cli, FoldersWhereFilesBelongAreUsageErrors) {
  fs::create_directory(path("d.npy"));
  expect_usage_error("eval sin --x d.npy --backend cpu", "d.npy: is a directory");
  make_vectors();
  fs::rename(path("v/index.json"), path("index.moved"));
  fs::create_directory(path("v/index.json"));
  expect_usage_error("check v", "index.json: is a directory");
  fs::remove(path("v/index.json"));
  fs::rename(path("index.moved"), path("v/index.json"));
  fs::remove(path("v/relu_float32_random0/x.npy"));
  fs::create_directory(path("v/relu_float32_random0/x.npy"));
  expect_usage_error("check v", "x.npy: is a directory");
}

TEST_F(Cli, AFolderAsAnOutputIsTheImplementationsViolation) {
  make_vectors();
  fs::create_directory(path("v/relu_float32_random0/out_y.npy"));
  const Ran r = conform("check v");
  EXPECT_EQ(r.status, 1) << r.err;  // like any malformed output: graded, not an input error
  EXPECT_NE(r.out.find("out_y.npy: is a directory"), std::string::npos) << r.out;
}

// --- 2: wrong JSON types in index.json --------------------------------------------------------------

TEST_F(Cli, WrongTypesInTheIndexAreUsageErrors) {
  const Json index = make_vectors();
  std::ofstream(path("v/index.json")) << R"({"schema":1})";
  expect_usage_error("check v", "schema is not tapewise-conform.vectors/1");
  const std::vector<std::pair<std::string, std::string>> fields = {{"seed", "'seed' must be a whole number"},
                                                                   {"cases", "'cases' must be a whole number"}};
  for (const auto& [key, message] : fields) {
    Json bad = index;
    bad[key] = "12";
    write_json("v/index.json", bad);
    expect_usage_error("check v", message);
  }
  Json bad = index;
  bad["suites"][0]["same"] = "yes";
  write_json("v/index.json", bad);
  expect_usage_error("check v", "'same' is not true or false");
  bad = index;
  bad["suites"][0]["rows"] = Json::array({Json{{"line", "three"}}});
  write_json("v/index.json", bad);
  expect_usage_error("check v", "'line' is not a line number");
  bad = index;
  bad["suites"] = Json::object();
  write_json("v/index.json", bad);
  expect_usage_error("check v", "no 'suites' array");
}

// --- 3: non-regular and oversized files -------------------------------------------------------------

TEST_F(Cli, DevicesFifosAndHugeFilesAreRefusedBeforeReading) {
  expect_usage_error("eval sin --x /dev/zero", "/dev/zero: is a character device");
  ASSERT_EQ(::mkfifo(path("pipe.npy").c_str(), 0600), 0);
  expect_usage_error("eval sin --x pipe.npy", "pipe.npy: is a FIFO");
  // 2 GiB without a header (sparse: no disk used): refused from its first bytes.
  std::ofstream(path("big.npy")).close();
  fs::resize_file(path("big.npy"), std::uintmax_t{2} << 30);
  expect_usage_error("eval sin --x big.npy", "bad magic");
  // A valid header followed by 2 GiB: the size is checked against the shape before any data is read.
  write_float_npy(path("long.npy"), {1, 2, 3});
  fs::resize_file(path("long.npy"), std::uintmax_t{2} << 30);
  expect_usage_error("eval sin --x long.npy", "bytes after the data of shape [3]");
}

TEST_F(Cli, ShapesBeyondTheLimitAreRefused) {
  // A header claiming 2^28 + 1 float32 elements: refused by its header, whatever the file holds.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (268435457,), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  std::ofstream(path("many.npy"), std::ios::binary) << file << header;
  expect_usage_error("eval sin --x many.npy", "too many elements");
}

// --- 4 and 9: --cases and --seed --------------------------------------------------------------------

TEST_F(Cli, CasesAreBoundedAndNamedPlainly) {
  expect_usage_error("run --ops sin --backend cpu --cases 1000000000000", "from 0 to 100000000");
  expect_usage_error("run --ops sin --backend cpu --cases 9223372036854775807", "from 0 to 100000000");
  expect_usage_error("vectors v --ops sin --cases 1000000000000", "from 0 to 100000000");
  const Ran r = conform("run --ops sin --cases abc");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--cases: 'abc' is not a whole number from 0 to 100000000"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << "no 309-digit range: " << r.err;
}

// A list of nodes or dtypes: every item must name one; an empty value or a stray comma is refused
// (it once meant "all"), and a dtype a subcommand does not cover is named as such.
TEST_F(Cli, NodeAndDtypeListsRefuseEmptyAndUnknownItems) {
  for (const std::string command : {"run --backend cpu --cases 4", "vectors v --cases 4", "audit --backend cpu"}) {
    expect_usage_error(command + " --ops relu --dtype ''", "--dtype: the value is empty");
    expect_usage_error(command + " --ops relu --dtype float32,", "--dtype: 'float32,' has an empty item");
    expect_usage_error(command + " --ops relu --dtype ,float64", "has an empty item");
    expect_usage_error(command + " --ops relu --dtype float32,,float64", "has an empty item");
    expect_usage_error(command + " --ops relu --dtype float8", "--dtype: 'float8' is not float32, float64");
    expect_usage_error(command + " --ops '' --dtype float32", "--ops: the value is empty");
    expect_usage_error(command + " --ops relu, --dtype float32", "--ops: 'relu,' has an empty item");
    expect_usage_error(command + " --ops relu,sine --dtype float32", "unknown node 'sine'; did you mean 'sin'?");
  }
  expect_usage_error("prove --ops relu --dtype float32,bfloat16,", "--dtype: 'float32,bfloat16,' has an empty item");
  EXPECT_EQ(conform("sweep --backend cpu --ops neg --dtype bfloat16,f16 --range 0:16 --validate 100").status, 0);
  expect_usage_error("sweep --backend cpu --ops neg --dtype float32, --range 0:16", "has an empty item");
  EXPECT_TRUE(strays().empty());
  // Repeats and short names are one dtype each; the rows follow the table's order, not the list's.
  const Ran r = conform("run --ops relu --backend cpu --cases 4 --dtype f16,float32,float16 --json rows.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Json rows = Json::parse(std::ifstream(path("rows.json")))["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0]["dtype"], "float32");
  EXPECT_EQ(rows[1]["dtype"], "float16");
}

TEST_F(Cli, NegativeSeedsAreRefused) {
  expect_usage_error("run --ops relu --backend cpu --cases 10 --seed -1", "--seed: -1 is negative");
  expect_usage_error("vectors v --ops relu --cases 10 --seed -1", "--seed: -1 is negative");
  expect_usage_error("run --ops relu --backend cpu --cases 10 --seed 18446744073709551616", "too large");
  const Ran top = conform("run --ops relu --backend cpu --cases 10 --seed 18446744073709551615");
  EXPECT_EQ(top.status, 0) << top.err;
  EXPECT_NE(top.out.find("seed: 18446744073709551615"), std::string::npos) << top.out;
  Json index = make_vectors();
  index["seed"] = -3;
  write_json("v/index.json", index);
  expect_usage_error("check v", "'seed' must be a whole number from 0 to 18446744073709551615");
}

TEST_F(Cli, ReportPathsAreCheckedBeforeTheRun) {
  const Ran r = conform("run --ops relu --backend cpu --cases 10 --json " + arg("missing/r.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("nodes conform"), std::string::npos) << "failed only after the run:\n" << r.out;
  const Ran a = conform("audit --ops relu --backend cpu --markdown " + arg("missing/a.md"));
  EXPECT_EQ(a.status, 2);
  EXPECT_NE(a.err.find("--markdown"), std::string::npos) << a.err;
  EXPECT_EQ(a.out.find("points hold"), std::string::npos) << a.out;
  make_vectors();
  fs::create_directory(path("report.json"));
  expect_usage_error("check v --json report.json", "report.json: is a directory");
}

// --- 5: special points that hold nothing ------------------------------------------------------------

TEST_F(Cli, SpecialPointsWithNoRowsAreUsageErrors) {
  std::ofstream(path("empty")).close();
  std::ofstream(path("comments")) << "# only a comment\nwhy relu: no rows follow\n";
  for (const std::string command : {"run --ops relu --backend cpu --cases 10", "vectors v --ops relu --cases 10",
                                     "audit --ops relu --backend cpu"}) {
    expect_usage_error(command + " --special-points " + work_.string(), "is a directory");
    expect_usage_error(command + " --special-points empty", "holds no rows");
    expect_usage_error(command + " --special-points comments", "holds no rows");
    expect_usage_error(command + " --special-points /dev/zero", "is a character device");
  }
  EXPECT_FALSE(fs::exists(path("v/index.json")));
}

// eval's scalar options come from the op table: each scalar name of spec/ops.def is an option that
// the node taking it needs, and every other node refuses, so a node with a new scalar name never
// runs with a silent 0.
TEST_F(Cli, EvalTakesEveryScalarOfTheTableByName) {
  write_float_npy(path("x.npy"), {0.25f, 2.0f});
  for (const tapewise::OpInfo& info : tapewise::kOps) {
    if (info.arity != 1) continue;
    for (int k = 0; k < info.scalar_count(); ++k) {
      const std::string name = info.scalar_names[k];
      std::string given;
      for (int j = 0; j < info.scalar_count(); ++j)
        given += std::string(" --") + info.scalar_names[j] + " " + (j == 0 ? "0.5" : "1.5");
      const Ran ran = conform("eval " + std::string(info.name) + " --x x.npy --backend cpu --out o_" + info.name + given);
      EXPECT_EQ(ran.status, 0) << info.name << given << ": " << ran.err;
      std::string without;
      for (int j = 0; j < info.scalar_count(); ++j)
        if (j != k) without += std::string(" --") + info.scalar_names[j] + " 1.5";
      expect_usage_error("eval " + std::string(info.name) + " --x x.npy --backend cpu" + without,
                         std::string(info.name) + " needs --" + name);
      expect_usage_error("eval sin --x x.npy --backend cpu --" + name + " 1", "--" + name + " is not a scalar of sin");
    }
  }
}

// --- 6: writes stay in the output folder ------------------------------------------------------------

TEST_F(Cli, EvalWritesOnlyInsideItsOutputFolder) {
  write_float_npy(path("x.npy"), {1, 2, 3});
  fs::create_directory(path("out"));
  expect_usage_error("eval sin --x x.npy --out out --prefix ../x_", "--prefix '../x_' may not contain '/'");
  expect_usage_error("eval sin --x x.npy --out out --prefix " + (root_ / "abs_").string(), "may not contain '/'");
  expect_usage_error("eval sin --x x.npy --out out --prefix ..", "or be '..'");
  expect_usage_error("eval sin --x x.npy --out ''", "--out: the output folder is empty");
  // A symbolic link already in the folder is refused, and its target left alone.
  fs::create_symlink(root_ / "victim.npy", path("out/y.npy"));
  expect_usage_error("eval sin --x x.npy --out out", "out/y.npy: is a symbolic link; refusing to write through it");
  EXPECT_EQ(strays(), std::vector<std::string>{});
  const Ran plain = conform("eval sin --x x.npy --out fresh --prefix out_");
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_TRUE(fs::exists(path("fresh/out_y.npy")));
}

TEST_F(Cli, VectorsWritesOnlyInsideItsFolder) {
  expect_usage_error("vectors '' --ops relu --cases 4", "the output folder is empty");
  EXPECT_TRUE(fs::is_empty(work_)) << "vectors \"\" wrote into the current folder";
  fs::create_directory(path("v"));
  fs::create_directory(root_ / "elsewhere");
  fs::create_symlink(root_ / "elsewhere", path("v/relu_float32_random0"));
  expect_usage_error("vectors v --ops relu --cases 4", "relu_float32_random0: is a symbolic link");
  EXPECT_TRUE(fs::is_empty(root_ / "elsewhere"));
  fs::remove(path("v/relu_float32_random0"));
  fs::create_symlink(root_ / "victim.json", path("v/index.json"));
  expect_usage_error("vectors v --ops relu --cases 4", "index.json: is a symbolic link");
  EXPECT_FALSE(fs::exists(root_ / "victim.json"));
}

// --- 7: check reads only the schema's files inside the suite folder ---------------------------------

TEST_F(Cli, CheckReadsOnlyTheSchemasFilesInsideTheFolder) {
  const Json index = make_vectors();
  std::size_t special = 0;
  while (index["suites"][special]["kind"] != "special") ++special;
  const std::vector<std::pair<std::string, std::string>> paths = {
      {"/etc/passwd", "'inputs' must name exactly"}, {"../../index.orig", "'inputs' must name exactly"},
      {"/dev/zero", "'inputs' must name exactly"}};
  for (const auto& [file, message] : paths) {
    Json bad = index;
    bad["suites"][0]["inputs"]["g"] = file;
    write_json("v/index.json", bad);
    expect_usage_error("check v", message);
  }
  Json cheat = index;  // the expected values as the implementation's answer
  cheat["suites"][special]["outputs"]["y"] = "expected_y.npy";
  write_json("v/index.json", cheat);
  expect_usage_error("check v", "'outputs' must name exactly {y: out_y.npy");
  Json escape = index;
  escape["suites"][0]["id"] = "..";
  write_json("v/index.json", escape);
  expect_usage_error("check v", "is not a plain folder name");
  // Symbolic links that leave the folder: a file, and a whole suite folder.
  write_json("v/index.json", index);
  const std::string id = index["suites"][0]["id"];
  fs::rename(path("v/" + id + "/g.npy"), root_ / "g.npy");
  fs::create_symlink(root_ / "g.npy", path("v/" + id + "/g.npy"));
  expect_usage_error("check v", "g.npy: is a symbolic link that leads outside the suite folder");
  fs::rename(path("v/" + id), root_ / "suite");
  fs::create_symlink(root_ / "suite", path("v/" + id));
  expect_usage_error("check v", "leads outside the vectors folder");
}

// --- 12: --version and the version fields -----------------------------------------------------------

TEST_F(Cli, VersionAndSpecHashAreReported) {
  const Ran v = conform("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out, std::string("tapewise-conform ") + tapewise::kVersion + " (spec sha256 " + tapewise::kSpecSha256 + ")\n");
  const Ran run = conform("run --ops relu --backend cpu --cases 10 --json run.json");
  ASSERT_EQ(run.status, 0) << run.err;
  const Json report = read_json("run.json");
  EXPECT_EQ(report["tapewise_version"], tapewise::kVersion);
  EXPECT_EQ(report["spec_sha256"], tapewise::kSpecSha256);
  EXPECT_TRUE(report["special_points_file"].is_string());
  Json index = make_vectors();
  EXPECT_EQ(index["tapewise_version"], tapewise::kVersion);
  EXPECT_EQ(index["spec_sha256"], tapewise::kSpecSha256);
  answer_vectors("v");
  const Ran same = conform("check v --json check.json");
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.err.find("warning"), std::string::npos) << same.err;
  EXPECT_EQ(read_json("check.json")["spec_sha256"], tapewise::kSpecSha256);
  index["spec_sha256"] = "0000";
  write_json("v/index.json", index);
  const Ran other = conform("check v");
  EXPECT_EQ(other.status, 0) << other.err;  // graded all the same
  EXPECT_NE(other.err.find("warning: v/index.json was written against another spec (sha256 0000"), std::string::npos)
      << other.err;
}

// --- 13: the binary finds its data without the source tree ------------------------------------------

TEST_F(Cli, ACopiedTreeFindsItsSpecialPoints) {
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree / "bin");
  fs::create_directories(tree / "share" / "tapewise");
  fs::copy_file(::tapewise::testing::conform_binary(), tree / "bin" / "tapewise-conform");
  fs::copy_file(TAPEWISE_SPECIAL_POINTS, tree / "share" / "tapewise" / "special_points");
  const Ran r = conform("run --ops relu --cases 10 --backend cpu", tree / "bin" / "tapewise-conform");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("special points: " + (tree / "share" / "tapewise" / "special_points").string()), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("1/1 nodes conform"), std::string::npos) << r.out;
  // Without its share/ folder (and no ./spec here) it says where it looked.
  fs::remove_all(tree / "share");
  const Ran lost = conform("run --ops relu --cases 10 --backend cpu", tree / "bin" / "tapewise-conform");
  EXPECT_EQ(lost.status, 2);
  EXPECT_NE(lost.err.find("spec/special_points not found"), std::string::npos) << lost.err;
  EXPECT_NE(lost.err.find((tree / "share" / "tapewise" / "special_points").string()), std::string::npos) << lost.err;
}

// --- one writer for every file the runner writes ----------------------------------------------------

// A small graph every writer test can run (two elements, one node).
const char* const kPlainGraph =
    R"({"schema": "tapewise-conform.graph/1", "dtype": "float64", "leaves": [{"name": "x", "values": [1.0, 2.0]}],
        "nodes": [{"name": "y", "op": "scale", "parents": ["x"], "scalars": {"c": 0.5}}], "output": "y",
        "seed": [1.0, 1.0]})";

TEST_F(Cli, NoReportIsWrittenThroughASymbolicLink) {
  std::ofstream(path("g.json")) << kPlainGraph;
  make_vectors();
  const std::vector<std::string> writers = {
      "run --ops relu --backend cpu --cases 10 --json link",
      "check v --json link",
      "sweep --backend cpu --ops neg --dtype float32 --range 0x3f800000:0x3f800100 --validate 100 --json link",
      "ops --json link",
      "audit --ops relu --backend cpu --markdown link",
      "graph g.json --backend cpu --json link"};
  fs::create_symlink(root_ / "victim", path("link"));
  for (const std::string& command : writers) {
    expect_usage_error(command, "link: is a symbolic link; refusing to write through it");
    EXPECT_FALSE(fs::exists(root_ / "victim")) << command << " wrote through the link";
  }
}

TEST_F(Cli, AReportNamingAPathThatIsNotUtf8IsWrittenWhole) {
  fs::copy_file(TAPEWISE_SPECIAL_POINTS, path("sp\xff"));
  std::ofstream(path("r.json")) << "the old report";
  const Ran r = conform("run --ops relu --backend cpu --cases 10 --special-points 'sp\xff' --json r.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Json report = read_json("r.json");
  EXPECT_EQ(report["special_points_file"], "sp\\xff");
  make_vectors();
  answer_vectors("v");
  fs::rename(path("v"), path("v\xfe"));
  const Ran check = conform("check 'v\xfe' --json c.json");
  EXPECT_EQ(check.status, 0) << check.err;  // graded, and the report written
  EXPECT_EQ(read_json("c.json")["implementation"]["dir"], "v\\xfe");
}

TEST_F(Cli, EveryOutputIsCheckedBeforeTheWork) {
  const Ran sweep = conform("sweep --backend cpu --ops neg --dtype float32 --range 0:256 --validate 100 --json nodir/x.json");
  EXPECT_EQ(sweep.status, 2);
  EXPECT_NE(sweep.err.find("--json nodir/x.json: folder nodir does not exist"), std::string::npos) << sweep.err;
  EXPECT_EQ(sweep.out.find("node sweeps conform"), std::string::npos) << "refused only after the sweep:\n" << sweep.out;
  // eval: a refused second output leaves the first unwritten.
  write_float_npy(path("x.npy"), {1, 2, 3});
  fs::create_directories(path("out/dx.npy"));
  expect_usage_error("eval sin --backend cpu --x x.npy --g x.npy --out out", "dx.npy: is a directory");
  EXPECT_FALSE(fs::exists(path("out/y.npy")));
}

TEST_F(Cli, AWriteCutShortLeavesTheOldFilesWhole) {
  // 2^17 float32 values: 512 KiB per output, past a 64-block file size limit (32 or 64 KiB), so the
  // kernel stops the write part way (SIGXFSZ) as an interrupt would.
  write_float_npy(path("x.npy"), std::vector<float>(1 << 17, 0.5f));
  fs::create_directory(path("out"));
  std::ofstream(path("out/y.npy")) << "old y";
  std::ofstream(path("out/dx.npy")) << "old dx";
  shell_setup_ = "ulimit -c 0; ulimit -f 64; ";
  const Ran r = conform("eval sin --backend cpu --x x.npy --g x.npy --out out");
  shell_setup_.clear();
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(slurp(path("out/y.npy")), "old y");
  EXPECT_EQ(slurp(path("out/dx.npy")), "old dx");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(path("out"))) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"dx.npy", "y.npy"})) << "a temporary file was left behind";
}

TEST_F(Cli, StandardOutputThatCannotBeWrittenIsAnError) {
  const std::string binary = quoted(fs::path(::tapewise::testing::conform_binary()));
  const std::string command = "cd " + quoted(work_) + " && " + binary + " run --ops relu --backend cpu --cases 10 >/dev/full 2>" +
                              quoted(root_ / "stderr");
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 2);
  EXPECT_NE(slurp(root_ / "stderr").find("cannot write to standard output"), std::string::npos) << slurp(root_ / "stderr");
  // /dev/stdout (a symbolic link to the process's own descriptor) still means standard output.
  const Ran ops = conform("ops --json /dev/stdout");
  ASSERT_EQ(ops.status, 0) << ops.err;
  EXPECT_EQ(Json::parse(ops.out)["schema"], "tapewise-conform.ops/1");
  std::ofstream(path("g.json")) << kPlainGraph;
  const Ran graph = conform("graph g.json --backend cpu --json /dev/stdout");
  ASSERT_EQ(graph.status, 0) << graph.err;
  EXPECT_NE(graph.out.find("\"schema\": \"tapewise-conform.graph-report/1\""), std::string::npos) << graph.out;
}

// --- a node's card --------------------------------------------------------------------------------

// `ops --card NAME` lists every place of the checkout that defines the node, each with the line where
// it is found: all sixteen for sin (a swept TorchLean node). An unknown node, and a folder that is
// not a checkout, are usage errors naming what was wrong.
TEST_F(Cli, OpsCardNamesEveryPlaceThatDefinesANode) {
  const fs::path source = fs::path(TAPEWISE_SPECIAL_POINTS).parent_path().parent_path();
  const Ran card = conform("ops --card sin --source " + quoted(source));
  ASSERT_EQ(card.status, 0) << card.err;
  for (const char* file : {"spec/ops.def:", "include/tapewise/tapewise.h:", "proptest/c_api_test.cpp:",
                           "python/tapewise/_tapewise.pyi:", "spec/conventions.md:", "cuda/kernels/op_math.cuh:", "spec/stagings.def:",
                           "reference/reference.cpp:", "spec/bounds.def:", "spec/special_points:",
                           "reference/sweep_reference.hpp:", "include/tapewise/tape.hpp:", "python/tapewise/torch/_ops.py:",
                           "conform/aten_parity.py:", "conform/frameworks/forms.py:"})
    EXPECT_NE(card.out.find(file), std::string::npos) << file << " missing from\n" << card.out;
  EXPECT_EQ(card.out.find("(not found)"), std::string::npos) << card.out;
  EXPECT_NE(card.out.find("0 of 16 places lack sin"), std::string::npos) << card.out;

  expect_usage_error("ops --card sine --source " + quoted(source), "--card: unknown node 'sine'; did you mean 'sin'?");
  expect_usage_error("ops --card sin --source " + quoted(work_), "--card needs the source tree");
}

// --- deeply nested JSON is refused, not a stack overflow --------------------------------------------

TEST_F(Cli, DeeplyNestedJsonIsRefusedNotACrash) {
  const std::string open(200000, '['), closed = open + std::string(200000, ']');
  const Json plain = Json::parse(kPlainGraph);
  const std::vector<std::string> graph_fields = {"/schema", "/dtype", "/leaves/0/values/0", "/nodes/0/scalars/c", "/seed/0"};
  for (const std::string& field : graph_fields)
    for (const std::string& nest : {open, closed}) {
      Json doc = plain;
      doc[Json::json_pointer(field)] = "@@";
      std::string text = doc.dump();
      text.replace(text.find("\"@@\""), 4, nest);
      std::ofstream(path("deep.json")) << text;
      SCOPED_TRACE(field);
      expect_usage_error("graph deep.json --backend cpu", "nest deeper than 64 levels");
    }
  const Json index = make_vectors();
  for (const std::string field : {"schema", "id", "op", "dtype", "count", "inputs", "outputs", "scalars", "same"}) {
    Json bad = index;
    (field == "schema" ? bad : bad["suites"][0])[field] = "@@";
    std::string text = bad.dump();
    text.replace(text.find("\"@@\""), 4, std::string(150000, '[') + std::string(150000, ']'));
    std::ofstream(path("v/index.json")) << text;
    SCOPED_TRACE(field);
    expect_usage_error("check v", "index.json: not a document the runner reads: arrays and objects nest deeper than 64");
  }
}

// --- no verdict without evidence --------------------------------------------------------------------

TEST_F(Cli, NoPassWithoutSomethingGraded) {
  std::ofstream(path("neg_only")) << "op=neg dtype=f32 x=1 g=1 y=-1 dx=-1\n";
  expect_usage_error("run --ops relu --backend cpu --cases 10 --special-points neg_only",
                     "no verdict: relu float32: no special point graded");
  expect_usage_error("audit --ops neg,relu --backend cpu --special-points neg_only",
                     "no verdict: special points: neg_only has no rows for neg float64, neg bfloat16, neg float16, "
                     "relu float32, relu float64, relu bfloat16, relu float16");
  expect_usage_error("run --ops relu --backend cpu --cases 0", "no verdict: relu float32: no forward value graded");
  // A violation needs no such completeness: it is a finding, exit 1.
  std::ofstream(path("wrong_relu")) << "op=relu dtype=f32 x=+0 g=1 y=+0 dx=1\n";
  const Ran wrong = conform("audit --ops relu,neg --backend cpu --special-points wrong_relu");
  EXPECT_EQ(wrong.status, 1) << wrong.out << wrong.err;
  expect_usage_error("sweep --backend cpu --ops add --dtype float32 --pair-log2 0 --range 0x20000:0x30000",
                     "no case to sweep for add float32 (--range lies past their cases)");
  expect_usage_error("sweep --backend cpu --ops neg --dtype float32 --range 0:16 --validate 0",
                     "--validate 0 leaves the sweep's reference unchecked");
  std::ofstream(path("empty.json")) << R"({"schema": "tapewise-conform.graph/1", "dtype": "float64",
      "leaves": [{"name": "x", "values": []}], "nodes": [{"name": "y", "op": "sin", "parents": ["x"]}],
      "output": "y", "seed": []})";
  expect_usage_error("graph empty.json --backend cpu", "'x' has no elements");
}

TEST_F(Cli, CheckPassesOnlyWithRandomAndSpecialCasesOfEveryRow) {
  Json index = make_vectors();
  answer_vectors("v");
  const Ran answered = conform("check v");
  ASSERT_EQ(answered.status, 0) << answered.out << answered.err;
  Json random_only = index;
  random_only["suites"] = Json::array();
  for (const Json& s : index["suites"])
    if (s["kind"] == "random") random_only["suites"].push_back(s);
  write_json("v/index.json", random_only);
  expect_usage_error("check v", "no verdict: relu float32: no special point graded");
  const Ran made = conform("vectors w --ops relu --cases 0 --seed 5");
  ASSERT_EQ(made.status, 0) << made.err;
  answer_vectors("w");
  expect_usage_error("check w", "no verdict: relu float32: no forward value graded");
}

// A folder nobody answered says nothing of an implementation: no verdict (exit 2) naming the suites,
// not a violation; a folder answered but for one dtype is no verdict for that dtype's rows.
TEST_F(Cli, CheckOfAnUnansweredFolderIsNoVerdict) {
  make_vectors();
  const Ran untouched = conform("check v");
  EXPECT_EQ(untouched.status, 2) << untouched.out << untouched.err;
  EXPECT_NE(untouched.err.find("no verdict: relu float32: not answered: no out_*.npy in relu_float32_random0"),
            std::string::npos) << untouched.err;
  EXPECT_NE(untouched.out.find("0/2 nodes conform; no verdict for 2 (8 rows with nothing graded)"), std::string::npos)
      << untouched.out;

  answer_vectors("v");
  for (const auto& entry : fs::directory_iterator(path("v")))
    if (entry.path().filename().string().find("_bfloat16_") != std::string::npos)
      for (const auto& file : fs::directory_iterator(entry.path()))
        if (file.path().filename().string().starts_with("out_")) fs::remove(file.path());
  const Ran no_bfloat16 = conform("check v --json r.json");
  EXPECT_EQ(no_bfloat16.status, 2) << no_bfloat16.out << no_bfloat16.err;
  EXPECT_NE(no_bfloat16.err.find("no verdict: max bfloat16: not answered"), std::string::npos) << no_bfloat16.err;
  EXPECT_EQ(no_bfloat16.err.find("float32: not answered"), std::string::npos) << no_bfloat16.err;
  EXPECT_NE(no_bfloat16.out.find("no verdict for 2 (2 rows with nothing graded)"), std::string::npos) << no_bfloat16.out;
  EXPECT_FALSE(fs::exists(path("r.json"))) << "no report without a verdict";

  // One output of an answered suite missing is the implementation's violation, not a lack of answers.
  answer_vectors("v");
  fs::remove(path("v/relu_float32_random0/out_dx.npy"));
  const Ran missing_one = conform("check v");
  EXPECT_EQ(missing_one.status, 1) << missing_one.out << missing_one.err;
  EXPECT_NE(missing_one.out.find("relu_float32_random0/out_dx.npy: cannot open"), std::string::npos) << missing_one.out;
}

// check grades special suites against its own spec/special_points: an implementation that rewrites a
// folder's expected values to match its answers is still graded against the spec, and inputs that
// are no row of the spec are an input error.
TEST_F(Cli, CheckRegradesSpecialSuitesFromTheSpec) {
  make_vectors();
  answer_vectors("v");
  const fs::path suite = path("v/relu_float32_special0");
  set_float_element(suite / "out_dx.npy", 0, 123.0f);
  set_float_element(suite / "expected_dx.npy", 0, 123.0f);
  const Ran wrong = conform("check v --junit r.xml");
  EXPECT_EQ(wrong.status, 1) << wrong.out << wrong.err;
  EXPECT_NE(wrong.out.find("relu_float32_special0[0] (spec/special_points:"), std::string::npos) << wrong.out;
  EXPECT_NE(wrong.out.find("got 0x1.ecp+6 (123"), std::string::npos) << wrong.out;
  // The JUnit failure names the point in its message, and every test case says what it took.
  const std::string junit = slurp(path("r.xml"));
  EXPECT_NE(junit.find("<failure message=\"fails: special; first: special point relu_float32_special0[0]"),
            std::string::npos) << junit;
  EXPECT_EQ(junit.find("<testcase classname=\"tapewise.check.float32\" name=\"relu\"/>"), std::string::npos);
  EXPECT_NE(junit.find("name=\"relu\" time=\""), std::string::npos) << junit;

  answer_vectors("v");
  set_float_element(suite / "x.npy", 0, 0.375f);
  const Ran other_inputs = conform("check v");
  EXPECT_EQ(other_inputs.status, 2) << other_inputs.out << other_inputs.err;
  EXPECT_NE(other_inputs.err.find("suite relu_float32_special0: element 0"), std::string::npos) << other_inputs.err;
  EXPECT_NE(other_inputs.err.find("is not a row of"), std::string::npos) << other_inputs.err;
}

// --- every report against its JSON Schema (spec/schemas/) -----------------------------------------

fs::path source_path(const std::string& relative) {
  return fs::path(TAPEWISE_SPECIAL_POINTS).parent_path().parent_path() / relative;  // <source>/spec/special_points
}

tapewise::testing::JsonSchema schema_of(const std::string& name) {
  return tapewise::testing::JsonSchema(Json::parse(slurp(source_path("spec/schemas/" + name + ".schema.json"))));
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

TEST_F(Cli, EveryReportMatchesItsSchema) {
  std::ofstream(path("g.json")) << kPlainGraph;
  make_vectors();
  answer_vectors("v");
  const std::vector<std::pair<std::string, std::string>> writes = {
      {"run --ops clamp,relu,max --backend cpu --cases 20 --seed 1 --json run.json", "report"},
      {"check v --json check.json", "report"},
      {"audit --ops clamp,max --backend cpu --json audit.json", "audit"},
      {"graph g.json --backend cpu --json graph.json", "graph-report"},
      {"sweep --backend cpu --ops neg --dtype float32 --range 0x3f800000:0x3f800100 --validate 100 --json sweep.json",
       "sweep"},
      {"ops --json ops.json", "ops"}};
  for (const auto& [args, schema] : writes) {
    const Ran r = conform(args);
    ASSERT_EQ(r.status, 0) << args << "\n" << r.err;
    const std::string file = args.substr(args.rfind(' ') + 1);
    EXPECT_EQ(joined(schema_of(schema).errors(read_json(file))), "") << args;
  }
  EXPECT_EQ(joined(schema_of("vectors").errors(read_json("v/index.json"))), "");
  // A report with violations: its samples and failures match too.
  set_float_element(path("v/relu_float32_random0/out_y.npy"), 0, 123.0f);
  set_float_element(path("v/relu_float32_special0/out_dx.npy"), 0, 123.0f);
  ASSERT_EQ(conform("check v --json bad.json").status, 1);
  const Json bad = read_json("bad.json");
  EXPECT_EQ(joined(schema_of("report").errors(bad)), "");
  EXPECT_FALSE(bad["rows"][4]["forward"]["violating"].empty()) << bad["rows"][4].dump();  // relu float32
  // prove needs a solver: its schema is held against the committed report of a real run.
  EXPECT_EQ(joined(schema_of("prove").errors(Json::parse(slurp(source_path("evidence/prover/prove.json"))))), "");

  // The schemas fail what drifts: a 16-bit name where run writes "float32", a field missing, a field
  // no schema names, audit's former "f32" and string scalars.
  Json run = read_json("run.json");
  run["rows"][0]["dtype"] = "f32";
  run["summary"].erase("line");
  run["extra"] = 1;
  const std::string run_errors = joined(schema_of("report").errors(run));
  EXPECT_NE(run_errors.find("/rows/0/dtype: \"f32\" is not one of"), std::string::npos) << run_errors;
  EXPECT_NE(run_errors.find("/summary: 'line' is missing"), std::string::npos) << run_errors;
  EXPECT_NE(run_errors.find(": 'extra' is not a property of the schema"), std::string::npos) << run_errors;
  Json audit = read_json("audit.json");
  audit["nodes"][0]["rows"][0]["dtype"] = "f32";
  audit["nodes"][0]["rows"][0]["scalars"] = "lo=-1 hi=1";
  const std::string audit_errors = joined(schema_of("audit").errors(audit));
  EXPECT_NE(audit_errors.find("/nodes/0/rows/0/dtype"), std::string::npos) << audit_errors;
  EXPECT_NE(audit_errors.find("/nodes/0/rows/0/scalars: \"lo=-1 hi=1\" is not of type \"object\""), std::string::npos)
      << audit_errors;
  // A keyword the validator does not know is the schema's fault, never silently passed.
  const tapewise::testing::JsonSchema unknown(Json::parse(R"({"type": "object", "maxProperties": 1})"));
  EXPECT_NE(joined(unknown.errors(Json::object())).find("'maxProperties', which this validator does not check"),
            std::string::npos);
}

// --- no silent sweep of hours on the CPU ------------------------------------------------------------

TEST_F(Cli, ACpuSweepOfHoursIsRefusedWithItsEstimate) {
  // The defaults: every float32 case of every swept node (2^32 each), hours on a CPU. Refused in
  // seconds, not run.
  const Ran hours = conform("sweep --backend cpu");
  EXPECT_EQ(hours.status, 2) << hours.err;
  EXPECT_NE(hours.err.find("103079215104 cases on the CPU, estimated"), std::string::npos) << hours.err;
  EXPECT_NE(hours.err.find("is refused without --allow-long"), std::string::npos) << hours.err;
  // A slice runs, and says first what it will cost.
  const Ran slice = conform("sweep --backend cpu --ops sin --dtype float32 --range 0x3f800000:0x3f800400 --validate 100");
  EXPECT_EQ(slice.status, 0) << slice.err;
  EXPECT_NE(slice.err.find("1024 cases on the CPU, estimated"), std::string::npos) << slice.err;
  expect_usage_error("sweep --backend cpu --devices 8 --ops neg --dtype float32 --range 0:16",
                     "--devices 8 splits a sweep over CUDA devices, but the backend is cpu");
}

// --- numbers outside what an option means -----------------------------------------------------------

TEST_F(Cli, NumericOptionsTakeOnlyTheirRange) {
  const std::string sweep = "sweep --backend cpu --ops neg --dtype float32 --range 0:16 ";
  expect_usage_error(sweep + "--devices=-1", "--devices: -1 is negative; it must be a whole number from 1 to 64");
  expect_usage_error(sweep + "--validate=1e3", "--validate: '1e3' is not a whole number from 0 to 100000000");
  expect_usage_error(sweep + "--stride=0x10", "--stride: '0x10' is not a whole number");
  expect_usage_error(sweep + "--chunk=1.5", "--chunk: '1.5' is not a whole number");
  expect_usage_error(sweep + "--host-cases=-5", "--host-cases: -5 is negative");
  expect_usage_error(sweep + "--pair-log2=17", "--pair-log2: 17 is out of range");
}

// --- a graph's size is bounded before anything is built ---------------------------------------------

TEST_F(Cli, AGraphPastTheCheckersLimitsIsRefusedBeforeBuilding) {
  {  // 2^19 + 1 leaves and nodes: a chain of neg
    std::ofstream out(path("many.json"));
    out << R"({"schema": "tapewise-conform.graph/1", "dtype": "float32", "leaves": [{"name": "n0", "values": [1]}], "nodes": [)";
    for (int i = 1; i <= (1 << 19); ++i)
      out << (i > 1 ? "," : "") << R"({"name":"n)" << i << R"(","op":"neg","parents":["n)" << i - 1 << R"("]})";
    out << R"(], "output": "n524288", "seed": [1]})";
  }
  expect_usage_error("graph many.json --backend cpu", "524289 leaves and nodes; the checker takes at most 524288");
  {  // 129 nodes of 2^16 elements over one leaf: 130 * 2^16 > 2^23 elements
    std::ofstream out(path("wide.json"));
    out << R"({"schema": "tapewise-conform.graph/1", "dtype": "float32", "leaves": [{"name": "x", "values": [)";
    for (int i = 0; i < (1 << 16); ++i) out << (i ? ",1" : "1");
    out << R"(]}], "nodes": [)";
    for (int i = 0; i < 129; ++i) out << (i ? "," : "") << R"({"name":"y)" << i << R"(","op":"sin","parents":["x"]})";
    out << R"(], "output": "x", "seed": [)";
    for (int i = 0; i < (1 << 16); ++i) out << (i ? ",1" : "1");
    out << "]}";
  }
  expect_usage_error("graph wide.json --backend cpu", "more than 8388608 elements over the leaves and nodes (at 'y127')");
  {  // 2^23 + 1 JSON values, refused while parsing
    std::ofstream out(path("values.json"));
    out << R"({"schema": "tapewise-conform.graph/1", "dtype": "float32", "leaves": [{"name": "x", "values": [)";
    for (int i = 0; i < (1 << 23); ++i) out << (i ? ",1" : "1");
    out << "]}]}";
  }
  expect_usage_error("graph values.json --backend cpu", "more than 8388608 JSON values");
}

// --- --version and -V are listed in --help ----------------------------------------------------------

TEST_F(Cli, VersionIsListedInHelp) {
  const Ran help = conform("--help");
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_NE(help.out.find("-V,--version"), std::string::npos) << help.out;
  const Ran v = conform("-V");
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_EQ(v.out, std::string("tapewise-conform ") + tapewise::kVersion + " (spec sha256 " + tapewise::kSpecSha256 + ")\n");
}

// --- options parsed by hand show their type in --help -----------------------------------------------

TEST_F(Cli, NumericOptionsShowTheirTypeInHelp) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"run --help", {"--cases N", "--seed UINT64", "--json FILE|-"}},
      {"vectors --help", {"--cases N", "--seed UINT64"}},
      {"eval --help", {"--c FLOAT", "--lo FLOAT", "--hi FLOAT", "--eps FLOAT"}},
      {"sweep --help", {"--devices N", "--stride N", "--pair-log2 N", "--float64-log2 N", "--host-cases N",
                        "--validate N", "--chunk N", "--seed UINT64", "--range LO:HI"}}};
  for (const auto& [args, shown] : expected) {
    const Ran help = conform(args);
    EXPECT_EQ(help.status, 0) << args << "\n" << help.err;
    for (const std::string& text : shown) EXPECT_NE(help.out.find(text), std::string::npos) << args << ": " << text;
    for (const char* option : {"--cases TEXT", "--seed TEXT", "--devices TEXT", "--c TEXT", "--chunk TEXT"})
      EXPECT_EQ(help.out.find(option), std::string::npos) << args << ": " << option << "\n" << help.out;
  }
}

// --- "did you mean" for subcommands, options and node names -----------------------------------------

TEST_F(Cli, MistypedNamesGetTheClosestSuggested) {
  expect_usage_error("rnu", "unknown subcommand 'rnu'; did you mean 'run'?");
  expect_usage_error("auidt --ops relu", "unknown subcommand 'auidt'; did you mean 'audit'?");
  expect_usage_error("run --sed 5", "run: unknown option '--sed'; did you mean '--seed'?");
  expect_usage_error("sweep --devcies=2", "sweep: unknown option '--devcies'; did you mean '--devices'?");
  expect_usage_error("run --ops relx --backend cpu", "--ops: unknown node 'relx'; did you mean 'relu'?");
  expect_usage_error("audit --ops sigmod --backend cpu", "did you mean 'sigmoid'?");
  // Nothing close: no suggestion, and the known names are still listed.
  const Ran far = conform("xyzzy");
  EXPECT_EQ(far.status, 2);
  EXPECT_NE(far.err.find("unknown subcommand 'xyzzy' (subcommands: run,"), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

// --- --json - gives standard output to the report alone ---------------------------------------------

TEST_F(Cli, JsonToStandardOutputIsTheReportAlone) {
  std::ofstream(path("g.json")) << kPlainGraph;
  make_vectors();
  answer_vectors("v");
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"run --ops relu --backend cpu --cases 10 --seed 1 --json -", "tapewise-conform.report/1"},
      {"check v --json -", "tapewise-conform.report/1"},
      {"sweep --backend cpu --ops neg --dtype float32 --range 0x3f800000:0x3f800100 --validate 100 --json -",
       "tapewise-conform.sweep/2"},
      {"ops --json -", "tapewise-conform.ops/1"},
      {"graph g.json --backend cpu --json -", "tapewise-conform.graph-report/1"},
      {"audit --ops relu --backend cpu --json -", "tapewise-conform.audit/1"},
      {"run --ops relu --backend cpu --cases 10 --seed 1 --json /dev/stdout", "tapewise-conform.report/1"},
      {"run --ops relu --backend cpu --cases 10 --seed 1 --json /dev/fd/1", "tapewise-conform.report/1"},
      {"audit --ops relu --backend cpu --markdown /proc/self/fd/1", "# "}};
  for (const auto& [args, schema] : commands) {
    const Ran r = conform(args);
    EXPECT_TRUE(r.status == 0 || r.status == 1) << args << "\n" << r.err;
    if (args.find("--markdown") != std::string::npos) {  // Markdown, not JSON: the document alone
      EXPECT_TRUE(r.out.starts_with(schema)) << args << "\nstdout: " << r.out.substr(0, 400);
      continue;
    }
    Json report;
    ASSERT_NO_THROW(report = Json::parse(r.out)) << args << "\nstdout: " << r.out.substr(0, 400);
    EXPECT_EQ(report["schema"], schema) << args;
  }
  // The human text still comes, on stderr.
  const Ran run = conform("run --ops relu --backend cpu --cases 10 --seed 1 --json -");
  EXPECT_NE(run.err.find("1/1 nodes conform"), std::string::npos) << run.err;
}

// --- audit --json -----------------------------------------------------------------------------------

TEST_F(Cli, AuditWritesItsPointsAsJson) {
  const Ran r = conform("audit --ops relu,max --dtype float32 --backend cpu --json audit.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Json audit = read_json("audit.json");
  EXPECT_EQ(audit["schema"], "tapewise-conform.audit/1");
  EXPECT_EQ(audit["tapewise_version"], tapewise::kVersion);
  EXPECT_EQ(audit["spec_sha256"], tapewise::kSpecSha256);
  ASSERT_EQ(audit["nodes"].size(), 2u);
  int rows = 0;
  for (const Json& node : audit["nodes"]) {
    EXPECT_EQ(node["points"], node["rows"].size());
    for (const Json& row : node["rows"]) {
      ++rows;
      EXPECT_EQ(row["dtype"], "float32");  // the names run and check write
      EXPECT_EQ(row["scalars"], Json::object()) << row.dump();
      EXPECT_EQ(row["verdict"], "ok");
      EXPECT_EQ(row["fused"], row["spec"]) << row.dump();  // a conforming backend gives the spec's values
      EXPECT_EQ(row["staged"], row["spec"]) << row.dump();
      for (const char* key : {"line", "inputs", "g", "note", "failing"}) EXPECT_TRUE(row.contains(key)) << key;
    }
  }
  EXPECT_EQ(audit["summary"]["points"], rows);
  EXPECT_EQ(audit["summary"]["holding"], rows);
  EXPECT_EQ(audit["summary"]["conforms"], true);
  // relu'(0) is the spec's +0 for g = 1, written exactly.
  bool relu_at_zero = false;
  for (const Json& row : audit["nodes"][1]["rows"])
    relu_at_zero = relu_at_zero || (row["inputs"]["x"] == "+0" && row["g"] == "1" && row["spec"]["grads"]["dx"] == "+0");
  EXPECT_TRUE(relu_at_zero) << audit["nodes"][1].dump();
  // Scalars are an object of numbers, "inf", "-inf" or "nan", as in run's report and the vectors index.
  ASSERT_EQ(conform("audit --ops clamp --dtype float32 --backend cpu --json clamp.json").status, 0);
  bool infinite_bound = false;
  const Json clamp = read_json("clamp.json");
  for (const Json& row : clamp["nodes"][0]["rows"]) {
    ASSERT_TRUE(row["scalars"].is_object()) << row.dump();
    for (const char* name : {"lo", "hi"}) {
      const Json& v = row["scalars"][name];
      EXPECT_TRUE(v.is_number() || v == "inf" || v == "-inf" || v == "nan") << row.dump();
      infinite_bound = infinite_bound || v == "inf" || v == "-inf";
    }
  }
  EXPECT_TRUE(infinite_bound) << "spec/special_points has clamp rows with an infinite bound";
  // The output is checked before the work, like every other.
  expect_usage_error("audit --ops relu --backend cpu --json nosuch/audit.json", "--json nosuch/audit.json: folder");
}

// --- --junit, read back by a real XML parser --------------------------------------------------------

// Python's xml.etree reads a JUnit file and prints one line per suite ("suite NAME tests=N failures=N
// skipped=N") and per test case ("case CLASSNAME NAME ok|failure|skipped"), then each failure's text;
// it exits 1 when the counts in the attributes disagree with the elements.
const char* const kJunitReader = R"(import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
bad = 0
for suite in root.findall("testsuite"):
    cases = suite.findall("testcase")
    failures = sum(1 for c in cases if c.find("failure") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    print("suite %s tests=%s failures=%s skipped=%s" % (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("skipped")))
    bad |= int(suite.get("tests")) != len(cases) or int(suite.get("failures")) != failures or int(suite.get("skipped")) != skipped
    for c in cases:
        status = "failure" if c.find("failure") is not None else "skipped" if c.find("skipped") is not None else "ok"
        print("case %s %s %s" % (c.get("classname"), c.get("name"), status))
    for f in suite.iter("failure"):
        print("failure-text " + f.text.replace("\n", " | "))
sys.exit(1 if bad else 0)
)";

TEST_F(Cli, JunitReportsAreReadByAnXmlParser) {
  std::ofstream(path("read_junit.py")) << kJunitReader;
  auto read = [&](const std::string& file) {
    const std::string command = "python3 " + arg("read_junit.py") + " " + arg(file) + " >" + quoted(root_ / "parsed") + " 2>&1";
    const int raw = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << file << ": " << slurp(root_ / "parsed");
    return slurp(root_ / "parsed");
  };
  ASSERT_EQ(conform("run --ops relu,max --backend cpu --cases 10 --seed 1 --junit run.xml").status, 0);
  const std::string run = read("run.xml");
  // One case per node and dtype: the default run covers float32, float64, bfloat16 and float16.
  EXPECT_NE(run.find("suite tapewise.run tests=8 failures=0 skipped=0"), std::string::npos) << run;
  EXPECT_NE(run.find("case tapewise.run.float32 relu ok"), std::string::npos) << run;
  EXPECT_NE(run.find("case tapewise.run.float64 max ok"), std::string::npos) << run;
  EXPECT_NE(run.find("case tapewise.run.bfloat16 relu ok"), std::string::npos) << run;
  EXPECT_NE(run.find("case tapewise.run.float16 max ok"), std::string::npos) << run;

  ASSERT_EQ(conform("audit --ops relu --dtype float32 --backend cpu --junit audit.xml").status, 0);
  EXPECT_NE(read("audit.xml").find("suite tapewise.audit tests=1 failures=0 skipped=0\ncase tapewise.audit.float32 relu ok"),
            std::string::npos);

  const Ran sweep = conform("sweep --backend cpu --ops all --dtype float32 --range 0x3f800000:0x3f800100 --validate 100 "
                            "--junit sweep.xml");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const std::string swept = read("sweep.xml");
  EXPECT_NE(swept.find("case tapewise.sweep.float32 neg ok"), std::string::npos) << swept;
  EXPECT_NE(swept.find("case tapewise.sweep reference-validation ok"), std::string::npos) << swept;

  // check of a suite with an output missing, in a folder whose name holds < & " ' ]]>, a control byte
  // and a byte that is not UTF-8: the node fails, and the reason, naming the folder, still parses.
  make_vectors();
  answer_vectors("v");
  fs::remove(path("v/relu_float32_random0/out_y.npy"));
  shell_setup_ = "D=$(printf 'v<&\"\\047\\001\\377]]>') && mv v \"$D\" && ";
  const Ran check = conform("check \"$D\" --junit check.xml");
  shell_setup_.clear();
  EXPECT_EQ(check.status, 1) << check.err;
  const std::string checked = read("check.xml");
  EXPECT_NE(checked.find("suite tapewise.check tests=8 failures=1 skipped=0"), std::string::npos) << checked;  // 2 nodes x 4 dtypes
  EXPECT_NE(checked.find("case tapewise.check.float32 relu failure"), std::string::npos) << checked;
  EXPECT_NE(checked.find("v<&\"'\\x01\\xff]]>/relu_float32_random0/out_y.npy: cannot open"), std::string::npos) << checked;

  // The one writer: checked before the work, never through a symbolic link, "-" is standard output.
  expect_usage_error("run --ops relu --backend cpu --cases 10 --junit nosuch/r.xml", "--junit nosuch/r.xml: folder");
  fs::create_symlink(root_ / "victim", path("link"));
  expect_usage_error("audit --ops relu --backend cpu --junit link", "--junit link: is a symbolic link");
  EXPECT_FALSE(fs::exists(root_ / "victim"));
  const Ran out = conform("run --ops relu --backend cpu --cases 10 --seed 1 --junit -");
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_TRUE(out.out.starts_with("<?xml")) << out.out.substr(0, 200);
}

// Two reports on standard output would interleave into neither JSON nor XML: every subcommand with
// both options refuses the pair before doing any work, and writes nothing to stdout.
// A solver script that is not there is a usage error naming it, before any claim runs, even for
// nodes that need no lemma (add).
TEST_F(Cli, ProveRefusesASolverThatIsNotAFile) {
  for (const std::string& solver : {arg("no-such-solver.py"), arg("")}) {
    const Ran r = conform("prove --ops add --backend cpu --solver " + solver);
    EXPECT_EQ(r.status, 2) << solver << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("--solver: " + solver.substr(1, solver.size() - 2) + " is not a file"), std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
  }
}

// The prover's doors: with no solver, a solver that stops answering, or one that answers another
// query, prove has no verdict: exit 2 with the reason, never 1 (a violation) or 0 (proven). sqrt in
// float32 needs one lemma from the solver.
TEST_F(Cli, ProveWithoutAnAnswerIsNoVerdict) {
  const std::string sqrt_f32 = "prove --ops sqrt --dtype float32 --backend cpu";
  const Ran none = conform(sqrt_f32 + " --python " + arg("no-such-python"));
  EXPECT_EQ(none.status, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("no verdict for "), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("the solver process ended"), std::string::npos) << none.err;

  std::ofstream(path("hang.py")) << "import sys, time\nsys.stdin.readline()\ntime.sleep(600)\n";
  const auto start = std::chrono::steady_clock::now();
  const Ran hung = conform(sqrt_f32 + " --timeout 0.5 --solver " + arg("hang.py"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hung.status, 2) << hung.out << hung.err;
  EXPECT_NE(hung.err.find("the solver did not answer within 5.5 s"), std::string::npos) << hung.err;
  EXPECT_LT(waited, 60) << "the prover waited for a solver that stopped answering";

  std::ofstream(path("liar.py")) << "import json, sys\nfor line in sys.stdin:\n"
                                    "    q = json.loads(line)\n"
                                    "    print(json.dumps({'id': q['id'] + 1, 'result': 'unsat', 'seconds': 0}), flush=True)\n";
  const Ran liar = conform(sqrt_f32 + " --solver " + arg("liar.py"));
  EXPECT_EQ(liar.status, 2) << liar.out << liar.err;
  EXPECT_NE(liar.err.find("the solver answered query 2, not query 1; not believed"), std::string::npos) << liar.err;
}

// A limit below 1 ms would reach Bitwuzla as 0, which it reads as no limit; an ATen audit of dtypes it
// does not cover would pass having audited nothing. Both are refused before any work.
TEST_F(Cli, ProveRefusesATimeoutBelowOneMillisecondAndAnAuditOfNothing) {
  for (const char* timeout : {"0.0005", "0", "-1", "nan", "3601"})
    expect_usage_error(std::string("prove --ops sqrt --dtype float32 --backend cpu --timeout ") + timeout, "--timeout");
  expect_usage_error("prove --ops sqrt --dtype bfloat16,float16 --backend cpu --frameworks", "--dtype names neither");
}

TEST_F(Cli, JsonAndJunitBothOnStandardOutputAreRefused) {
  make_vectors();
  const std::vector<std::string> subcommands = {"run --ops relu --backend cpu --cases 10", "audit --ops relu --backend cpu",
                                                "check " + arg("v"), "sweep --backend cpu --ops neg --range 0:16"};
  for (const std::string& sub : subcommands) {
    for (const std::string pair : {"--json - --junit -", "--junit - --json /dev/stdout", "--json /dev/fd/1 --junit -",
                                   "--junit /proc/self/fd/1 --json /dev//stdout"}) {
      const Ran r = conform(sub + " " + pair);
      EXPECT_EQ(r.status, 2) << sub << " " << pair << "\nstderr: " << r.err;
      EXPECT_NE(r.err.find("both write to standard output; write one of them to a file"), std::string::npos)
          << sub << " " << pair << "\nstderr: " << r.err;
      EXPECT_TRUE(r.out.empty()) << sub << " " << pair << "\nstdout: " << r.out.substr(0, 200);
    }
  }
  const Ran audit = conform("audit --ops relu --backend cpu --json - --junit -");
  EXPECT_NE(audit.err.find("tapewise-conform: audit: --json - and --junit - both write"), std::string::npos) << audit.err;
  expect_usage_error("audit --ops relu --backend cpu --markdown - --json -",
                     "audit: --json - and --markdown - both write to standard output");
  // Two reports to one file would overwrite each other, by whatever path they name it.
  std::ofstream(path("old.out")) << "old";
  fs::create_symlink("old.out", path("alias.out"));
  const std::vector<std::string> same_file = {"--json r.out --junit r.out", "--json r.out --junit ./r.out",
                                              "--json old.out --junit alias.out"};
  for (const std::string& pair : same_file) {
    const Ran r = conform("run --ops relu --backend cpu --cases 10 " + pair);
    EXPECT_EQ(r.status, 2) << pair << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("both write to the same file; give each report a file of its own"), std::string::npos)
        << pair << "\nstderr: " << r.err;
  }
  expect_usage_error("audit --ops relu --backend cpu --markdown a.md --json " + arg("a.md"), "both write to the same file");
  // /dev/null takes each report whole and keeps none: no clash there.
  EXPECT_EQ(conform("run --ops relu --backend cpu --cases 10 --json /dev/null --junit /dev/null").status, 0);
  EXPECT_FALSE(fs::exists(path("r.out")));
  EXPECT_EQ(slurp(path("old.out")), "old");
}

// --quiet: nothing on standard output but a report sent there; errors and no-verdict reasons still
// reach stderr, and the exit status says the rest.
TEST_F(Cli, QuietPrintsOnlyReportsAndErrors) {
  const Ran quiet = conform("run --ops relu --backend cpu --cases 10 --seed 1 --quiet");
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(quiet.err, "");
  const Ran report = conform("run --ops relu --backend cpu --cases 10 --seed 1 -q --json -");
  EXPECT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(Json::parse(report.out)["summary"]["line"], "1/1 nodes conform");
  EXPECT_EQ(report.err, "");
  make_vectors();
  const Ran unanswered = conform("check v --quiet");
  EXPECT_EQ(unanswered.status, 2);
  EXPECT_EQ(unanswered.out, "");
  EXPECT_NE(unanswered.err.find("no verdict: relu float32: not answered"), std::string::npos) << unanswered.err;
  const Ran sweep = conform("sweep --backend cpu --ops neg --dtype float32 --range 0x3f800000:0x3f800100 --validate 100 -q");
  EXPECT_EQ(sweep.status, 0) << sweep.err;
  EXPECT_EQ(sweep.out + sweep.err, "");
}

// Each subcommand's --help ends with what its own exit statuses mean (eval and vectors grade
// nothing; check's no verdict is a folder not answered), once.
TEST_F(Cli, EachSubcommandsHelpStatesItsOwnExitStatuses) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"run", "2 no verdict (a node, dtype or output with nothing graded, or no special point)"},
      {"audit", "0 every special point holds on both VJP paths; 1 one does not"},
      {"eval", "1 the node failed on the backend (nothing written); 2 a usage or input error. eval grades nothing."},
      {"vectors", "Exit status: 0 the suite was written; 2 a usage or input error. vectors grades nothing."},
      {"check", "2 no verdict (a suite not answered"},
      {"graph", "2 no verdict (a node with nothing graded), a bad graph"},
      {"sweep", "Exit status: 0 every node conforms (no value above its bound inside the domain"},
      {"ops", "Exit status: 0 the table or card was printed or written; 2 a usage error."},
      {"prove", "1 a claim refuted; 2 no verdict (the solver gave no answer"}};
  for (const auto& [sub, text] : expected) {
    const Ran help = conform(sub + " --help");
    EXPECT_EQ(help.status, 0) << sub;
    EXPECT_NE(help.out.find(text), std::string::npos) << sub << ":\n" << help.out;
    const std::size_t first = help.out.find("Exit status:");
    EXPECT_EQ(help.out.find("Exit status:", first + 1), std::string::npos) << sub << " says it twice:\n" << help.out;
    EXPECT_NE(help.out.find("-q,--quiet"), std::string::npos) << sub;
  }
}

// The table's columns are as wide as their data: a bfloat16 row of 100,000 cases stays apart.
TEST_F(Cli, TableColumnsStayApartAtLargeCounts) {
  const Ran r = conform("run --ops neg --dtype bfloat16 --backend cpu --cases 100000 --seed 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\nneg      bfloat16 100000 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnode     dtype     cases "), std::string::npos) << r.out;
}

// A float16 gelu at x = 1000, outside the domain: the staging's q = c3 x^2 rounds past 65504 and dx
// is NaN where the exact derivative is 1. spec/bounds.def accepts that overflow there; sweep and
// graph grade it by the one rule (grade.hpp, accepted_above_bound), and both pass it.
TEST_F(Cli, GraphAcceptsWhatSweepAcceptsOutsideTheDomain) {
  std::ofstream(path("gelu16.json")) << R"({"schema": "tapewise-conform.graph/1", "dtype": "float16",
      "leaves": [{"name": "x", "values": [1000.0, 0.5]}], "nodes": [{"name": "y", "op": "gelu", "parents": ["x"]}],
      "output": "y", "seed": [1.0, 1.0]})";
  const Ran graph = conform("graph gelu16.json --backend cpu --json gelu16.report.json");
  EXPECT_EQ(graph.status, 0) << graph.out << graph.err;
  const Json report = read_json("gelu16.report.json");
  bool seen = false;
  for (const Json& node : report["nodes"]) {
    if (node["name"] != "y") continue;
    seen = true;
    EXPECT_EQ(node["vjp"]["violations"], 0) << node.dump();
    EXPECT_EQ(node["vjp"]["accepted_outside_domain"], 1) << node.dump();
    EXPECT_EQ(node["forward"]["accepted_outside_domain"], 0) << node.dump();
  }
  EXPECT_TRUE(seen) << report.dump();
  EXPECT_NE(graph.out.find("'y' (#1): 1 values above the bound outside the node's domain, accepted"), std::string::npos)
      << graph.out;
  // The same input through sweep (case 0x63d0 is float16 1000): above the bound for an accepted cause.
  const Ran sweep = conform("sweep --backend cpu --ops gelu --dtype float16 --range 0x63d0:0x63d1 --validate 100");
  EXPECT_EQ(sweep.status, 0) << sweep.out << sweep.err;
  EXPECT_NE(sweep.out.find("overflow 1 "), std::string::npos) << sweep.out;
}

}  // namespace
