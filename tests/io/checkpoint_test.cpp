// Checkpoints: what goes in comes back, PyTorch's num_batches_tracked is there, and what is
// not a checkpoint is refused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "io/tensors.h"
#include "util/error.h"

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
