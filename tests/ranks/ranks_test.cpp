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
#include <regex>
#include <string>
#include <thread>

#include "check.h"
#include "io/safetensors.h"
#include "rank_process.h"
#include "run.h"
#include "tiny_data.h"

namespace ranks_ranks_test {

using namespace brigade;
using test::brigade_run, test::mpirun, test::Result, test::scratch_dir;
namespace fs = std::filesystem;

namespace {

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
  for (const auto& run : {std::pair{2u, "-m 4"}, std::pair{3u, "-m 3 --schedule 1f1b"},
                          std::pair{4u, "-m 4 --schedule zb"}, std::pair{2u, "-m 4 --schedule interleaved --virtual-stages 2"}}) {
    const auto& [ranks, flags] = run;
    CAPTURE(run.first);
    CAPTURE(run.second);
    r = ranks_run(ranks, step_args(d, "fashion-mlp", "ranks.safetensors") + " " + flags);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(r.output.find("mpi, another process") != std::string::npos);
    check_same((d / "ranks.safetensors").string(), (d / "one.safetensors").string());
  }
  // Stages storing 16 bits (fp16 under loss scaling beside bf16): the boundaries cross between
  // the ranks in 16 bits, and the gradients are one process's with the same stages.
  for (const char* precision : {"bf16", "fp16,bf16"}) {
    CAPTURE(precision);
    const std::string flags = std::string(" -m 4 --precision ") + precision;
    r = brigade_run(step_args(d, "fashion-mlp", "one16.safetensors") + flags + " --devices 0,0");
    REQUIRE_MESSAGE(r.status == 0, r.output);
    r = ranks_run(2, step_args(d, "fashion-mlp", "ranks16.safetensors") + flags);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    check_same((d / "ranks16.safetensors").string(), (d / "one16.safetensors").string());
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

TEST_CASE("three AdamW steps with clipping: 2 and 4 ranks, and 2 replicas x 2 stages, equal one process") {
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
        model == "fashion-mlp" ? std::vector<Layout>{{2, "-m 4"}, {4, "-m 4 --schedule 1f1b"}}
                               : std::vector<Layout>{{4, "-m 2 --replicas 2"}};  // the same micro-batches of 3 rows
    for (const Layout& l : layouts) {
      CAPTURE(l.flags);
      const std::string run = "ranks-" + model + "-" + std::to_string(l.ranks);
      r = ranks_run(l.ranks, train_args(d, model, run) + " " + l.flags);
      REQUIRE_MESSAGE(r.status == 0, r.output);
      CHECK(r.output.find(std::to_string(l.ranks) + " ranks") != std::string::npos);
      // The progress shows every stage's busy share, each rank's gathered on rank 0.
      const uint32_t stages = l.flags.find("--replicas 2") == std::string::npos ? l.ranks : l.ranks / 2;
      std::string busy = "busy( [0-9]+%){" + std::to_string(stages) + "}\n";
      CHECK_MESSAGE(std::regex_search(r.output, std::regex(busy)), "no line ending in ", busy);
      // One metrics file and one progress: the losses and norms of one process.
      const auto got = test::records(d / run, "train");
      REQUIRE(got.size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        CHECK(got[i].at("loss").get<double>() == doctest::Approx(one[i].at("loss").get<double>()).epsilon(1e-4));
        CHECK(got[i].at("grad_norm").get<double>() == doctest::Approx(one[i].at("grad_norm").get<double>()).epsilon(1e-4));
      }
      // Every parameter, running statistic and AdamW moment after the three steps. Replicas add
      // the gradient in another order than one process (each replica's micro-batches, then the
      // replicas' sums), and three AdamW steps carry that rounding on: within 2e-4 of each
      // tensor's largest value (at least 1e-3), 1e-3 for fashion-cnn-bn, whose gradients are sums
      // of terms that nearly cancel: under Winograd's F(4x4) convolution one element of its
      // Linear was 1.4e-4 off, and with the input gradient as the forward's transpose (another
      // rounding order of the same sums) AdamW moments of its convolutions 6e-4 off.
      check_same(ckpt(d, run), ckpt(d, "one-" + model), model == "fashion-cnn-bn" ? 1e-3 : 2e-4);
    }
  }
  fs::remove_all(d);
}

namespace {

// A small gpt-mini (its embedding tied to its head) initialized from `seed` in d, and a batch
// of `rows` windows of 16 tokens; returns the --model argument.
std::string tiny_gpt(const fs::path& d, uint32_t seed, uint32_t rows) {
  const std::string model = "gpt-mini --set n_layer=2 --set n_head=2 --set n_embd=32 --set block_size=16";
  REQUIRE(brigade_run("init --model " + model + " --seed " + std::to_string(seed) + " --out " +
                      (d / "p.safetensors").string()).status == 0);
  const uint32_t T = 16;
  std::vector<int32_t> tokens(rows * T), targets(rows * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 37 % 65), targets[i] = int32_t(i * 11 % 65);
  io::SafeTensorsWriter w;
  w.add("input", {rows, T}, std::span<const int32_t>(tokens));
  w.add("target", {rows, T}, std::span<const int32_t>(targets));
  w.write((d / "b.safetensors").string());
  return model;
}

}  // namespace

TEST_CASE("gpt-mini's tied embedding across ranks: the first and last stages' gradients summed, as in one process") {
  const fs::path d = scratch_dir("ranks-gpt");
  const std::string model = tiny_gpt(d, 2, 4);
  Result r = brigade_run(step_args(d, model, "one.safetensors") + " -m 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = ranks_run(2, step_args(d, model, "ranks.safetensors") + " -m 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  check_same((d / "ranks.safetensors").string(), (d / "one.safetensors").string());
  fs::remove_all(d);
}

TEST_CASE("replicas summing their gradients in buckets during the backward give the bits of one sum after it") {
  const fs::path d = scratch_dir("ranks-buckets");
  // gpt-mini's embedding is tied to its head: within one stage its gradient is complete only
  // after the last layer's backward.
  const std::string model = tiny_gpt(d, 4, 8);
  // Pieces of the backward in rank 0's trace: "B0" once per submission.
  auto pieces = [&](const std::string& trace) {
    const nlohmann::json j = nlohmann::json::parse(test::slurp(trace));
    int n = 0;
    for (const auto& e : j.at("traceEvents")) n += e.value("name", "") == "B0" && e.value("pid", 0) == 1;
    return n;
  };
  for (const auto& run : {std::pair{2u, " -m 1 --replicas 2"}, std::pair{4u, " -m 2 --replicas 2"}}) {
    const auto& [ranks, flags] = run;
    CAPTURE(run.second);
    const std::string after = (d / "after.safetensors").string();
    Result r = ranks_run(ranks, step_args(d, model, "after.safetensors") + flags + " --bucket-size 0 --trace " +
                                    (d / "after.json").string());
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(pieces((d / "after.json").string()) == 1);
    for (const char* size : {"1KiB", "64KiB"}) {
      CAPTURE(size);
      r = ranks_run(ranks, step_args(d, model, "buckets.safetensors") + flags + " --bucket-size " + size +
                               " --trace " + (d / "buckets.json").string());
      REQUIRE_MESSAGE(r.status == 0, r.output);
      CHECK(test::slurp((d / "buckets.safetensors").string()) == test::slurp(after));
      // Cut at least once: after the bucket that ends at the cell's first layer.
      CHECK(pieces((d / "buckets.json").string()) > 1);
    }
  }
  fs::remove_all(d);
}

TEST_CASE("a 4-rank checkpoint resumes in one process, and a one-process checkpoint under 2 replicas, as one run would") {
  const fs::path d = scratch_dir("ranks-resume");
  test::write_tiny_fashion(d / "data", 48, 24);
  const std::string common = "--data " + (d / "data").string() +
                             " --steps 4 --batch-size 12 --lr 0.003 --eval-every 2 --eval-batches 1";
  Result r = brigade_run("train --model fashion-mlp " + common + " -m 4 --out " + (d / "whole").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  // Two steps on 4 ranks, two in one process.
  r = ranks_run(4, "train --model fashion-mlp " + common + " -m 4 --stop-after 2 --out " + (d / "a").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = brigade_run("train --resume -m 4 --out " + (d / "a").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  check_same(ckpt(d, "a"), ckpt(d, "whole"), 1e-4);
  // Two in one process, two on 2 replicas of 1 stage.
  r = brigade_run("train --model fashion-mlp " + common + " -m 4 --stop-after 2 --out " + (d / "b").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = ranks_run(2, "train --resume -m 2 --replicas 2 --out " + (d / "b").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  check_same(ckpt(d, "b"), ckpt(d, "whole"), 1e-4);
  CHECK(test::records(d / "b", "train").size() == 4);  // one metrics file, nothing twice
  fs::remove_all(d);
}

TEST_CASE("ranks started with different flags, and commands that do not run across ranks, are refused in one line") {
  const fs::path d = scratch_dir("ranks-disagree");
  test::write_tiny_fashion(d / "data", 24, 12);
  const std::string args = BRIGADE_EXE + std::string(" train --model fashion-mlp --data ") + (d / "data").string() +
                           " --steps 1 --batch-size 12 --out " + (d / "run").string();
  // An MPMD launch: rank 1 gets another learning rate.
  Result r = test::command_run(mpirun(1) + args + " --lr 0.01 : -np 1 " + args + " --lr 0.02");
  CHECK(r.status == 2);
  CHECK(r.output.find("brigade: error: the ranks disagree: rank 1 has the command line") != std::string::npos);
  CHECK(r.output.find("--lr 0.02', rank 0 has") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "run"));
  r = ranks_run(2, "plan --model fashion-mlp");
  CHECK(r.status == 2);
  CHECK(r.output.find("brigade: error: under mpirun brigade runs train, step, eval or bench planner, not 'plan'") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("a refusal every rank meets alike is said once with no abort, and a failure on one rank only aborts naming it") {
  const fs::path d = scratch_dir("ranks-once");
  REQUIRE(brigade_run("init --model fashion-mlp --seed 3 --out " + (d / "p.safetensors").string()).status == 0);
  test::write_image_batch(d / "b.safetensors", 12);
  auto times = [](const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  // A flag every rank refuses, and a file no rank has.
  Result r = ranks_run(3, step_args(d, "fashion-mlp", "g.safetensors") + " --replicas 2");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(times(r.output, "brigade: error: --replicas 2 does not divide the 3 ranks into pipelines of equal length\n") == 1);
  CHECK(times(r.output, "does not divide") == 1);
  CHECK(r.output.find("MPI_ABORT") == std::string::npos);
  r = ranks_run(2, "step --model fashion-mlp --params " + (d / "p.safetensors").string() + " --batch " +
                       (d / "missing.safetensors").string() + " --out " + (d / "g.safetensors").string());
  CHECK(r.status == 2);
  CHECK(times(r.output, "missing.safetensors: cannot open") == 1);
  CHECK(r.output.find("MPI_ABORT") == std::string::npos);
  // A boundary path that only shares memory within a process: every boundary here is MPI's.
  r = ranks_run(2, step_args(d, "fashion-mlp", "g.safetensors") + " --link fd");
  CHECK(r.status == 2);
  CHECK(times(r.output, "brigade: error: --link fd: cells 0 and 1 run in different processes, whose boundaries "
                        "travel as MPI messages; use --link auto\n") == 1);
  // mpirun -q leaves the one line alone.
  r = test::command_run("mpirun -q " + mpirun(2).substr(7) + BRIGADE_EXE + " " + step_args(d, "fashion-mlp", "g.safetensors") +
                        " --replicas 3");
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: --replicas 3 does not divide the 2 ranks into pipelines of equal length\n");
  // A replica's share of the 12 samples short of a sample a micro-batch: refused before any work.
  r = test::command_run("mpirun -q " + mpirun(2).substr(7) + BRIGADE_EXE + " " + step_args(d, "fashion-mlp", "g.safetensors") +
                        " --replicas 2 -m 7");
  CHECK(r.status == 2);
  CHECK(times(r.output, "brigade: error: --micro-batches 7 is more than the 6 samples of replica 1's share of the "
                        "mini-batch of 12 (--replicas 2)\n") == 1);
  // A device lost on stage 1's rank only: that rank names itself and stops the job.
  r = test::command_run(mpirun(2) + "-x BRIGADE_FAULT='device-lost:stage 1:2' " + BRIGADE_EXE + " " +
                        step_args(d, "fashion-mlp", "g.safetensors") + " -m 4");
  // (mpirun's own abort banner is printed only some of the time: its help messages race.)
  CHECK(r.status == 3);  // MPI_Abort's code: a Vulkan failure
  CHECK(r.output.find("brigade: rank 1 of 2 (") != std::string::npos);
  CHECK(r.output.find("stage 1): Vulkan failure: ") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "g.safetensors"));
  fs::remove_all(d);
}

TEST_CASE("a step gone non-finite under 2 ranks stops every rank, with no record of it and the checkpoint untouched") {
  const fs::path d = scratch_dir("ranks-non-finite");
  test::write_tiny_fashion(d / "data", 320, 64);
  const std::string run = (d / "run").string();
  // SGD at a learning rate of 1e12: the first step is finite, the second is not. Stage 1's
  // rank names it; stage 0's, which cannot, stops too rather than write the step's record
  // and go on to the next (no evaluation after step 2 to stop it sooner).
  const std::string args = "train --model fashion-mlp --data " + (d / "data").string() +
                           " --optimizer sgd --lr 1e12 --steps 6 -b 16 --eval-every 4 --eval-batches 1 --out " + run;
  Result r = ranks_run(2, args + " --stop-after 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string before = test::slurp(d / "run" / "checkpoint.safetensors");
  r = ranks_run(2, "train --resume --out " + run);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("brigade: rank 1 of 2 (") != std::string::npos);
  CHECK(r.output.find("error: step 2: the gradient of ") != std::string::npos);
  CHECK(r.output.find("brigade: rank 0 of 2 (") != std::string::npos);
  CHECK(r.output.find("error: step 2: stage 1 found a value that is not finite, and its rank names it") !=
        std::string::npos);
  CHECK(test::slurp(d / "run" / "checkpoint.safetensors") == before);
  CHECK(test::records(run, "train").size() == 1);
  fs::remove_all(d);
}

TEST_CASE("kill -9 of one rank stops every rank within seconds, and the last checkpoint resumes") {
  const fs::path d = scratch_dir("ranks-kill");
  test::write_tiny_fashion(d / "data", 480, 24);
  const fs::path run = d / "run", log = d / "log";
  const std::string cmd = mpirun(2) + BRIGADE_EXE + " train --model fashion-mlp --data " + (d / "data").string() +
                          " --steps 400 --batch-size 12 -m 2 --eval-every 5 --eval-batches 1 --out " + run.string();
  const pid_t pid = test::command_spawn(cmd, log);
  const test::KillOnExit reap{pid};
  // Once a checkpoint has landed, kill the rank running stage 1.
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(run / "checkpoint.safetensors") && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(run / "checkpoint.safetensors"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(kill(test::rank_pid(1, "train --model fashion-mlp --data " + (d / "data").string()), SIGKILL) == 0);
  const std::optional<test::Exit> exit = test::wait_exit(pid, 20);
  REQUIRE(exit);
  const int status = exit->status;
  INFO(test::slurp(log));
  CHECK(exit->seconds < 10);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(test::slurp(log).find("exited on signal 9") != std::string::npos);  // mpirun names the rank and host
  // The checkpoint is whole: one process resumes it.
  const Result r = brigade_run("train --resume --stop-after 1 --out " + run.string());
  CHECK_MESSAGE(r.status == 0, r.output);
  fs::remove_all(d);
}

TEST_CASE("SIGINT to mpirun: every rank stops after the same step and rank 0 writes its checkpoint") {
  const fs::path d = scratch_dir("ranks-sigint");
  test::write_tiny_fashion(d / "data", 480, 24);
  const fs::path run = d / "run", log = d / "log";
  // On SIGINT mpirun waits this many seconds, sends SIGTERM to every rank, waits as long
  // again and sends SIGKILL (OpenMPI 4's default is 1 s). The run is far longer than that
  // wait (400 steps once ended within it on a fast machine, and nothing was stopped).
  const std::string cmd = mpirun(2) + "--mca odls_base_sigkill_timeout 3 " + BRIGADE_EXE +
                          " train --model fashion-mlp --data " + (d / "data").string() +
                          " --steps 100000 --batch-size 12 -m 2 --eval-every 100000 --eval-batches 1 --out " + run.string();
  const pid_t pid = test::command_spawn(cmd, log);
  const test::KillOnExit reap{pid};
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(60) &&
         (!fs::exists(run / "metrics.jsonl") || test::records(run, "train").size() < 3))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(test::records(run, "train").size() >= 3);
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  const std::string out = test::slurp(log);
  INFO(out);
  const auto steps = test::records(run, "train");
  const uint64_t last = steps.back().at("step");
  CHECK(out.find("stopped by signal 15 after step " + std::to_string(last) + "; checkpoint written") != std::string::npos);
  const io::SafeTensors c = io::SafeTensors::load((run / "checkpoint.safetensors").string());
  CHECK(c.metadata().at("step") == std::to_string(last));
  const Result r = brigade_run("train --resume --stop-after 1 --out " + run.string());
  CHECK_MESSAGE(r.status == 0, r.output);
  fs::remove_all(d);
}

TEST_CASE("--plan auto under 2 ranks: each rank profiles its own device, every rank reaches the same plan, and it trains") {
  const fs::path d = scratch_dir("ranks-plan-auto");
  test::write_tiny_fashion(d / "data", 48, 24);
  const Result r = test::command_run("BRIGADE_CACHE_DIR=" + (d / "cache").string() + " " + mpirun(2) + BRIGADE_EXE +
                                     " train --model fashion-mlp --plan auto --data " + (d / "data").string() +
                                     " --steps 2 --batch-size 8 --eval-every 2 --eval-batches 1 --out " + (d / "run").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  // The ranks' plans are compared (a disagreement is refused); the devices are the ranks'.
  CHECK(r.output.find("plan auto: ") != std::string::npos);
  const std::vector<nlohmann::json> plans = test::records(d / "run", "plan");
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].at("flags").at("balance").get<std::string>().find(',') != std::string::npos);  // one cell per rank
  CHECK(test::records(d / "run", "train").size() == 2);
  fs::remove_all(d);
}

TEST_CASE("bench planner under 2 ranks opens one configuration's pipeline after another, nothing of the last left behind") {
  const fs::path d = scratch_dir("ranks-bench-planner");
  const Result r = test::command_run("BRIGADE_CACHE_DIR=" + (d / "cache").string() + " " + mpirun(2) + BRIGADE_EXE +
                                     " bench planner --model fashion-mlp -b 8 --grid 3 --rounds 2 --within 10");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("3 of the ") != std::string::npos);  // three pipelines, one after another
  CHECK(r.output.find("one configuration after another (ranks)") != std::string::npos);
  CHECK(r.output.find("choice: ") != std::string::npos);
  fs::remove_all(d);
}

}  // namespace ranks_ranks_test
