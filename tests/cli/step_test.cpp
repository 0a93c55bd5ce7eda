// The interop contract end to end: `brigade init` writes parameters under PyTorch's names,
// `brigade step` reads them and a batch and writes the loss and every gradient, the same
// whether the model runs on one stage or is pipelined, and bad input is one clear line.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "run.h"
#include "tiny_data.h"

namespace cli_step_test {

using namespace brigade;
using test::brigade_run, test::Result, test::scratch_dir;
namespace fs = std::filesystem;

TEST_CASE("brigade init and step: pipelined gradients equal one stage's, under PyTorch's names") {
  const fs::path d = scratch_dir("step");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string();
  Result r = brigade_run("init --model fashion-cnn --seed 4 --out " + p);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const io::SafeTensors params = io::SafeTensors::load(p);
  CHECK(params.names() == std::vector<std::string>{"0.bias", "0.weight", "3.bias", "3.weight",
                                                    "7.bias", "7.weight", "9.bias", "9.weight"});
  CHECK(params.info("7.weight").shape == std::vector<int64_t>{128, 3136});
  test::write_image_batch(b, 12);

  r = brigade_run("step --model fashion-cnn --params " + p + " --batch " + b + " --out " +
                  (d / "g1.safetensors").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("loss ") != std::string::npos);
  r = brigade_run("step --model fashion-cnn --params " + p + " --batch " + b + " --out " +
                  (d / "g4.safetensors").string() + " --devices 0,0,0,0 -m 5 --remat always --link staging" +
                  " --trace " + (d / "trace.json").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("bubble: measured") != std::string::npos);
  CHECK(fs::file_size(d / "trace.json") > 100);
  // The trace puts GPU times on the host's clock: no action starts before it was submitted
  // (beyond the calibration's window, well under a millisecond; a first-run calibration was
  // once off by 2.3 ms).
  const nlohmann::json trace = nlohmann::json::parse(test::slurp(d / "trace.json"));
  size_t actions = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "gpu") {
      ++actions;
      INFO(e.dump());
      CHECK(e.at("ts").get<double>() >= e.at("args").at("submitted_us").get<double>() - 1000.0);
    }
  CHECK(actions > 0);

  const io::SafeTensors g1 = io::SafeTensors::load((d / "g1.safetensors").string());
  const io::SafeTensors g4 = io::SafeTensors::load((d / "g4.safetensors").string());
  CHECK(g1.info("loss").shape.empty());
  CHECK(std::isfinite(g1.f32("loss")[0]));
  for (const std::string& name : params.names()) {
    REQUIRE(g1.has(name));
    CHECK(g1.info(name).shape == params.info(name).shape);
  }
  for (const std::string& name : g1.names()) {
    const std::vector<float> want = g1.f32(name);
    double scale = 1e-3;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    test::check_close(g4.f32(name), want, 2e-5 * scale, 1e-4, name);
  }
  fs::remove_all(d);
}

TEST_CASE("brigade step --plan auto writes the micro-batches its plan chose into the gradients' metadata") {
  const fs::path d = scratch_dir("step-auto");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string(),
                    g = (d / "g.safetensors").string();
  REQUIRE(brigade_run("init --model fashion-mlp --out " + p).status == 0);
  test::write_image_batch(b, 64);
  // Under this cap one stage takes 64 samples in micro-batches of a few (parameters and
  // gradients 1.8 MiB).
  const Result r = brigade_run("step --model fashion-mlp --params " + p + " --batch " + b + " --out " + g +
                               " --plan auto --devices 0 --mem-limit 1900KiB");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const size_t at = r.output.find("plan auto: devices 0 (llvmpipe), ");
  REQUIRE(at != std::string::npos);
  const std::string chosen = r.output.substr(at + 33, r.output.find(' ', at + 33) - (at + 33));
  INFO(r.output);
  CHECK(chosen != "1");
  CHECK(io::SafeTensors::load(g).metadata().at("micro_batches") == chosen);
  fs::remove_all(d);
}

TEST_CASE("brigade step under each schedule gives one stage's gradients, and plan prints its action lists") {
  const fs::path d = scratch_dir("schedules");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string();
  Result r = brigade_run("init --model fashion-mlp --seed 3 --out " + p);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  test::write_image_batch(b, 12);
  const std::string base = "step --model fashion-mlp --params " + p + " --batch " + b + " --out ";
  r = brigade_run(base + (d / "g1.safetensors").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const io::SafeTensors g1 = io::SafeTensors::load((d / "g1.safetensors").string());
  for (const std::string flags : {"--devices 0,0,0 -m 4 --schedule 1f1b --remat except-last",
                                  "--devices 0,0,0 -m 5 --schedule zb --link host",
                                  "--devices 0,0 -m 4 --schedule interleaved --virtual-stages 3 --remat always"}) {
    CAPTURE(flags);
    const std::string out = (d / "g.safetensors").string();
    fs::remove(out);  // each schedule's own file, not the one before's
    r = brigade_run(base + out + " " + flags);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    const io::SafeTensors g = io::SafeTensors::load(out);
    for (const std::string& name : g1.names()) {
      const std::vector<float> want = g1.f32(name);
      double scale = 1e-3;
      for (float v : want) scale = std::max(scale, double(std::fabs(v)));
      test::check_close(g.f32(name), want, 2e-5 * scale, 1e-4, name);
    }
  }

  r = brigade_run("plan --model fashion-mlp --devices 0,0 -m 3 -b 12 --schedule zb");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("schedule zb, remat never") != std::string::npos);
  CHECK(r.output.find("stage 0: F0 F1 B0 W0 F2 B1 W1 B2 W2 S\n") != std::string::npos);
  CHECK(r.output.find("stage 1: F0 B0 F1 B1 W0 F2 B2 W1 W2 S\n") != std::string::npos);
  r = brigade_run("plan --model fashion-mlp --devices 0,0 -m 4 -b 12 --schedule interleaved --virtual-stages 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("0 (stage 0)") != std::string::npos);  // a row per cell, then per stage
  CHECK(r.output.find("link 1->2 (stage 1 -> stage 0,") != std::string::npos);
  CHECK(r.output.find("stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 S\n") !=
        std::string::npos);

  // What a schedule cannot run is one line saying what would.
  r = brigade_run("plan --model fashion-mlp --devices 0,0,0 -m 4 -b 12 --schedule interleaved --virtual-stages 2");
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: --schedule interleaved runs micro-batches in groups of the 3 stages, and 4 is "
                    "not a multiple of 3: use --micro-batches 3 or 6\n");
  r = brigade_run("plan --model fashion-mlp --devices 0,0 -m 4 -b 12 --schedule interleaved --virtual-stages 4");
  CHECK(r.status == 2);
  CHECK(r.output == "brigade: error: 8 cells (2 stages x 4 virtual stages) for a model of 6 layers; use at most 6 cells\n");
  // Said before any data is read: the data folder here does not exist.
  r = brigade_run("train --model fashion-mlp --schedule cosine --steps 1 --data " + (d / "no-data").string() +
                  " --out " + (d / "run").string());
  CHECK(r.status == 2);
  CHECK(r.output.find("the learning rate's is --lr-schedule cosine") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "run"));
  fs::remove_all(d);
}

TEST_CASE("brigade step refuses bad input with one line naming the problem") {
  const fs::path d = scratch_dir("bad");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string();
  REQUIRE(brigade_run("init --model fashion-mlp --out " + p).status == 0);
  test::write_image_batch(b, 4);
  const std::string base = "step --model fashion-mlp --params " + p + " --batch " + b + " --out " +
                           (d / "g.safetensors").string();
  const std::string nan_batch = (d / "nan.safetensors").string();
  {
    std::vector<float> images(2 * 784, 0.5f);
    images[5] = std::numeric_limits<float>::quiet_NaN();
    images[900] = std::numeric_limits<float>::infinity();
    io::SafeTensorsWriter w;
    w.add("input", {2, 1, 28, 28}, images);
    w.add("target", {2}, std::vector<int32_t>{1, 2});
    w.write(nan_batch);
  }
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {base + " --devices 0,7", "--devices: device 7 does not exist"},
      {base + " --devices 0,x", "--devices: no device's name contains 'x'"},
      {base + " -m 5", "--micro-batches 5 is more than the 4 samples"},
      {base + " --remat sometimes", "--remat"},
      {base + " --link pigeon", "--link: 'pigeon' is not a path"},
      {base + " --devices 0,0 --balance 2,2", "--balance: the cell sizes add up to 4"},
      {"step --model fashion-cnn --params " + p + " --batch " + b + " --out " + (d / "g.safetensors").string(),
       "parameter '0.weight' of fashion-cnn is missing"},
      {base + " --mem-limit 64KiB", "stage 0 (device 0, "},
      {base + " --mem-limit 64KiB", "over its 64.0 KiB --mem-limit: "},
      {base + " --bucket-size 4MB", "--bucket-size: '4MB' has an unknown unit"},
      {"init --model fashion-nothing --out " + p, "fashion-nothing"},
      // 48 TiB of parameters: refused before anything is allocated, where init grew until the
      // machine ran out of memory.
      {"init --model gpt-mini --set n_layer=4096 --set n_embd=16384 --set n_head=16 --out " + p,
       "gpt-mini: its parameters take 48.0 TiB, twice that while written; this process may take "},
      {"init --model fashion-mlp --out " + (d / "none" / "p.safetensors").string(), "/none/p.safetensors: cannot create"},
      {"step --model fashion-mlp --params " + p + " --batch " + nan_batch + " --out " + (d / "g.safetensors").string(),
       nan_batch + ": tensor 'input' holds 2 of its 1568 values not finite (NaN or infinite)"},
  };
  for (const Case& c : cases) {
    const Result r = brigade_run(c.args);
    CHECK_MESSAGE(r.status != 0, c.args);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, c.args, " printed: ", r.output);
    CHECK_MESSAGE(std::count(r.output.begin(), r.output.end(), '\n') == 1, c.args, " printed: ", r.output);
  }
  CHECK_FALSE(fs::exists(d / "g.safetensors"));  // nothing half-written
  fs::remove_all(d);
}

TEST_CASE("init and step refuse an --out or --trace that is not a regular file or is empty, before the work") {
  const fs::path d = scratch_dir("not-a-file");
  const std::string p = (d / "p.safetensors").string(), b = (d / "b.safetensors").string();
  REQUIRE(brigade_run("init --model fashion-mlp --out " + p).status == 0);
  test::write_image_batch(b, 4);
  const std::string fifo = (d / "fifo").string(), link = (d / "link").string(), null = (d / "null").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  fs::create_symlink("p.safetensors", link);
  const bool device = ::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;  // root only
  const std::string step = "step --model fashion-mlp --params " + p + " --batch " + b;
  const std::string g = " --out " + (d / "g.safetensors").string();
  struct Case {
    std::string args, expect;
  };
  std::vector<Case> cases = {
      {"init --model fashion-mlp --out " + fifo, fifo + ": is a named pipe, not a regular file; nothing is written over it"},
      {"init --model fashion-mlp --out " + link, link + ": is a symbolic link (to p.safetensors), not a regular file"},
      {"init --model fashion-mlp --out " + d.string(), d.string() + ": is a folder, not a regular file"},
      {"init --model fashion-mlp --out ''", "'': an empty path names no file to write"},
      {step + " --out " + fifo, fifo + ": is a named pipe"},
      {step + " --out " + d.string(), d.string() + ": is a folder"},
      {step + " --out ''", "'': an empty path names no file to write"},
      {step + g + " --trace " + fifo, fifo + ": is a named pipe"},
      {step + g + " --trace " + link, link + ": is a symbolic link"},
  };
  if (device) {
    cases.push_back({"init --model fashion-mlp --out " + null, null + ": is a device, not a regular file"});
    cases.push_back({step + g + " --trace " + null, null + ": is a device"});
  }
  for (const Case& c : cases) {
    const Result r = brigade_run(c.args);
    CHECK_MESSAGE(r.status != 0, c.args);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, c.args, " printed: ", r.output);
    CHECK_MESSAGE(std::count(r.output.begin(), r.output.end(), '\n') == 1, c.args, " printed: ", r.output);
  }
  CHECK(fs::symlink_status(fifo).type() == fs::file_type::fifo);
  CHECK(fs::symlink_status(link).type() == fs::file_type::symlink);
  if (device) CHECK(fs::symlink_status(null).type() == fs::file_type::character);
  CHECK_FALSE(fs::exists(d / "g.safetensors"));  // refused before the step, not after it
  fs::remove_all(d);
}

// fp16: a step whose gradients overflow at GradScaler's initial scale is taken again at half
// the scale, as a run skips it and backs off, until they are finite; the scale is said and kept
// in the metadata, and the gradients divided by it are fp32's within fp16's rounding.
TEST_CASE("brigade step in fp16 backs the loss scale off until the gradients are finite, as GradScaler does") {
  const fs::path d = scratch_dir("step-fp16");
  // LayerNorm over activations of little spread: its input gradient is large, and at a scale
  // of 65536 past fp16's largest value.
  test::write_text(d / "ln.toml", "name = \"ln-mlp\"\ninput = [1, 28, 28]\nclasses = 10\nlayers = [ { type = \"flatten\" }, "
                                 "{ type = \"linear\", out = 16 }, { type = \"layernorm\" }, { type = \"linear\", out = 10 } ]\n");
  const std::string model = "--model " + (d / "ln.toml").string(), p = (d / "p.safetensors").string(),
                    b = (d / "b.safetensors").string();
  REQUIRE(brigade_run("init " + model + " --out " + p).status == 0);
  const uint32_t rows = 4;
  std::vector<float> x(rows * 784);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1e-3f * float(int(i * 7 % 13) - 6) / 6;
  const std::vector<int32_t> y = {0, 1, 2, 3};
  io::SafeTensorsWriter w;
  w.add("input", {rows, 1, 28, 28}, std::span<const float>(x));
  w.add("target", {rows}, std::span<const int32_t>(y));
  w.write(b);
  const std::string g16 = (d / "g16.safetensors").string(), g32 = (d / "g32.safetensors").string();
  const Result half = brigade_run("step " + model + " --params " + p + " --batch " + b + " --out " + g16 + " --precision fp16");
  INFO(half.output);
  REQUIRE(half.status == 0);
  CHECK(half.output.find("fp16: loss scale ") != std::string::npos);
  const io::SafeTensors h = io::SafeTensors::load(g16);
  const double scale = std::stod(h.metadata().at("loss_scale"));
  CHECK(scale < 65536);  // backed off
  CHECK(scale >= 1);
  REQUIRE(brigade_run("step " + model + " --params " + p + " --batch " + b + " --out " + g32).status == 0);
  const io::SafeTensors f = io::SafeTensors::load(g32);
  for (const char* name : {"1.weight", "1.bias", "2.weight", "2.bias", "3.weight", "3.bias"}) {
    CAPTURE(name);
    const std::vector<float> a = h.f32(name), e = f.f32(name);
    REQUIRE(a.size() == e.size());
    double worst = 0, largest = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - e[i]))), largest = std::max(largest, double(std::fabs(e[i])));
    CHECK(std::isfinite(worst));
    CHECK(worst <= 2e-2 * largest);
  }
}

TEST_CASE("brigade step takes a GPT's token windows shorter than its block, and refuses longer ones") {
  const fs::path d = scratch_dir("window");
  const std::string p = (d / "p.safetensors").string(), model =
      "--model gpt-mini --set n_layer=1 --set n_head=2 --set n_embd=32 --set block_size=16";
  REQUIRE(brigade_run("init " + model + " --out " + p).status == 0);
  auto write_batch = [&](const std::string& path, uint32_t rows, uint32_t T) {
    std::vector<int32_t> tokens(rows * T), targets(rows * T);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 37 % 256), targets[i] = int32_t(i * 11 % 256);
    io::SafeTensorsWriter w;
    w.add("input", {rows, T}, std::span<const int32_t>(tokens));
    w.add("target", {rows, T}, std::span<const int32_t>(targets));
    w.write(path);
  };
  const std::string b8 = (d / "b8.safetensors").string(), g = (d / "g.safetensors").string();
  write_batch(b8, 3, 8);
  Result r = brigade_run("step " + model + " --params " + p + " --batch " + b8 + " --out " + g);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const io::SafeTensors grads = io::SafeTensors::load(g);
  CHECK(std::isfinite(grads.f32("loss")[0]));
  // Positions 8 to 15 of wpe are never used by 8-token windows: their gradient is zero.
  const std::vector<float> dwpe = grads.f32("transformer.wpe.weight", {16, 32});
  double used = 0, unused = 0;
  for (size_t i = 0; i < dwpe.size(); ++i) (i < 8 * 32 ? used : unused) += std::fabs(dwpe[i]);
  CHECK(used > 0);
  CHECK(unused == 0);
  // A window of one token, its targets [N, 1] as its input.
  const std::string b1 = (d / "b1.safetensors").string();
  write_batch(b1, 3, 1);
  r = brigade_run("step " + model + " --params " + p + " --batch " + b1 + " --out " + (d / "g1.safetensors").string());
  CHECK_MESSAGE(r.status == 0, r.output);
  // Pipelined over two stages, the same loss.
  r = brigade_run("step " + model + " --params " + p + " --batch " + b8 + " --out " +
                  (d / "g2.safetensors").string() + " --devices 0,0 -m 3");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(io::SafeTensors::load((d / "g2.safetensors").string()).f32("loss")[0] ==
        doctest::Approx(grads.f32("loss")[0]).epsilon(1e-5));

  // Attention's row kernels, staged or not (BRIGADE_ATTENTION), give the same bits.
  const std::string exe = BRIGADE_EXE, rest = " step " + model + " --params " + p + " --batch " + b8 + " --out ";
  const std::string gd = (d / "gd.safetensors").string(), gf = (d / "gf.safetensors").string();
  r = test::command_run("BRIGADE_ATTENTION=direct " + exe + rest + gd);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  r = test::command_run("BRIGADE_ATTENTION=fused " + exe + rest + gf);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const io::SafeTensors direct = io::SafeTensors::load(gd), fused = io::SafeTensors::load(gf);
  CHECK(direct.names() == fused.names());
  for (const std::string& name : direct.names()) {
    CAPTURE(name);
    CHECK(direct.f32(name) == fused.f32(name));
  }
  r = test::command_run("BRIGADE_ATTENTION=flash " + exe + rest + gf);
  CHECK(r.status != 0);
  CHECK_MESSAGE(r.output.find("BRIGADE_ATTENTION is 'flash'; expected auto, matrix, direct or fused") != std::string::npos, r.output);

  const std::string b17 = (d / "b17.safetensors").string();
  write_batch(b17, 2, 17);
  r = brigade_run("step " + model + " --params " + p + " --batch " + b17 + " --out " + g);
  CHECK(r.status != 0);
  CHECK(r.output.find("T from 1 to its block_size 16") != std::string::npos);
  fs::remove_all(d);
}

}  // namespace cli_step_test
