// brigade train, eval and sample end to end on small data: a real run through two stages,
// its metrics, checkpoint and plots; a stopped run resumed reproduces the uninterrupted one;
// SIGINT stops at a step boundary with a checkpoint; bad requests are refused in one line.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/tensors.h"
#include "model/model.h"
#include "run.h"
#include "tiny_data.h"

namespace cli_train_test {

using namespace brigade;
namespace fs = std::filesystem;

namespace {

const char* kTinyGpt = "--model gpt-mini --set n_layer=1 --set n_head=2 --set n_embd=32 --set block_size=16";

std::string corpus() {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  return text;
}

// A fashion-mlp run of 2 steps on tiny data in a scratch folder of `name`, stopped after
// step 1 or not, and its checkpoint read back.
struct SavedRun {
  fs::path dir, run;
  std::string path;  // the checkpoint
  model::Model m;
  io::Checkpoint saved;
};
SavedRun saved_run(const std::string& name, bool stopped) {
  SavedRun s;
  s.dir = test::scratch_dir(name), s.run = s.dir / "run";
  test::write_tiny_fashion(s.dir / "data", 64, 32);
  const auto r = test::brigade_run("train --model fashion-mlp --data " + (s.dir / "data").string() +
                                   " --steps 2 -b 16 --eval-every 2 --eval-batches 1" + (stopped ? " --stop-after 1" : "") +
                                   " --out " + s.run.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  s.path = (s.run / "checkpoint.safetensors").string();
  const nlohmann::json config = nlohmann::json::parse(io::checkpoint_config(s.path));
  s.m = model::build_from_toml(config.at("model_toml").get<std::string>(), s.path);
  s.saved = io::read_checkpoint(s.path, s.m);
  return s;
}

}  // namespace

TEST_CASE("brigade train, eval and plot: two stages on small image data") {
  const fs::path dir = test::scratch_dir("train");
  test::write_tiny_fashion(dir / "data", 320, 64);
  const std::string run = (dir / "run").string();
  const auto r = test::brigade_run("train --model fashion-mlp --data " + (dir / "data").string() +
                                   " --steps 20 -b 16 --lr 0.003 --eval-every 10 --devices 0,0 -m 2 --out " + run);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("final test accuracy") != std::string::npos);
  CHECK(test::records(run, "train").size() == 20);
  const auto evals = test::records(run, "eval");
  REQUIRE(evals.size() == 3);  // before training, at step 10 and at step 20
  CHECK(evals[0]["step"] == 0);
  CHECK(evals[2]["step"] == 20);
  // The pattern is learnable: accuracy rises from chance.
  CHECK(evals[2]["accuracy"].get<double>() > 0.5);
  CHECK(evals[2]["loss"].get<double>() < evals[0]["loss"].get<double>());
  CHECK(fs::exists(dir / "run" / "checkpoint.safetensors"));
  CHECK(fs::exists(dir / "run" / "loss.svg"));
  CHECK(fs::exists(dir / "run" / "accuracy.svg"));
  const auto ckpt = io::SafeTensors::load((dir / "run" / "checkpoint.safetensors").string());
  CHECK(ckpt.metadata().at("step") == "20");
  CHECK(ckpt.has("optimizer.1.weight.exp_avg_sq"));

  // eval of the checkpoint, on one stage, gives the run's last evaluation.
  const auto e = test::brigade_run("eval " + run + " --data " + (dir / "data").string() + " -b 16");
  INFO(e.output);
  REQUIRE(e.status == 0);
  char expected[64];
  std::snprintf(expected, sizeof expected, "accuracy %.4f", evals[2]["accuracy"].get<double>());
  CHECK(e.output.find(expected) != std::string::npos);

  // A finished run is not trained twice, and a run folder is not overwritten.
  CHECK(test::brigade_run("train --out " + run + " --resume").status != 0);
  const auto again = test::brigade_run("train --model fashion-mlp --steps 2 --out " + run);
  CHECK(again.status != 0);
  CHECK(again.output.find("--resume") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a run stopped and resumed reproduces the uninterrupted run bit for bit") {
  const fs::path dir = test::scratch_dir("resume");
  test::write_text(dir / "text.txt", corpus());
  const std::string common = std::string("train ") + kTinyGpt + " --data " + (dir / "text.txt").string() +
                             " --steps 8 -b 4 --eval-every 4 --eval-batches 2 --devices 0,0 -m 2";
  REQUIRE(test::brigade_run(common + " --out " + (dir / "a").string()).status == 0);
  const auto stopped = test::brigade_run(common + " --stop-after 3 --out " + (dir / "b").string());
  INFO(stopped.output);
  REQUIRE(stopped.status == 0);
  CHECK(test::records(dir / "b", "train").size() == 3);
  // A resumed run keeps its settings.
  const auto changed = test::brigade_run("train --resume --lr 0.5 --out " + (dir / "b").string());
  CHECK(changed.status != 0);
  CHECK(changed.output.find("--lr") != std::string::npos);
  const auto resumed = test::brigade_run("train --resume --devices 0,0 -m 2 --out " + (dir / "b").string());
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  const auto a = test::records(dir / "a", "train"), b = test::records(dir / "b", "train");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i]["loss"] == b[i]["loss"], "step ", i + 1);
  const auto ea = test::records(dir / "a", "eval"), eb = test::records(dir / "b", "eval");
  REQUIRE(ea.size() == eb.size());
  for (size_t i = 0; i < ea.size(); ++i) CHECK(ea[i]["loss"] == eb[i]["loss"]);
  CHECK(test::slurp(dir / "a" / "checkpoint.safetensors") == test::slurp(dir / "b" / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

// BatchNorm's statistics are each micro-batch's: a resumed run keeps the micro-batches it
// trained in, whatever else of the pipeline changes (here two stages to one), and ends on the
// uninterrupted run's checkpoint, byte for byte.
TEST_CASE("a BatchNorm run resumed without its pipeline flags keeps its micro-batches and ends as the uninterrupted one") {
  const fs::path dir = test::scratch_dir("resume-bn");
  test::write_tiny_fashion(dir / "data", 64, 16);
  const std::string common = "train --model fashion-cnn-bn --data " + (dir / "data").string() +
                             " --steps 4 -b 8 --eval-every 2 --eval-batches 1 --devices 0,0 -m 2";
  REQUIRE(test::brigade_run(common + " --out " + (dir / "a").string()).status == 0);
  REQUIRE(test::brigade_run(common + " --stop-after 2 --out " + (dir / "b").string()).status == 0);
  const auto resumed = test::brigade_run("train --resume --out " + (dir / "b").string());
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("the run trained in 2 micro-batches, on which fashion-cnn-bn's BatchNorm statistics "
                            "depend: kept (--micro-batches to change them)") != std::string::npos);
  CHECK(resumed.output.find("on 1 stage(s), 2 micro-batches") != std::string::npos);
  const auto a = test::records(dir / "a", "train"), b = test::records(dir / "b", "train");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i]["loss"] == b[i]["loss"], "step ", i + 1);
  CHECK(test::slurp(dir / "a" / "checkpoint.safetensors") == test::slurp(dir / "b" / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("fp16 under loss scaling: a run stopped mid-growth resumes with its loss scale and ends as the uninterrupted one") {
  const fs::path dir = test::scratch_dir("resume-fp16");
  test::write_text(dir / "text.txt", corpus());
  const std::string common = std::string("train ") + kTinyGpt + " --data " + (dir / "text.txt").string() +
                             " --steps 6 -b 4 --eval-every 3 --eval-batches 2 --devices 0,0 -m 2 --precision fp16";
  const auto whole = test::brigade_run(common + " --out " + (dir / "a").string());
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  CHECK(whole.output.find("precision fp16") != std::string::npos);
  CHECK(whole.output.find("fp16 loss scale 65536 at the end; 0 step(s) skipped for overflowing it\n") != std::string::npos);
  REQUIRE(test::brigade_run(common + " --stop-after 3 --out " + (dir / "b").string()).status == 0);
  const io::SafeTensors stopped = io::SafeTensors::load((dir / "b" / "checkpoint.safetensors").string());
  const auto scale = nlohmann::json::parse(stopped.metadata().at("loss_scale"));
  CHECK(scale["scale"] == 65536.0);
  CHECK(scale["good_steps"] == 3);  // three good steps into the 2000 before the scale doubles
  CHECK(scale["skipped_steps"] == 0);
  const auto resumed = test::brigade_run("train --resume --devices 0,0 -m 2 --precision fp16 --out " + (dir / "b").string());
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  const auto a = test::records(dir / "a", "train"), b = test::records(dir / "b", "train");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK_MESSAGE(a[i]["loss"] == b[i]["loss"], "step ", i + 1);
    CHECK(a[i]["loss_scale"] == 65536.0);
  }
  CHECK(test::slurp(dir / "a" / "checkpoint.safetensors") == test::slurp(dir / "b" / "checkpoint.safetensors"));
  const io::SafeTensors end = io::SafeTensors::load((dir / "a" / "checkpoint.safetensors").string());
  CHECK(nlohmann::json::parse(end.metadata().at("loss_scale"))["good_steps"] == 6);
  // Resumed without --precision, the run keeps the precision it trained in (not the default
  // fp32, which would change its numbers and drop its loss scale).
  REQUIRE(test::brigade_run(common + " --stop-after 3 --out " + (dir / "c").string()).status == 0);
  const auto kept = test::brigade_run("train --resume --devices 0,0 -m 2 --out " + (dir / "c").string());
  INFO(kept.output);
  REQUIRE(kept.status == 0);
  CHECK(kept.output.find("precision fp16") != std::string::npos);
  const auto c = test::records(dir / "c", "train");
  REQUIRE(c.size() == 6);
  for (size_t i = 0; i < c.size(); ++i) CHECK_MESSAGE(a[i]["loss"] == c[i]["loss"], "step ", i + 1);
  CHECK(test::slurp(dir / "a" / "checkpoint.safetensors") == test::slurp(dir / "c" / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("brigade sample and eval on a small GPT: deterministic by seed, greedy at temperature 0") {
  const fs::path dir = test::scratch_dir("sample");
  test::write_text(dir / "text.txt", corpus());
  const std::string run = (dir / "run").string();
  REQUIRE(test::brigade_run(std::string("train ") + kTinyGpt + " --data " + (dir / "text.txt").string() +
                            " --steps 30 -b 8 --lr 0.01 --eval-every 30 --eval-batches 2 --out " + run)
              .status == 0);
  const auto greedy = test::brigade_run("sample " + run + " --prompt 'the quick' --length 24 --temperature 0");
  INFO(greedy.output);
  REQUIRE(greedy.status == 0);
  CHECK(greedy.output.rfind("the quick", 0) == 0);
  CHECK(greedy.output.size() == 9 + 24 + 1);
  CHECK(test::brigade_run("sample " + run + " --prompt 'the quick' --length 24 --temperature 0 --devices 0,0")
            .output == greedy.output);  // two stages give the same text
  const auto s1 = test::brigade_run("sample " + run + " --length 40 --seed 1");
  const auto s2 = test::brigade_run("sample " + run + " --length 40 --seed 1");
  const auto s3 = test::brigade_run("sample " + run + " --length 40 --seed 2");
  CHECK(s1.output == s2.output);
  CHECK(s1.output != s3.output);
  const auto e = test::brigade_run("eval " + run + " --data " + (dir / "text.txt").string());
  INFO(e.output);
  CHECK(e.status == 0);
  CHECK(e.output.find("val loss") != std::string::npos);
  CHECK(e.output.find("windows of 16 tokens") != std::string::npos);
  const auto e8 = test::brigade_run("eval " + run + " --window 8 --data " + (dir / "text.txt").string());
  INFO(e8.output);
  CHECK(e8.status == 0);
  CHECK(e8.output.find("windows of 8 tokens") != std::string::npos);
  CHECK(e8.output != e.output);
  CHECK(test::brigade_run("eval " + run + " --window 17").output.find("windows of 1 to 16 tokens") !=
        std::string::npos);
  for (const char* t : {"-1", "nan", "inf"}) {
    const auto r = test::brigade_run("sample " + run + " --length 4 --temperature " + t);
    CHECK(r.status == 2);
    CHECK(r.output.find("--temperature must be a finite number, 0 (greedy) or more") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("SIGINT and SIGTERM stop training at a step boundary with a checkpoint, and the run resumes") {
  const fs::path dir = test::scratch_dir("signal");
  test::write_text(dir / "text.txt", corpus());
  for (int sig : {SIGINT, SIGTERM}) {
    const fs::path run = dir / ("run" + std::to_string(sig)), log = dir / ("log" + std::to_string(sig));
    const pid_t pid = test::brigade_spawn(std::string("train ") + kTinyGpt + " --data " + (dir / "text.txt").string() +
                                              " --steps 100000 -b 4 --eval-every 100000 --eval-batches 1 --out " +
                                              run.string(),
                                          log);
    const test::KillOnExit reap{pid};
    for (int i = 0; i < 600 && test::records(run, "train").size() < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(test::records(run, "train").size() >= 3);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    INFO("signal ", sig, ": ", test::slurp(log));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(test::slurp(log).find("--resume") != std::string::npos);
    CHECK(test::slurp(log).find(test::kValidationFailure) == std::string::npos);
    const auto ckpt = io::SafeTensors::load((run / "checkpoint.safetensors").string());
    CHECK(ckpt.metadata().at("step") == std::to_string(test::records(run, "train").size()));
    CHECK_FALSE(fs::exists(run / "checkpoint.safetensors.tmp"));
    // It resumes from there.
    const auto resumed = test::brigade_run("train --resume --stop-after 1 --out " + run.string());
    CHECK(resumed.status == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("sample refuses a prompt byte past the model's vocabulary, naming it") {
  const fs::path dir = test::scratch_dir("sample-vocabulary");
  const std::string params = (dir / "v16.safetensors").string(), model = std::string(kTinyGpt) + " --set vocab_size=16";
  REQUIRE(test::brigade_run("init " + model + " --out " + params).status == 0);
  const auto r = test::brigade_run("sample " + params + " " + model + " --prompt \"$(printf '\\003\\017h')\" --length 2");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: --prompt: byte 2 is 104, past gpt-mini's vocabulary of 16 tokens (0 to 15)\n");
  const auto fits = test::brigade_run("sample " + params + " " + model + " --prompt \"$(printf '\\003\\017')\" --length 2");
  CHECK(fits.status == 0);
  fs::remove_all(dir);
}

// The largest window a sample reaches is planned before anything is written: a plan that
// cannot run is one line, not a prompt followed by an error.
TEST_CASE("sample refuses a plan that cannot run before it writes the prompt") {
  const fs::path dir = test::scratch_dir("sample-refused");
  const std::string params = (dir / "p.safetensors").string();
  REQUIRE(test::brigade_run(std::string("init ") + kTinyGpt + " --out " + params).status == 0);
  const auto r = test::brigade_run("sample " + params + " " + kTinyGpt + " --prompt QZQZ --length 20 --mem-limit 64KiB");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.rfind("brigade: error: ", 0) == 0);
  CHECK(r.output.find("QZQZ") == std::string::npos);
  fs::remove_all(dir);
}

// eval and sample run forward passes only, and plan only what those need: no gradients,
// optimizer state or gradient buffers, one micro-batch's activations at a time. On lavapipe
// gpt-mini's eval below needs 4.9 MiB (15.1 MiB planned as training), the tiny GPT's sample
// 128.0 KiB (269.3 KiB).
TEST_CASE("eval and sample run under a cap that a training plan of theirs would pass, and a refusal names only their flags") {
  const fs::path dir = test::scratch_dir("forward-only");
  test::write_text(dir / "text.txt", corpus());
  const std::string mini = (dir / "mini.safetensors").string(), tiny = (dir / "tiny.safetensors").string();
  REQUIRE(test::brigade_run("init --model gpt-mini --out " + mini).status == 0);
  REQUIRE(test::brigade_run(std::string("init ") + kTinyGpt + " --out " + tiny).status == 0);
  const auto e = test::brigade_run("eval " + mini + " --model gpt-mini --window 32 -b 8 --limit 1 --mem-limit 8MiB --data " +
                                   (dir / "text.txt").string());
  INFO(e.output);
  CHECK(e.status == 0);
  CHECK(e.output.find("val loss") != std::string::npos);
  const auto s = test::brigade_run("sample " + tiny + " " + kTinyGpt + " --prompt QZQZ --length 20 --mem-limit 192KiB");
  INFO(s.output);
  CHECK(s.status == 0);
  CHECK(s.output.rfind("QZQZ", 0) == 0);
  // Over its cap, sample is told of what it takes: more stages. Its one sequence is no batch
  // to shrink or split, and a forward recomputes nothing.
  const auto r = test::brigade_run("sample " + tiny + " " + kTinyGpt + " --prompt QZQZ --length 20 --mem-limit 64KiB");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("over its 64.0 KiB --mem-limit") != std::string::npos);
  CHECK(r.output.find("; add stages (--devices)\n") != std::string::npos);
  for (const char* flag : {"--micro-batches", "--batch-size", "--remat", "--schedule", "gradients"})
    CHECK_MESSAGE(r.output.find(flag) == std::string::npos, flag);
  // eval is told of its batch and micro-batches, and of no re-materialization.
  const auto over = test::brigade_run("eval " + mini + " --model gpt-mini --window 32 -b 8 --limit 1 --mem-limit 2MiB --data " +
                                      (dir / "text.txt").string());
  INFO(over.output);
  CHECK(over.status == 2);
  CHECK(over.output.find("add stages (--devices), use more micro-batches (--micro-batches), or a smaller batch (--batch-size)") !=
        std::string::npos);
  CHECK(over.output.find("--remat") == std::string::npos);
  fs::remove_all(dir);
}

// `plan --forward-only` plans as eval does: eval of the same model and batch runs under a cap
// just over the total it prints (rounded to a tenth of a MiB) and is refused under one a tenth
// below it; a training plan of the same flags holds gradients and optimizer state besides.
TEST_CASE("plan --forward-only shows the plan eval runs") {
  const fs::path dir = test::scratch_dir("plan-forward-only");
  test::write_text(dir / "text.txt", corpus());
  const std::string mini = (dir / "mini.safetensors").string();
  REQUIRE(test::brigade_run("init --model gpt-mini --out " + mini).status == 0);
  const auto total_of = [](const std::string& output) {
    std::smatch m;  // stage 0's row ends in its total, no cap and "yes"
    REQUIRE_MESSAGE(std::regex_search(output, m, std::regex("\\n0 [^\\n]* ([0-9.]+) MiB +- +yes *\\n")), output);
    return std::stod(m[1]);
  };
  const auto forward = test::brigade_run("plan --model gpt-mini -b 4 --forward-only");
  INFO(forward.output);
  REQUIRE(forward.status == 0);
  CHECK(forward.output.find("forward passes only") != std::string::npos);
  const auto training = test::brigade_run("plan --model gpt-mini -b 4");
  REQUIRE(training.status == 0);
  const double mib = total_of(forward.output);
  CHECK(mib < total_of(training.output));
  auto eval = [&](double cap_mib) {
    return test::brigade_run("eval " + mini + " --model gpt-mini -b 4 --limit 1 --data " + (dir / "text.txt").string() +
                             " --mem-limit " + std::to_string(uint64_t(cap_mib * 1024)) + "KiB");
  };
  const auto fits = eval(mib + 0.06), over = eval(mib * 0.9);
  CHECK_MESSAGE(fits.status == 0, fits.output);
  CHECK_MESSAGE(over.status == 2, over.output);
  const auto remat = test::brigade_run("plan --model gpt-mini -b 4 --forward-only --remat always");
  CHECK(remat.status == 2);
  CHECK(remat.output == "brigade: error: --remat: forward passes recompute nothing; drop it with --forward-only\n");
  fs::remove_all(dir);
}

TEST_CASE("sample refuses a GPT whose vocabulary is past the 256 byte values it writes") {
  const fs::path dir = test::scratch_dir("sample-wide-vocabulary");
  const std::string params = (dir / "v257.safetensors").string(), model = std::string(kTinyGpt) + " --set vocab_size=257";
  REQUIRE(test::brigade_run("init " + model + " --out " + params).status == 0);
  const auto r = test::brigade_run("sample " + params + " " + model + " --length 2 --temperature 0");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output ==
        "brigade: error: gpt-mini: sample writes each token as a byte, so a token model needs vocab_size 256 or less (it has 257)\n");
  fs::remove_all(dir);
}

TEST_CASE("a model file without a name keeps its file's name through train --resume and eval") {
  const fs::path dir = test::scratch_dir("unnamed-model");
  test::write_text(dir / "text.txt", corpus());
  test::write_text(dir / "bytes-gpt.toml",
                   "type = \"gpt\"\nblock_size = 8\nvocab_size = 256\nn_layer = 1\nn_head = 1\nn_embd = 8\n");
  const std::string run = (dir / "run").string();
  const auto first = test::brigade_run("train --model " + (dir / "bytes-gpt.toml").string() + " --data " +
                                       (dir / "text.txt").string() + " --steps 2 --stop-after 1 -b 2 --eval-every 1" +
                                       " --eval-batches 1 --out " + run);
  INFO(first.output);
  REQUIRE(first.status == 0);
  CHECK(first.output.rfind("bytes-gpt: ", 0) == 0);
  const auto resumed = test::brigade_run("train --resume --out " + run);
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.rfind("bytes-gpt: ", 0) == 0);
  CHECK(io::SafeTensors::load(run + "/checkpoint.safetensors").metadata().at("model") == "bytes-gpt");
  CHECK(test::brigade_run("eval " + run + " --window 9").output ==
        "brigade: error: bytes-gpt takes windows of 1 to 8 tokens (its block_size), not 9\n");
  fs::remove_all(dir);
}

TEST_CASE("train, eval and sample refuse bad requests with one line") {
  const fs::path dir = test::scratch_dir("train-errors");
  const std::string out = " --out " + (dir / "run").string();
  for (const std::string& args : {
           std::string("train --resume") + out,                                  // nothing to resume
           std::string("train") + out,                                           // no model
           std::string("train --model fashion-mlp --steps 3 --epochs 1") + out,  // both lengths
           std::string("train --model fashion-mlp --optimizer adam") + out,
           std::string("train --model fashion-mlp --data /nonexistent") + out,
           std::string("eval /nonexistent/checkpoint.safetensors"),
           std::string("train --model fashion-mlp -b 0") + out,
           std::string("train --model fashion-mlp --clip -1") + out,
           std::string("train --model fashion-mlp --clip nan") + out,
           std::string("train --model fashion-mlp --seed -1") + out,
           std::string("train --model gpt-mini --data /etc") + out,               // a folder
           std::string("train --model fashion-mlp --out /proc/brigade-run"),      // cannot be created
           std::string("train --model gpt-mini --set n_embd=1048576") + out,     // past 32-bit indexing
           std::string("eval /nonexistent -b 0"),
       }) {
    const auto r = test::brigade_run(args);
    INFO(args, "\n", r.output);
    // A user error (2) or a flag CLI11 refused (100 and up): not a crash, a signal, a Vulkan
    // failure (3) or an internal error (4).
    CHECK((r.status == 2 || (r.status >= 100 && r.status < 128)));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 2);
  }
  CHECK_FALSE(fs::exists(dir / "run" / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("eval refuses parameters that are not finite, naming the tensor") {
  // A diverged run's parameters evaluate to a NaN loss; refused as --resume refuses them.
  const fs::path dir = test::scratch_dir("eval-not-finite");
  const model::Model m = model::build("fashion-mlp", {});
  const std::string path = (dir / "p.safetensors").string();
  io::initial_parameters(m, 1).write(path);
  const io::SafeTensors initial = io::SafeTensors::load(path);
  io::SafeTensorsWriter w;
  for (const model::ParamSpec& spec : m.params()) {
    std::vector<float> v = initial.f32(spec.name);
    if (spec.name == "1.weight") v[7] = NAN, v[9] = INFINITY;
    w.add(spec.name, spec.shape, v);
  }
  w.write(path);
  const auto r = test::brigade_run("eval " + path + " --model fashion-mlp");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: " + path + ": parameter '1.weight' holds 2 of its 200704 values not finite (NaN or "
                    "infinite)\n");
  fs::remove_all(dir);
}

TEST_CASE("train refuses a number out of range naming its flag and the value as given") {
  const fs::path dir = test::scratch_dir("train-numbers");
  const std::string out = " --out " + (dir / "run").string();
  // The flag, the value, and one short line: no engine setting's own name and no bound
  // written out to hundreds of digits.
  const std::pair<std::string, std::string> cases[] = {
      {"--lr 0", "--lr 0 "},
      {"--lr nan", "--lr nan "},
      {"--min-lr 5", "--min-lr 5 is not between 0 and --lr 0.001"},
      {"--steps 10 --warmup 50", "--warmup 50 is more than the schedule's --steps 10"},
      {"--beta1 1", "--beta1 1 "},
      {"--beta2 -0.5", "--beta2 -0.5 "},
      {"--eps -1", "--eps -1 "},
      {"--eps 0", "--eps 0 is not a number above 0"},  // 0/0 where a gradient is 0
      // What the optimizer or schedule chosen would not read (and a resume would refuse).
      {"--optimizer sgd --beta1 5", "--beta1: --optimizer sgd does not use it; drop the flag"},
      {"--optimizer sgd --beta2 0.5", "--beta2: --optimizer sgd does not use it; drop the flag"},
      {"--optimizer sgd --eps nan", "--eps: --optimizer sgd does not use it; drop the flag"},
      {"--momentum 0.9", "--momentum: --optimizer adamw does not use it; drop the flag"},
      {"--lr-schedule constant --warmup 5", "--warmup: --lr-schedule constant does not use it; drop the flag"},
      {"--lr-schedule constant --min-lr 5", "--min-lr: --lr-schedule constant does not use it; drop the flag"},
      {"--weight-decay -1", "--weight-decay -1 "},
      {"--optimizer sgd --momentum 3", "--momentum 3 "},
      {"-b 0", "--batch-size: 0 "},
      {"--clip -1", "--clip: -1 "},
      {"--seed -1", "--seed: -1 "},
  };
  for (const auto& c : cases) {
    const std::string &flags = c.first, &says = c.second;  // not a structured binding: INFO captures it
    const auto r = test::brigade_run("train --model fashion-mlp " + flags + out);
    INFO(flags, "\n", r.output);
    CHECK((r.status == 2 || (r.status >= 100 && r.status < 128)));
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(r.output.find('`') == std::string::npos);
    CHECK(r.output.size() < 200);
  }
  CHECK_FALSE(fs::exists(dir / "run" / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("train --resume refuses saved settings that no flag would take, naming the setting") {
  const SavedRun s = saved_run("train-saved-settings", false);
  const fs::path &dir = s.dir, &run = s.run;
  const model::Model& m = s.m;
  const io::Checkpoint& saved = s.saved;
  const nlohmann::json config = nlohmann::json::parse(io::checkpoint_config(s.path));
  test::Result r;
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> edits = {
      {"batch_size", -3, "'batch_size' is -3; expected a whole number from 1 to 4294967295"},
      {"batch_size", 0, "'batch_size' is 0; expected a whole number from 1"},
      {"batch_size", 1.5, "'batch_size' is 1.5; expected a whole number"},
      {"eval_batches", 5000000000ull, "'eval_batches' is 5000000000; expected a whole number from 0 to 4294967295"},
      {"steps", 0, "'steps' is 0; expected a whole number from 1"},
      {"decay_steps", 0, "'decay_steps' is 0; expected a whole number from 1"},
      {"eval_every", 0, "'eval_every' is 0; expected a whole number from 1"},
      {"clip", -1.0, "'clip' is -1.0; expected a finite number, 0 or more"},
      {"lr", "fast", "'lr' is \"fast\"; expected a finite number"},
      {"lr", -1.0, "'lr' is -1.0; expected a number above 0"},
      {"beta2", 1.0, "'beta2' is 1.0; expected a number from 0 up to 1 (not 1)"},
      {"eps", -1e-8, "'eps' is -1e-08; expected a finite number, 0 or more"},
      {"model_toml", 5, "'model_toml' is 5; expected a string"},
      {"optimizer", "adam", "'optimizer' is 'adam'; expected adamw or sgd"},
      {"schedule", "linear", "'schedule' is 'linear'; expected constant or cosine"},
      {"plan", 5, "'plan' is 5; expected a JSON object of pipeline flags"},
      {"plan", {{"devices", "0"}}, ""},  // incomplete: no micro_batches
      {"plan", {{"devices", "0"}, {"micro_batches", "x"}, {"schedule", "gpipe"}, {"virtual_stages", 1},
                {"remat", "never"}, {"precision", "fp32"}, {"balance", "6"}, {"mem_limit", ""}},
       "'plan.micro_batches' is \"x\"; expected a whole number from 1"},
      {"plan", {{"devices", "0"}, {"micro_batches", 1}, {"schedule", "gpipe"}, {"virtual_stages", 0},
                {"remat", "never"}, {"precision", "fp32"}, {"balance", "6"}, {"mem_limit", ""}},
       "'plan.virtual_stages' is 0; expected a whole number from 1"},
      {"plan_history", 7, "'plan_history' is 7; expected a JSON array of re-plans"},
      {"precision", "fp8", "'precision' is \"fp8\"; expected fp32, bf16, fp16 or auto, one for all stages or one per stage"},
      {"precision", "bf16,fp9", "'precision' is \"bf16,fp9\"; expected fp32, bf16, fp16 or auto"},
  };
  for (const auto& edit : edits) {
    // References, not structured bindings: doctest's messages capture them.
    const std::string& key = std::get<0>(edit);
    const nlohmann::json& value = std::get<1>(edit);
    const std::string& expected = std::get<2>(edit);
    const fs::path edited = dir / ("edited-" + key);
    fs::remove_all(edited);
    fs::copy(run, edited);
    nlohmann::json c = config;
    c[key] = value;
    io::Checkpoint ckpt = saved;
    ckpt.config = c.dump();
    const std::string edited_path = (edited / "checkpoint.safetensors").string();
    io::write_checkpoint(edited_path, m, ckpt);
    r = test::brigade_run("train --resume --out " + edited.string());
    INFO(key, " = ", value.dump(), "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find(edited_path + (expected.empty() ? ": the saved training settings are incomplete"
                                                         : ": the saved training setting " + expected)) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 1);
    CHECK(r.output.find("json.exception") == std::string::npos);
  }
  fs::remove_all(dir);
}

// A finished run trains further to a later --steps (or --epochs): its first steps' records and
// learning rates stay as they were, its cosine decays over the steps it started with and the
// steps past them take min_lr; a total it has reached is refused, and a finished run resumed
// without one says how to go on. A checkpoint written before decay_steps was kept decays
// over its steps.
TEST_CASE("train --resume --steps extends a finished run, its schedule kept and min_lr after it") {
  const SavedRun s = saved_run("train-extend", false);  // 2 steps, finished
  const fs::path& run = s.run;
  test::Result r = test::brigade_run("train --resume --out " + run.string());
  CHECK(r.status == 2);
  CHECK(r.output.find("the run already finished (2 of 2 steps); give --steps with a later total") != std::string::npos);
  r = test::brigade_run("train --resume --steps 2 --out " + run.string());
  CHECK(r.status == 2);
  CHECK(r.output.find("--steps 2: the run is at step 2 already; give a later total") != std::string::npos);
  const std::vector<nlohmann::json> before = test::records(run, "train");
  REQUIRE(before.size() == 2);
  r = test::brigade_run("train --resume --steps 5 --out " + run.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("--steps 5: the run goes on to step 5; its learning rate decays over the 2 steps it started "
                      "with, then stays at min_lr 0.0001") != std::string::npos);
  const std::vector<nlohmann::json> after = test::records(run, "train");
  REQUIRE(after.size() == 5);
  for (size_t i = 0; i < 2; ++i) CHECK(after[i] == before[i]);
  for (size_t i = 2; i < 5; ++i) {
    CHECK(after[i].at("step") == i + 1);
    CHECK(after[i].at("lr").get<double>() == doctest::Approx(1e-4));
  }
  CHECK(before[1].at("lr").get<double>() > 1e-4);
  nlohmann::json config = nlohmann::json::parse(io::checkpoint_config(s.path));
  CHECK(config.at("steps") == 5);
  CHECK(config.at("decay_steps") == 2);
  // Without decay_steps (a checkpoint from before it was kept), the decay spans its steps.
  config.erase("decay_steps");
  io::Checkpoint ckpt = io::read_checkpoint(s.path, s.m);
  ckpt.config = config.dump();
  io::write_checkpoint(s.path, s.m, ckpt);
  r = test::brigade_run("train --resume --steps 7 --out " + run.string());
  CHECK(r.status == 0);
  CHECK(r.output.find("decays over the 5 steps it started with") != std::string::npos);
  // A run stopped before its total is not shortened by a smaller one (--stop-after is for that).
  const std::string short_run = (s.dir / "short").string();
  r = test::brigade_run("train --model fashion-mlp --data " + (s.dir / "data").string() +
                        " --steps 4 -b 16 --eval-every 4 --eval-batches 1 --stop-after 1 --out " + short_run);
  REQUIRE(r.status == 0);
  r = test::brigade_run("train --resume --steps 3 --out " + short_run);
  CHECK(r.status == 2);
  CHECK(r.output.find("--steps 3: the run trains to step 4; --resume takes a later total") != std::string::npos);
  fs::remove_all(s.dir);
}

// A resumed run keeps its settings: a settings flag is refused, naming it; --data alone is
// taken, for data that moved (the message about the missing data says to pass it).
TEST_CASE("train --resume refuses settings flags, and takes --data for data that moved") {
  const SavedRun s = saved_run("train-resume-data", true);
  const fs::path &dir = s.dir, &run = s.run;
  const std::string& ckpt = s.path;
  test::Result r;
  for (const std::string flag : {"--lr 0.1", "--batch-size 8", "--seed 3", "--model fashion-cnn"}) {
    r = test::brigade_run("train --resume " + flag + " --out " + run.string());
    INFO(flag, "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("brigade: error: " + flag.substr(0, flag.find(' ')) +
                        ": a resumed run keeps the settings it started with (see " + ckpt + "); drop the flag") !=
          std::string::npos);
  }
  fs::rename(dir / "data", dir / "moved");
  r = test::brigade_run("train --resume --out " + run.string());
  CHECK(r.status == 2);
  CHECK(r.output.find("pass --data DIR") != std::string::npos);
  const std::string started_on = nlohmann::json::parse(io::checkpoint_config(ckpt)).at("data_checksum");
  CHECK(started_on.size() == 8);
  r = test::brigade_run("train --resume --data " + (dir / "moved").string() + " --out " + run.string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("warning") == std::string::npos);
  const auto config = nlohmann::json::parse(io::checkpoint_config(ckpt));
  CHECK(config.at("data") == (dir / "moved").string());
  CHECK(config.at("data_checksum") == started_on);
  CHECK(test::records(run, "train").size() == 2);
  fs::remove_all(dir);
}

TEST_CASE("train keeps --data as an absolute path: eval from another folder reads the same data") {
  const fs::path dir = test::scratch_dir("train-relative-data");
  test::write_tiny_fashion(dir / "data", 64, 32);
  const auto r = test::command_run("cd " + dir.string() + " && " BRIGADE_EXE " train --model fashion-mlp --data ./data "
                                   "--steps 1 -b 16 --eval-batches 1 --out run");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const auto config = nlohmann::json::parse(io::checkpoint_config((dir / "run" / "checkpoint.safetensors").string()));
  CHECK(config.at("data") == (dir / "data").string());
  const auto e = test::brigade_run("eval " + (dir / "run").string() + " -b 16");
  INFO(e.output);
  CHECK(e.status == 0);
  CHECK(e.output.find("test loss") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("eval plans its pipeline for the split's largest batch, not a --batch-size larger than the split") {
  const SavedRun s = saved_run("eval-large-batch", false);
  const auto e = test::brigade_run("eval " + s.run.string() + " -b 4000000000");  // 32 test samples
  INFO(e.output);
  CHECK(e.status == 0);
  CHECK(e.output.find("(") != std::string::npos);
  CHECK(e.output.find("/32)") != std::string::npos);
  // Over two stages it says how the boundary travels, as train and step do.
  const auto two = test::brigade_run("eval " + s.run.string() + " --devices 0,0 --link staging -m 2");
  INFO(two.output);
  CHECK(two.status == 0);
  CHECK(two.output.find("link 0->1 (") != std::string::npos);
  CHECK(two.output.find("): staging, forced by --link\n") != std::string::npos);
  fs::remove_all(s.dir);
}

TEST_CASE("train refuses a checkpoint path it could not write before any work: a link there, resumed or not") {
  const SavedRun s = saved_run("train-linked-checkpoint", true);
  fs::rename(s.path, s.dir / "elsewhere.safetensors");
  fs::create_symlink(s.dir / "elsewhere.safetensors", s.path);
  const auto r = test::brigade_run("train --resume --out " + s.run.string());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(s.path + ": is a symbolic link") != std::string::npos);
  CHECK(r.output.find("step ") == std::string::npos);  // no training began
  CHECK(fs::is_symlink(s.path));
  fs::remove_all(s.dir);
}

TEST_CASE("train --resume on data other than the run's says so, and goes on") {
  const SavedRun s = saved_run("train-resume-other-data", true);
  const std::string started_on = nlohmann::json::parse(io::checkpoint_config(s.path)).at("data_checksum");
  test::write_tiny_fashion(s.dir / "other", 80, 32);  // more training images: another order
  const auto r = test::brigade_run("train --resume --data " + (s.dir / "other").string() + " --out " + s.run.string());
  INFO(r.output);
  CHECK(r.status == 0);
  const std::string now = nlohmann::json::parse(io::checkpoint_config(s.path)).at("data_checksum");
  CHECK(now != started_on);
  CHECK(r.output.find("brigade: warning: Fashion-MNIST from " + (s.dir / "other").string() +
                      ": 80 training and 32 test images is not the data the run trained on (CRC-32 " + started_on +
                      " then, " + now + " now): from step 2 on its batches are not those the run would have read") !=
        std::string::npos);
  CHECK(test::records(s.run, "train").size() == 2);
  fs::remove_all(s.dir);
}

// Values no step can start from are refused before any work, naming the file and tensor: a
// NaN parameter, an infinite optimizer state, a negative second moment, a state of the wrong
// size.
TEST_CASE("train --resume refuses a checkpoint's non-finite or impossible tensors, naming them") {
  const SavedRun s = saved_run("train-saved-tensors", true);
  const fs::path &dir = s.dir, &run = s.run;
  const model::Model& m = s.m;
  const io::Checkpoint& saved = s.saved;
  test::Result r;
  const std::string param = saved.params.begin()->first;
  using Edit = std::function<void(io::Checkpoint&)>;
  const std::vector<std::pair<Edit, std::string>> edits = {
      {[&](io::Checkpoint& c) { c.params[param][3] = NAN; },
       ": parameter '" + param + "' holds 1 of its " + std::to_string(saved.params.at(param).size()) +
           " values not finite (NaN or infinite)"},
      {[&](io::Checkpoint& c) { c.optimizer[param + ".exp_avg"][0] = INFINITY; },
       ": optimizer state '" + param + ".exp_avg' holds 1 of its"},
      {[&](io::Checkpoint& c) { c.optimizer[param + ".exp_avg_sq"][1] = -1; },
       ": optimizer state '" + param + ".exp_avg_sq' holds negative values (a mean of squares)"},
      {[&](io::Checkpoint& c) { c.optimizer[param + ".exp_avg"].pop_back(); },
       ": optimizer state '" + param + ".exp_avg' has " + std::to_string(saved.params.at(param).size()) + " elements, "},
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    const fs::path edited = dir / ("edited-" + std::to_string(i));
    fs::copy(run, edited);
    io::Checkpoint c = saved;
    edits[i].first(c);
    const std::string edited_path = (edited / "checkpoint.safetensors").string();
    io::write_checkpoint(edited_path, m, c);
    const std::string metrics = test::slurp(edited / "metrics.jsonl");
    r = test::brigade_run("train --resume --out " + edited.string());
    INFO(edits[i].second, "\n", r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("brigade: error: " + edited_path + edits[i].second) != std::string::npos);
    CHECK(test::slurp(edited / "metrics.jsonl") == metrics);
  }
  fs::remove_all(dir);
}

}  // namespace cli_train_test
