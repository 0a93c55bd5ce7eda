// Checkpoints: what goes in comes back, PyTorch's num_batches_tracked is there, and what is
// not a checkpoint is refused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "io/checkpoint.h"
#include "io/tensors.h"
#include "util/error.h"

namespace io_checkpoint_test {

using namespace brigade;

TEST_CASE("a checkpoint round-trips parameters, optimizer state, step and config") {
  const model::Model m = model::build("fashion-cnn-bn");
  io::Checkpoint c;
  c.step = 17, c.seed = 5, c.config = R"({"lr":0.001})";
  for (const model::ParamSpec& p : m.params())
    if (p.kind != model::ParamKind::State) c.params[p.name] = model::initial_values(p, 5);
  c.optimizer["0.weight.exp_avg"] = std::vector<float>(m.params()[0].elements(), 0.25f);
  const auto path = std::filesystem::temp_directory_path() / ("brigade-ckpt-" + std::to_string(getpid()));
  io::write_checkpoint(path.string(), m, c);

  const io::Checkpoint r = io::read_checkpoint(path.string(), m);
  CHECK(r.step == 17);
  CHECK(r.seed == 5);
  CHECK(r.config == c.config);
  CHECK(r.params == c.params);
  CHECK(r.optimizer == c.optimizer);
  CHECK(io::checkpoint_config(path.string()) == c.config);

  // PyTorch's BatchNorm2d keeps num_batches_tracked (int64) beside its running statistics.
  const io::SafeTensors f = io::SafeTensors::load(path.string());
  REQUIRE(f.has("1.num_batches_tracked"));
  CHECK(f.info("1.num_batches_tracked").dtype == io::DType::I64);
  CHECK(f.info("1.num_batches_tracked").shape.empty());
  int64_t tracked = 0;
  std::memcpy(&tracked, f.bytes("1.num_batches_tracked").data(), sizeof tracked);
  CHECK(tracked == 17);
  CHECK(f.has("optimizer.0.weight.exp_avg"));
  // A checkpoint serves as a parameters file: its extra tensors are skipped.
  CHECK(io::read_parameters(f, m).size() == c.params.size());

  // A parameters file is not a checkpoint.
  io::initial_parameters(m, 1).write(path.string());
  CHECK_THROWS_WITH_AS(io::read_checkpoint(path.string(), m), doctest::Contains("not a brigade checkpoint"),
                       UserError);
  std::filesystem::remove(path);
}

namespace {

// The checkpoint at `path` written again with its metadata `key` set to `value`, or removed
// when `value` is empty, and without the checksum a checkpoint carries (io::kChecksum).
void rewrite_metadata(const std::string& path, const std::string& key, const std::string& value) {
  const io::SafeTensors f = io::SafeTensors::load(path);
  io::SafeTensorsWriter w;
  for (const std::string& name : f.names()) {
    const auto bytes = f.bytes(name);
    w.add(name, f.info(name).dtype, f.info(name).shape, bytes.data(), bytes.size());
  }
  for (const auto& [k, v] : f.metadata())
    if (k != key && k != io::kChecksum) w.set_metadata(k, v);  // edited: without the checksum
  if (!value.empty()) w.set_metadata(key, value);
  w.write(path);
}

// fashion-mlp's initial parameters at step 9 written to a file of this process named by `what`.
std::string written_checkpoint(const model::Model& m, const std::string& what) {
  io::Checkpoint c;
  c.step = 9, c.config = "{}";
  for (const model::ParamSpec& p : m.params()) c.params[p.name] = model::initial_values(p, 1);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("brigade-ckpt-" + what + "-" + std::to_string(getpid()))).string();
  io::write_checkpoint(path, m, c);
  return path;
}

}  // namespace

TEST_CASE("a checkpoint keeps the loss scale, one without starts it afresh, and a bad one is refused") {
  const model::Model m = model::build("fashion-mlp");
  io::Checkpoint c;
  c.step = 9, c.config = "{}";
  for (const model::ParamSpec& p : m.params()) c.params[p.name] = model::initial_values(p, 1);
  c.loss_scale.scale = 2048, c.loss_scale.good_steps = 17, c.loss_scale.skipped_steps = 3;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("brigade-ckpt-scale-" + std::to_string(getpid()))).string();
  io::write_checkpoint(path, m, c);
  const io::Checkpoint r = io::read_checkpoint(path, m);
  CHECK(r.loss_scale.scale == 2048);
  CHECK(r.loss_scale.good_steps == 17);
  CHECK(r.loss_scale.skipped_steps == 3);

  rewrite_metadata(path, "loss_scale", "");  // as written before loss scaling existed
  const io::Checkpoint old = io::read_checkpoint(path, m);
  CHECK(old.loss_scale.scale == optim::LossScale::kInitial);
  CHECK(old.loss_scale.good_steps == 0);
  CHECK(old.loss_scale.skipped_steps == 0);

  for (const std::string bad : {"[1]", R"({"scale": 0, "good_steps": 0, "skipped_steps": 0})",
                                R"({"scale": 1024, "good_steps": -1, "skipped_steps": 0})"}) {
    rewrite_metadata(path, "loss_scale", bad);
    CHECK_THROWS_WITH_AS(io::read_checkpoint(path, m), doctest::Contains("metadata 'loss_scale'"), UserError);
  }
  // Counts no run makes: more steps skipped than taken (the updates' count would wrap round),
  // and a scale past its time to grow (it would never grow again).
  rewrite_metadata(path, "loss_scale", R"({"scale": 1024, "good_steps": 0, "skipped_steps": 10})");
  CHECK_THROWS_WITH_AS(io::read_checkpoint(path, m), doctest::Contains("metadata 'loss_scale' counts 10 skipped steps in a run of 9"),
                       UserError);
  rewrite_metadata(path, "loss_scale", R"({"scale": 1024, "good_steps": 2000, "skipped_steps": 0})");
  CHECK_THROWS_WITH_AS(io::read_checkpoint(path, m),
                       doctest::Contains("metadata 'loss_scale' counts 2000 good steps since the scale last changed; "
                                         "it changes after 2000"),
                       UserError);
  rewrite_metadata(path, "loss_scale", R"({"scale": 1024, "good_steps": 1999, "skipped_steps": 9})");
  CHECK(io::read_checkpoint(path, m).loss_scale.skipped_steps == 9);
  std::filesystem::remove(path);
}

// A checkpoint carries the CRC-32 of its tensors and metadata: a byte flipped after the write
// (a bad disk, a copy cut short and padded) or a setting changed is refused by name, where it
// resumed silently. A file without the key (PyTorch's) is read as it is.
TEST_CASE("a checkpoint whose tensors or metadata changed after the write is refused by its CRC-32") {
  const model::Model m = model::build("fashion-mlp");
  const std::string path = written_checkpoint(m, "crc");
  const io::SafeTensors f = io::SafeTensors::load(path);
  REQUIRE(f.metadata().count(io::kChecksum));
  CHECK(f.metadata().at(io::kChecksum).size() == 8);
  const auto flip = [&] {  // one bit of the last tensor
    std::vector<uint8_t> bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() - 5] ^= 0x10;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  };
  flip();
  CHECK_THROWS_WITH_AS(io::read_checkpoint(path, m), doctest::Contains("its tensors and metadata have CRC-32 "), UserError);
  CHECK_THROWS_WITH_AS(io::SafeTensors::load(path), doctest::Contains("the file was damaged after it was written"), UserError);
  flip();
  CHECK(io::read_checkpoint(path, m).step == 9);
  rewrite_metadata(path, io::kChecksum, "");  // no key: the bytes read as they are
  flip();
  CHECK(io::read_checkpoint(path, m).step == 9);
  // The metadata is covered too: a step changed with the checksum kept is refused.
  std::filesystem::remove(path);
  const std::string again = written_checkpoint(m, "crc-meta");
  {
    const io::SafeTensors g = io::SafeTensors::load(again);
    io::SafeTensorsWriter w;
    for (const std::string& name : g.names()) w.add(name, g.info(name).dtype, g.info(name).shape, g.bytes(name).data(), g.bytes(name).size());
    for (const auto& [k, v] : g.metadata()) w.set_metadata(k, k == "step" ? "8" : v);
    w.write(again);
  }
  CHECK_THROWS_WITH_AS(io::read_checkpoint(again, m), doctest::Contains("its tensors and metadata have CRC-32 "), UserError);
  std::filesystem::remove(again);
}

// The step: digits only. std::stoull alone read "-1" as 2^64 - 1 and took "+3" and " 3".
TEST_CASE("a checkpoint's step is a whole number written in digits, or refused") {
  const model::Model m = model::build("fashion-mlp");
  const std::string path = written_checkpoint(m, "step");
  CHECK(io::read_checkpoint(path, m).step == 9);
  rewrite_metadata(path, "step", "18446744073709551615");
  CHECK(io::read_checkpoint(path, m).step == 18446744073709551615ull);
  for (const std::string bad : {"-1", "+3", " 3", "3 ", "", "0x10", "18446744073709551616"}) {
    CAPTURE(bad);
    rewrite_metadata(path, "step", bad.empty() ? "x" : bad);
    CHECK_THROWS_WITH_AS(io::read_checkpoint(path, m), doctest::Contains("metadata 'step' is"), UserError);
  }
  std::filesystem::remove(path);
}

}  // namespace io_checkpoint_test
