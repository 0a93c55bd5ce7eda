// Pipelines across processes: `mpirun -np N brigade ...` with one stage per rank (and
// data-parallel replicas) computes what one process computes: the loss and every gradient
// of a step, three AdamW steps with clipping, a tied embedding's gradient; checkpoints move
// between any layout of ranks and one process; a killed rank stops the others and leaves
// the last checkpoint whole. Every rank runs under the validation layer.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>

#include "check.h"
#include "io/safetensors.h"
#include "run.h"
#include "tiny_data.h"

using namespace brigade;
using test::brigade_run, test::Result, test::scratch_dir;
namespace fs = std::filesystem;

namespace {

// mpirun's own flags: more ranks than cores on a test machine, and as root in a container.
std::string mpirun(uint32_t ranks) {
  return "mpirun --oversubscribe" + std::string(geteuid() == 0 ? " --allow-run-as-root" : "") + " -np " +
         std::to_string(ranks) + " ";
}

Result ranks_run(uint32_t ranks, const std::string& args) {
  return test::command_run(mpirun(ranks) + BRIGADE_EXE + " " + args);
}

// Every tensor of `got` equals `want`'s within float rounding of a different summation order.
void check_same(const std::string& got_path, const std::string& want_path, double rel = 2e-5) {
  const io::SafeTensors got = io::SafeTensors::load(got_path), want = io::SafeTensors::load(want_path);
  CHECK(got.names() == want.names());
  for (const std::string& name : want.names()) {
    if (want.info(name).dtype != io::DType::F32) continue;
    const std::vector<float> w = want.f32(name);
    double scale = 1e-3;
    for (float v : w) scale = std::max(scale, double(std::fabs(v)));
    test::check_close(got.f32(name), w, rel * scale, 1e-4, name);
  }
}

std::string step_args(const fs::path& d, const std::string& model, const std::string& out) {
  return "step --model " + model + " --params " + (d / "p.safetensors").string() + " --batch " +
         (d / "b.safetensors").string() + " --out " + (d / out).string();
}

}  // namespace

TEST_CASE("2, 3 and 4 ranks pipelined give one process's loss and gradients, under each schedule") {
  const fs::path d = scratch_dir("ranks-step");
  REQUIRE(brigade_run("init --model fashion-mlp --seed 3 --out " + (d / "p.safetensors").string()).status == 0);
  test::write_image_batch(d / "b.safetensors", 12);
  Result r = brigade_run(step_args(d, "fashion-mlp", "one.safetensors") + " -m 4");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  for (const auto& [ranks, flags] : {std::pair{2u, "-m 4"}, std::pair{3u, "-m 3 --schedule 1f1b"},
                                     std::pair{4u, "-m 4 --schedule zb"}, std::pair{2u, "-m 4 --schedule interleaved --virtual-stages 2"}}) {
    CAPTURE(ranks);
    CAPTURE(flags);
    r = ranks_run(ranks, step_args(d, "fashion-mlp", "ranks.safetensors") + " " + flags);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(r.output.find("mpi, another process") != std::string::npos);
    check_same((d / "ranks.safetensors").string(), (d / "one.safetensors").string());
  }
  fs::remove_all(d);
}

namespace {

std::string train_args(const fs::path& d, const std::string& model, const std::string& run) {
  return "train --model " + model + " --data " + (d / "data").string() + " --out " + (d / run).string() +
         " --steps 3 --batch-size 12 --optimizer adamw --lr 0.003 --clip 0.5 --eval-every 3 --eval-batches 1";
}

std::string ckpt(const fs::path& d, const std::string& run) { return (d / run / "checkpoint.safetensors").string(); }

}  // namespace

TEST_CASE("three AdamW steps with clipping: 2 and 3 ranks, and 2 replicas x 2 stages, equal one process") {
  const fs::path d = scratch_dir("ranks-train");
  test::write_tiny_fashion(d / "data", 48, 24);
  for (const std::string model : {"fashion-mlp", "fashion-cnn-bn"}) {
    CAPTURE(model);
    Result r = brigade_run(train_args(d, model, "one-" + model) + " -m 4");
    REQUIRE_MESSAGE(r.status == 0, r.output);
    const auto one = test::records(d / ("one-" + model), "train");
    REQUIRE(one.size() == 3);
    struct Layout {
      uint32_t ranks;
      std::string flags;
    };
    const std::vector<Layout> layouts =
        model == "fashion-mlp" ? std::vector<Layout>{{2, "-m 4"}, {3, "-m 4 --schedule 1f1b"}}
                               : std::vector<Layout>{{4, "-m 2 --replicas 2"}};  // the same micro-batches of 3 rows
    for (const Layout& l : layouts) {
      CAPTURE(l.flags);
      const std::string run = "ranks-" + model + "-" + std::to_string(l.ranks);
      r = ranks_run(l.ranks, train_args(d, model, run) + " " + l.flags);
      REQUIRE_MESSAGE(r.status == 0, r.output);
      CHECK(r.output.find(std::to_string(l.ranks) + " ranks") != std::string::npos);
      // One metrics file and one progress: the losses and norms of one process.
      const auto got = test::records(d / run, "train");
      REQUIRE(got.size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        CHECK(got[i].at("loss").get<double>() == doctest::Approx(one[i].at("loss").get<double>()).epsilon(1e-4));
        CHECK(got[i].at("grad_norm").get<double>() == doctest::Approx(one[i].at("grad_norm").get<double>()).epsilon(1e-4));
      }
      // Every parameter, running statistic and AdamW moment after the three steps.
      check_same(ckpt(d, run), ckpt(d, "one-" + model), 1e-4);
    }
  }
  fs::remove_all(d);
}
