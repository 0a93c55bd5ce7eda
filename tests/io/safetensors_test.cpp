#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "util/error.h"

namespace io_safetensors_test {

using namespace brigade;
using namespace brigade::io;

namespace {

std::vector<uint8_t> file_with_header(const std::string& json, size_t data_bytes = 0) {
  std::vector<uint8_t> out(8);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  out.insert(out.end(), json.begin(), json.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::string refusal(std::vector<uint8_t> bytes) {
  try {
    SafeTensors::parse(std::move(bytes), "bad.safetensors");
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("brigade-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("tensors and metadata round-trip through a safetensors file") {
  SafeTensorsWriter w;
  const std::vector<float> weight = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  const std::vector<int32_t> tokens = {0, 255, 17};
  w.add("fc1.weight", {2, 3}, weight);
  w.add("target", {3}, tokens);
  w.add("empty", {0, 4}, std::span<const float>{});
  w.set_metadata("step", "42");
  const auto path = (temp_dir() / "roundtrip.safetensors").string();
  w.write(path);
  const SafeTensors st = SafeTensors::load(path);
  CHECK(st.names() == std::vector<std::string>{"empty", "fc1.weight", "target"});
  CHECK(st.f32("fc1.weight", {2, 3}) == weight);
  CHECK(st.i32("target", 0, 256) == tokens);
  CHECK(st.f32("empty").empty());
  CHECK(st.metadata().at("step") == "42");
  CHECK(st.info("fc1.weight").dtype == DType::F32);
  CHECK(!std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(temp_dir());
}

TEST_CASE("the data section starts 8-byte aligned as the format recommends") {
  SafeTensorsWriter w;
  const std::vector<float> x = {1.0f};
  w.add("x", {1}, x);
  const auto bytes = w.serialize();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  CHECK((8 + n) % 8 == 0);
  CHECK(bytes.size() == 8 + n + 4);
}

TEST_CASE("I64 tokens convert to int32 and out-of-range values are named") {
  const int64_t values[] = {3, 7, 300};
  SafeTensorsWriter w;
  w.add("input", DType::I64, {3}, values, sizeof values);
  const SafeTensors st = SafeTensors::parse(w.serialize(), "batch.safetensors");
  CHECK(st.i32("input", 0, 1000) == std::vector<int32_t>{3, 7, 300});
  CHECK_THROWS_WITH_AS(st.i32("input", 0, 256),
                       doctest::Contains("batch.safetensors: tensor 'input' element 2 is 300, outside [0, 256)"),
                       UserError);
}

TEST_CASE("a tensor of the wrong name, dtype or shape is refused naming both") {
  SafeTensorsWriter w;
  const std::vector<float> x(6, 1.0f);
  w.add("fc1.weight", {3, 2}, x);
  const SafeTensors st = SafeTensors::parse(w.serialize(), "params.safetensors");
  CHECK_THROWS_WITH_AS(st.f32("fc1.weight", {2, 3}),
                       doctest::Contains("params.safetensors: tensor 'fc1.weight' has shape [3, 2], expected [2, 3]"),
                       UserError);
  CHECK_THROWS_WITH_AS(st.f32("fc2.weight"), doctest::Contains("no tensor named 'fc2.weight'"), UserError);
  CHECK_THROWS_WITH_AS(st.i32("fc1.weight", 0, 10), doctest::Contains("is F32, expected I32 or I64"), UserError);
}

TEST_CASE("malformed files are refused with what is wrong") {
  CHECK(refusal({1, 2, 3}).find("shorter than the 8-byte header length") != std::string::npos);
  auto huge = file_with_header("{}");
  huge[7] = 0x10;  // header length ~ 2^60
  CHECK(refusal(huge).find("over the 100 MiB limit") != std::string::npos);
  auto past = file_with_header("{}");
  past[0] = 200;
  CHECK(refusal(past).find("runs past the end") != std::string::npos);
  CHECK(refusal(file_with_header("{not json")).find("header is not JSON") != std::string::npos);
  CHECK(refusal(file_with_header("[1,2]")).find("not a JSON object") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1))
            .find("unknown dtype \"Q8\"") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4))
            .find("fall outside the 4-byte data section") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
            .find("holds 8 bytes but F32 [3] needs 12") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
            .find("tensor 'x' shape [-1] has dimension -1; expected non-negative integers") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12))
            .find("overlap") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[1]}})")).find("tensor 'x' has no \"data_offsets\"") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"__metadata__":{"k":1}})")).find("metadata 'k' is 1, not a string") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", 4))
            .find("overflows") != std::string::npos);
}

TEST_CASE("a failed atomic write leaves the previous file untouched") {
  const auto dir = temp_dir();
  const auto path = (dir / "keep.safetensors").string();
  const std::vector<uint8_t> old = {1, 2, 3};
  write_atomically(path, old);
  CHECK_THROWS_WITH_AS(write_atomically((dir / "missing" / "x.safetensors").string(), old),
                       doctest::Contains("cannot create"), UserError);
  std::filesystem::create_directory(dir / "blocker.safetensors");
  CHECK_THROWS_WITH_AS(write_atomically((dir / "blocker.safetensors").string(), old),
                       doctest::Contains("blocker.safetensors: is a folder"), UserError);
  CHECK(!std::filesystem::exists(dir / "blocker.safetensors.tmp"));
  CHECK(std::filesystem::file_size(path) == 3);
  CHECK_THROWS_WITH_AS(SafeTensors::load((dir / "nope.safetensors").string()), doctest::Contains("cannot open"), UserError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a path that is not a regular file is refused and left as it was") {
  namespace fs = std::filesystem;
  const auto dir = temp_dir();
  const std::vector<uint8_t> bytes = {1, 2, 3};
  struct Case {
    fs::path path;
    std::string what;
    fs::file_type type;
  };
  std::vector<Case> cases;
  fs::create_directory(dir / "folder");
  cases.push_back({dir / "folder", "is a folder", fs::file_type::directory});
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  cases.push_back({dir / "fifo", "is a named pipe", fs::file_type::fifo});
  fs::create_symlink("elsewhere.safetensors", dir / "link");
  cases.push_back({dir / "link", "is a symbolic link (to elsewhere.safetensors)", fs::file_type::symlink});
  // A character device like /dev/null's; making one takes root (CAP_MKNOD).
  if (::mknod((dir / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    cases.push_back({dir / "null", "is a device", fs::file_type::character});
  else
    MESSAGE("not root: the device case is left out");
  for (const Case& c : cases) {
    const std::string expect = c.path.string() + ": " + c.what + ", not a regular file; nothing is written over it";
    CHECK_THROWS_WITH_AS(check_writable(c.path.string()), doctest::Contains(expect.c_str()), UserError);
    CHECK_THROWS_WITH_AS(write_atomically(c.path.string(), bytes), doctest::Contains(expect.c_str()), UserError);
    CHECK_MESSAGE(fs::symlink_status(c.path).type() == c.type, c.path);
    CHECK_FALSE(fs::exists(c.path.string() + ".tmp"));
  }
  CHECK_FALSE(fs::exists(dir / "elsewhere.safetensors"));
  // A temporary left there that is not a regular file: the write would open it.
  REQUIRE(::mkfifo((dir / "p.safetensors.tmp").c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(write_atomically((dir / "p.safetensors").string(), bytes),
                       doctest::Contains("p.safetensors.tmp: is a named pipe"), UserError);
  CHECK_THROWS_WITH_AS(check_writable(""), doctest::Contains("an empty path names no file to write"), UserError);
  CHECK_THROWS_WITH_AS(write_atomically("", bytes), doctest::Contains("an empty path names no file to write"), UserError);
  fs::remove_all(dir);
}

TEST_CASE("the tensors must fill the data section with no gap, as the format promises") {
  const std::string two = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  CHECK(refusal(file_with_header(two, 12))
            .find("bad.safetensors: not a valid safetensors file: bytes [4, 8) of the data section before "
                  "tensor 'b' belong to no tensor; expected contiguous tensors") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8))
            .find("bytes [0, 4) of the data section before tensor 'a' belong to no tensor") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 10))
            .find("the last 6 bytes of the 10-byte data section belong to no tensor") != std::string::npos);
  CHECK(refusal(file_with_header("{}", 1)).find("the last 1 bytes") != std::string::npos);
  // Empty tensors take no room wherever the writer puts them.
  SafeTensorsWriter w;
  const std::vector<float> x = {1.0f};
  w.add("a", {0}, std::span<const float>{});
  w.add("b", {1}, x);
  w.add("c", {2, 0}, std::span<const float>{});
  CHECK(SafeTensors::parse(w.serialize(), "ok.safetensors").names().size() == 3);
}

TEST_CASE("refusals are one line naming the file, what is wrong and what was expected") {
  // A tensor name may hold any JSON string; the message escapes it rather than break the line.
  const std::string message =
      refusal(file_with_header(R"({"a\nb":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4));
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find("tensor 'a\\nb' holds 4 bytes but F32 [2] needs 8") != std::string::npos);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1))
            .find("(expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)") != std::string::npos);
  const std::string json = refusal(file_with_header("{not json"));
  CHECK(json.starts_with("bad.safetensors: not a valid safetensors file: the 9-byte header is not JSON (parse error at line 1, column 3"));
  CHECK(json.find("[json.exception") == std::string::npos);
  const std::string long_name(5000, 'n');
  const std::string cut = refusal(file_with_header("{\"" + long_name + R"(":{"dtype":"F32","shape":[1]}})"));
  CHECK(cut.find("has no \"data_offsets\"") != std::string::npos);
  CHECK(cut.size() < 300);
  CHECK(refusal(file_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4))
            .find("tensor 'x' data_offsets [0] is not [begin, end] in bytes") != std::string::npos);
}

}  // namespace io_safetensors_test
