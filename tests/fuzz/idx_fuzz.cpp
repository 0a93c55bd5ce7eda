// libFuzzer harness for the IDX reader: the bytes of a file, gunzipped first when they start
// with gzip's magic number (as read_idx does), are parsed as IDX. A refusal must be one clear
// UserError line.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "io/idx.h"

using namespace brigade;

namespace {
constexpr const char* kSource = "fuzz.idx";
constexpr size_t kGunzipLimit = size_t(64) << 20;  // well under libFuzzer's memory limit
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  std::vector<uint8_t> unzipped;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    if (!fuzz::attempt([&] { unzipped = io::gunzip(bytes, kSource, kGunzipLimit); }, {kSource}))
      return 0;
    bytes = unzipped;
  }
  io::IdxArray a;
  if (!fuzz::attempt([&] { a = io::parse_idx(bytes, kSource); }, {kSource})) return 0;
  uint64_t n = 1;
  for (uint32_t d : a.dims) n *= d;
  if (a.dims.empty() || n != a.data.size()) std::abort();  // what parse_idx promises
  return 0;
}
