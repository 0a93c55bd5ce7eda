// libFuzzer harness for the safetensors reader: the bytes of a file are parsed, every tensor
// is read back in each way the engine reads one, and the file is read as the parameters and
// as a batch of each model in tiny_models.h. A refusal must be one clear UserError line.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "io/safetensors.h"
#include "io/tensors.h"
#include "tiny_models.h"

using namespace brigade;

namespace {

constexpr const char* kSource = "fuzz.safetensors";
volatile uint8_t g_sink;  // keeps the reads of tensor bytes from being optimized away

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

// What an accepted file promises: every tensor's bytes match its dtype and shape, and the
// tensors fill the data section without gap or overlap. Written again by the writer, the same
// tensors and metadata read back.
void check_accepted(const io::SafeTensors& st, size_t file_size) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  io::SafeTensorsWriter w;
  for (const std::string& name : st.names()) {
    const io::TensorInfo& t = st.info(name);
    check(t.end - t.begin == t.elements() * io::dtype_size(t.dtype), "bytes match dtype and shape");
    ranges.emplace_back(t.begin, t.end);
    const auto bytes = st.bytes(name);
    w.add(name, t.dtype, t.shape, bytes.data(), bytes.size());
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    check(begin == at, "tensors are contiguous");
    at = end;
  }
  check(at <= file_size, "tensors lie inside the file");
  for (const auto& [key, value] : st.metadata()) w.set_metadata(key, value);
  const io::SafeTensors again = io::SafeTensors::parse(w.serialize(), "rewritten");
  check(again.names() == st.names() && again.metadata() == st.metadata(), "a rewritten file reads back");
  for (const std::string& name : st.names()) {
    const auto a = st.bytes(name), b = again.bytes(name);
    check(again.info(name).shape == st.info(name).shape && again.info(name).dtype == st.info(name).dtype &&
              std::equal(a.begin(), a.end(), b.begin(), b.end()),
          "a rewritten tensor reads back");
  }
}

void read_every_tensor(const io::SafeTensors& st) {
  for (const std::string& name : st.names()) {
    const io::TensorInfo& info = st.info(name);
    uint8_t x = 0;
    for (uint8_t b : st.bytes(name)) x ^= b;  // ASan checks each byte lies inside the file
    g_sink = x;
    fuzz::attempt([&] { st.f32(name); }, {kSource});
    fuzz::attempt([&] { st.f32(name, info.shape); }, {kSource});
    fuzz::attempt([&] { st.f32(name, {2, 3}); }, {kSource});
    fuzz::attempt([&] { st.i32(name, 0, 256); }, {kSource});
  }
  fuzz::attempt([&] { st.info("no such tensor"); }, {kSource});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<model::Model> models = fuzz::tiny_models();
  io::SafeTensors st;
  if (!fuzz::attempt([&] { st = io::SafeTensors::parse(std::vector<uint8_t>(data, data + size), kSource); },
                     {kSource}))
    return 0;
  check_accepted(st, size);
  read_every_tensor(st);
  for (const model::Model& m : models) {
    fuzz::attempt([&] { io::read_parameters(st, m); }, {kSource});
    fuzz::attempt([&] { io::read_batch(st, m); }, {kSource});
  }
  return 0;
}
