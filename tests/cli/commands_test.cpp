// The rest of the program end to end: devices, plan, bench, and --help of every subcommand.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <fstream>

#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "run.h"
#include "xml_check.h"

namespace cli_commands_test {

namespace fs = std::filesystem;

using namespace brigade;

TEST_CASE("brigade devices lists the devices, as a table and as JSON") {
  const auto t = test::brigade_run("devices");
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("index") == 0);
  const auto j = test::brigade_run("devices --json");
  REQUIRE(j.status == 0);
  const auto devices = nlohmann::json::parse(j.output);
  REQUIRE(devices.is_array());
  REQUIRE(!devices.empty());
  CHECK(devices[0]["index"] == 0);
  CHECK(devices[0]["timeline_semaphore"] == true);
  // What each device's matrix units multiply, and what auto picks there: the table says the same.
  for (const auto& d : devices) {
    REQUIRE(d["matrix_products"].is_array());
    const std::string automatic = d["precision_auto"];
    CHECK((automatic == "bf16" || automatic == "fp16"));
    if (d["matrix_products"].empty()) CHECK(automatic == "bf16");
    // Its PCI address where it lists VK_EXT_pci_bus_info (lavapipe and SwiftShader do not).
    CHECK((d["pci_bus"].is_null() || std::regex_match(d["pci_bus"].get<std::string>(),
                                                      std::regex("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]"))));
  }
  // The table's columns are as wide as their widest entry.
  CHECK(std::regex_search(t.output, std::regex("matrix products \\(16-bit into fp32\\) +--precision auto +its products")));
}

// The lavapipe of tools/install-lavapipe.sh replaces the system's (engine/vk/drivers.h).
TEST_CASE("brigade lists one lavapipe: the checkout's newer Mesa where installed, the system's with BRIGADE_LAVAPIPE=system") {
  std::ifstream version_file(std::string(BRIGADE_DRIVERS_DIR) + "/lavapipe/VERSION");
  std::string version;
  std::getline(version_file, version);
  auto lavapipes = [](const test::Result& r) {
    std::vector<std::string> infos;
    for (const auto& d : nlohmann::json::parse(r.output.substr(r.output.find('['))))
      if (d["name"].get<std::string>().starts_with("llvmpipe")) infos.push_back(d["driver_info"]);
    return infos;
  };
  const auto ours = test::brigade_run("devices --json");
  INFO(ours.output);
  REQUIRE(ours.status == 0);
  const std::vector<std::string> chosen = lavapipes(ours);
  REQUIRE(chosen.size() == 1);
  const auto table = test::brigade_run("devices");
  if (version.empty()) {
    MESSAGE("no lavapipe in " BRIGADE_DRIVERS_DIR "/lavapipe: the system's must be the one listed");
    CHECK(table.output.find("lavapipe: the system's lavapipe") != std::string::npos);
  } else {
    CHECK(chosen[0].starts_with(version));
    CHECK(table.output.find("lavapipe: " + version + "'s lavapipe from ") != std::string::npos);
  }

  setenv("BRIGADE_LAVAPIPE", "system", 1);
  const auto system = test::brigade_run("devices --json");
  const auto system_table = test::brigade_run("devices");
  setenv("BRIGADE_LAVAPIPE", "sometimes", 1);
  const auto bad = test::brigade_run("devices");
  unsetenv("BRIGADE_LAVAPIPE");
  REQUIRE(system.status == 0);
  const std::vector<std::string> theirs = lavapipes(system);
  REQUIRE(theirs.size() == 1);
  if (!version.empty()) CHECK(!theirs[0].starts_with(version));
  CHECK(system_table.output.find("lavapipe: the system's lavapipe (BRIGADE_LAVAPIPE=system)") != std::string::npos);
  CHECK(bad.status == 2);
  CHECK(bad.output.find("BRIGADE_LAVAPIPE is 'sometimes'; it takes 'system'") != std::string::npos);
}

TEST_CASE("brigade plan shows the cut and memory, and exits 1 with a suggestion when it does not fit") {
  const auto ok = test::brigade_run("plan --model fashion-cnn --devices 0,0 -m 4 --remat always");
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK(ok.output.find("\n0 ") != std::string::npos);
  CHECK(ok.output.find("\n1 ") != std::string::npos);
  CHECK(ok.output.find("stage 1: F0 F1 F2 F3 R3 B3 R2 B2 R1 B1 R0 B0 S\n") != std::string::npos);
  CHECK(ok.output.find("bubble of gpipe: 0.200 with equal cells") != std::string::npos);  // (K-1)/(M+K-1)
  const auto tight = test::brigade_run("plan --model gpt-small -b 16 --mem-limit 64MiB");
  INFO(tight.output);
  CHECK(tight.status == 1);
  for (const char* part : {"stage 0 (device 0, ", "over its 64.0 MiB --mem-limit: activations ",
                           "add stages (--devices)"})
    CHECK_MESSAGE(tight.output.find(part) != std::string::npos, "missing: ", part);
  // Without --mem-limit, the device's own memory is the cap: about 400 GB of parameters,
  // gradients and AdamW state is over any device's heap.
  const auto huge = test::brigade_run("plan --model gpt-mini --set n_embd=16384 --set n_layer=8 --set n_head=16");
  INFO(huge.output);
  CHECK(huge.status == 1);
  CHECK(huge.output.find("of device-local memory; add devices or stages") != std::string::npos);
  // The table says so too: its one stage, with no cap of its own, does not fit.
  const size_t header = huge.output.find("total ");
  REQUIRE(header != std::string::npos);
  const size_t row = huge.output.find("\n0 ", header), end = huge.output.find('\n', row + 1);
  REQUIRE(row != std::string::npos);
  CHECK(huge.output.substr(row, end - row).ends_with(" NO"));
}

TEST_CASE("what the plan refuses, train refuses before allocating anything, and what it accepts trains") {
  const fs::path dir = test::scratch_dir("plan-train");
  // One cap and one partition the plan rejects, then one it accepts: stage by stage, the
  // same verdict from train (which would otherwise fail mid-allocation or not at all).
  for (const std::string cap : {"8MiB", "16MiB"}) {
    const std::string pipeline = " --model fashion-cnn --devices 0,0 -b 16 --mem-limit " + cap;
    const auto plan = test::brigade_run("plan" + pipeline);
    const auto train = test::brigade_run("train" + pipeline + " --steps 1 --eval-batches 1 --out " +
                                         (dir / cap).string());
    INFO(cap, "\n", plan.output, "\n", train.output);
    CHECK((plan.status == 0) == (train.status == 0));
    if (plan.status != 0) {
      // Just over: the two sizes round to the same figure, so the bytes are said too.
      CHECK(train.output.find(" bytes), over its 8.0 MiB (8388608 bytes) --mem-limit") != std::string::npos);
      CHECK(train.output.find("out of memory") == std::string::npos);
      CHECK_FALSE(fs::exists(dir / cap / "checkpoint.safetensors"));
    }
  }
  fs::remove_all(dir);
}

// A tensor past the device's maxStorageBufferRange (lavapipe's 128 MiB): fashion-mlp's input
// at 50,000 samples a micro-batch, 149.5 MiB. Plan and train refuse it in one line naming the
// stage, the tensor and what to change; two micro-batches fit.
TEST_CASE("a tensor past the device's binding range is refused by plan and train, naming what to change") {
  const fs::path dir = test::scratch_dir("plan-binding");
  const std::string pipeline = " --model fashion-mlp -b 50000";
  const auto plan = test::brigade_run("plan" + pipeline);
  const auto train = test::brigade_run("train" + pipeline + " --steps 1 --out " + dir.string());
  INFO(plan.output, "\n", train.output);
  CHECK(plan.status == 1);
  CHECK(train.status != 0);
  const std::string why = "tensor 'input' is 149.5 MiB, over this device's maxStorageBufferRange of 128.0 MiB, the most a "
                          "kernel binds; use more micro-batches (--micro-batches) or a smaller mini-batch (--batch-size)";
  for (const auto* r : {&plan, &train}) CHECK(r->output.find("stage 0 (device 0, ") != std::string::npos);
  for (const auto* r : {&plan, &train}) CHECK(r->output.find(why) != std::string::npos);
  CHECK(plan.output.find(" NO\n") != std::string::npos);  // the table's verdict
  CHECK_FALSE(fs::exists(dir / "checkpoint.safetensors"));
  CHECK(test::brigade_run("plan" + pipeline + " -m 2").status == 0);
  fs::remove_all(dir);
}

// plan counts SGD's momentum buffer only where train keeps one: with --momentum above 0.
TEST_CASE("plan counts SGD's momentum buffer as train allocates it") {
  const auto plain = test::brigade_run("plan --model fashion-mlp --optimizer sgd");
  const auto momentum = test::brigade_run("plan --model fashion-mlp --optimizer sgd --momentum 0.9");
  INFO(plain.output, "\n", momentum.output);
  REQUIRE(plain.status == 0);
  REQUIRE(momentum.status == 0);
  // params, grads, optimizer: the last 0 B without momentum, one copy of the parameters with.
  CHECK(plain.output.find("918.8 KiB  918.8 KiB  0 B ") != std::string::npos);
  CHECK(momentum.output.find("918.8 KiB  918.8 KiB  918.8 KiB ") != std::string::npos);
  CHECK(test::brigade_run("plan --model fashion-mlp --optimizer sgd --momentum 1").status != 0);
}

// --precision auto: the products in what `train --precision auto` stores a stage in on the
// device (`brigade devices` says which).
TEST_CASE("brigade bench kernels --precision auto times the products in the device's auto precision") {
  const std::string want = test::precision_auto();
  const auto r = test::brigade_run("bench kernels --precision auto --square 40 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  CHECK(j["precision"] == want);
  CHECK(want != "fp32");
  REQUIRE(!j["results"].empty());
  for (const auto& row : j["results"]) CHECK(row["valid"] == true);
}

TEST_CASE("brigade bench kernels checks and times the kernels") {
  const auto r = test::brigade_run("bench kernels --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  REQUIRE(!j["results"].empty());
  CHECK(j["results"][0]["gflops"].get<double>() > 0);
  // OpenBLAS beside every row where this machine has it; where not, the peer line says so.
  void* blas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  const std::string peer = j["peer"];
  if (blas) {
    dlclose(blas);
    for (const auto& row : j["results"]) {
      CHECK(row["openblas_gflops"].get<double>() > 0);
      CHECK(row["ratio_to_openblas"].get<double>() ==
            doctest::Approx(row["gflops"].get<double>() / row["openblas_gflops"].get<double>()));
    }
  } else {
    CHECK(peer.find("OpenBLAS not found") != std::string::npos);
    CHECK(!j["results"][0].contains("openblas_gflops"));
  }
}

TEST_CASE("brigade bench pipeline measures steps, GPipe's bubble and memory per K and M") {
  const auto r = test::brigade_run("bench pipeline --model fashion-mlp -b 8 --stages 1,2 -m 1,2 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  REQUIRE(j["results"].size() == 4);
  std::map<std::pair<int, int>, nlohmann::json> by;
  for (const auto& row : j["results"]) by[{row["stages"].get<int>(), row["micro_batches"].get<int>()}] = row;
  for (const auto& [km, row] : by) {
    const auto [K, M] = km;
    CHECK(row["gpipe_bubble"].get<double>() == doctest::Approx(double(K - 1) / (M + K - 1)));
    CHECK(row["bubble"].get<double>() >= 0);
    CHECK(row["bubble"].get<double>() < 1);
    CHECK(row["step_ms"].get<double>() > 0);
    CHECK(row["peak_bytes"].get<uint64_t>() >= row["peak_activation_bytes"].get<uint64_t>());
    CHECK(row["relative_to_one_stage"].get<double>() ==
          doctest::Approx(row["samples_per_s"].get<double>() / by[{1, M}]["samples_per_s"].get<double>()));
  }
  // With remat always, one stage keeps one micro-batch's activations: half the rows, less.
  CHECK(by[{1, 2}]["peak_activation_bytes"].get<uint64_t>() < by[{1, 1}]["peak_activation_bytes"].get<uint64_t>());

  const fs::path dir = test::scratch_dir("bench-pipeline");
  const auto svg = test::brigade_run("bench pipeline --model fashion-mlp -b 8 --stages 1,2 -m 1,2 --reps 1 --svg " +
                                     (dir / "plots").string());  // a folder it makes
  REQUIRE(svg.status == 0);
  CHECK(svg.output.find("(K-1)/(M+K-1)") != std::string::npos);
  CHECK(test::xml_problem(test::slurp(dir / "plots" / "bubble.svg")).empty());
  // One it cannot make is refused before the timing.
  std::ofstream(dir / "file") << "x";
  const auto cannot = test::brigade_run("bench pipeline --model fashion-mlp -b 8 --stages 2 -m 1 --reps 1 --svg " +
                                        (dir / "file" / "plots").string());
  CHECK(cannot.status == 2);
  CHECK(cannot.output.find("K  M  ms/step") == std::string::npos);
  fs::remove_all(dir);
  const auto none = test::brigade_run("bench pipeline --model fashion-mlp -b 8 --stages 0 -m 1 --reps 1");
  INFO(none.output);
  CHECK(none.status >= 100);  // refused by the flag's range, before anything runs
  CHECK(none.output.find("--stages") != std::string::npos);
}

// In a 16-bit precision every dispatch still falls to a layer: the weight copies are made
// before the timed passes, and the Linears' products read them packed.
TEST_CASE("brigade bench profile in bf16: the products read the weights' 16-bit copies") {
  const auto r = test::brigade_run("bench profile --model fashion-mlp -b 4 --reps 1 --precision bf16 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  std::set<std::string> forward;
  for (const auto& d : j["dispatches"])
    if (d["layer"] == 1 && d["pass"] == "forward") forward.insert(d["kernel"].get<std::string>().substr(0, 11));
  CHECK(forward == std::set<std::string>{"matmul_bf16"});
  // Each product says its shape: the first Linear's forward x W^T, its weight gradient dy^T x;
  // summed by shape, every product's dispatch counted once.
  size_t products = 0;
  for (const auto& d : j["dispatches"])
    if (d["kernel"].get<std::string>().rfind("matmul", 0) == 0) {
      ++products;
      CHECK(d.contains("work"));
      CHECK(d.value("flops", 0.0) > 0);
    }
  std::map<std::string, uint32_t> shapes;
  for (const auto& s : j["products"]) {
    shapes[s["shape"]] += s["dispatches"].get<uint32_t>();
    CHECK(s["gflops"].get<double>() > 0);
  }
  CHECK(shapes["4x256x784 B^T"] == 1);
  CHECK(shapes["256x784x4 A^T"] == 1);
  uint32_t summed = 0;
  for (const auto& [shape, n] : shapes) summed += n;
  CHECK(summed == products);
}

TEST_CASE("brigade bench profile times every layer and dispatch, and splits a step into GPU and host time") {
  const auto r = test::brigade_run("bench profile --model fashion-cnn -b 4 --devices 0,0 -m 2 --reps 1 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  CHECK(j["micro_batch_rows"] == 2);
  REQUIRE(j["layers"].size() == 10);
  double layers_ms = 0;
  for (const auto& l : j["layers"]) {
    const bool view = l["kind"] == "flatten";
    CHECK((view || l["forward_ms"].get<double>() > 0));
    CHECK((view || l["backward_ms"].get<double>() > 0));
    layers_ms += l["forward_ms"].get<double>() + l["backward_ms"].get<double>();
  }
  CHECK(j["gpu_ms"].get<double>() == doctest::Approx(layers_ms + j["loss_ms"].get<double>()));
  // Every dispatch names a layer that computes (or the loss, layer 10) and a kernel of that layer.
  std::map<std::pair<int, std::string>, std::set<std::string>> kernels;
  for (const auto& d : j["dispatches"]) {
    const int layer = d["layer"];
    REQUIRE(layer >= 0);
    REQUIRE(layer <= 10);
    CHECK(layer != 6);  // Flatten dispatches nothing
    CHECK(d["ms"].get<double>() >= 0);
    const std::string k = d["kernel"];
    kernels[{layer, d["pass"]}].insert(k.substr(0, k.find('|')));
  }
  // The first convolution takes its ReLU and pooling in one pass, and its weight gradient
  // straight from the pooled gradient (partial sums, then their column sums).
  CHECK(kernels[{0, "forward"}] == std::set<std::string>{"conv2d_pool_forward"});
  CHECK(kernels[{0, "backward"}] == std::set<std::string>{"conv2d_pool_weight", "linear_bias_backward"});
  // The second convolution (32 input channels) runs Winograd's form, its output transform
  // pooling (layer 5 dispatches nothing), its backward reading the pooled gradient through the
  // codes (nothing spread back), both gradients the forward's transpose (no output transform,
  // the input's transposed instead).
  CHECK(kernels[{3, "backward"}] ==
        std::set<std::string>{"conv2d_winograd_input", "conv2d_winograd_filter", "matmul",
                              "conv2d_winograd_input_grad", "conv2d_winograd_output_grad",
                              "conv2d_winograd_filter_grad", "conv2d_backward_bias"});
  CHECK(kernels.count({5, "forward"}) == 0);
  CHECK(kernels[{0, "backward"}].count("conv2d_col2im") == 0);  // the input needs no gradient
  // The loss's dispatches, its gradient among them, are neither pass of a layer: its own.
  CHECK(kernels[{10, "loss"}].count("cross_entropy_forward") == 1);
  CHECK(kernels[{10, "loss"}].count("cross_entropy_backward") == 1);
  CHECK(kernels.count({10, "forward"}) == 0);
  CHECK(kernels.count({10, "backward"}) == 0);
  // The step: two stages, two micro-batches; busy time within the wall time.
  const auto& step = j["step"];
  CHECK(step["stages"] == 2);
  CHECK(step["micro_batches"] == 2);
  REQUIRE(step["busy_ms"].size() == 2);
  for (const auto& b : step["busy_ms"]) {
    CHECK(b.get<double>() > 0);
    CHECK(b.get<double>() <= step["wall_ms"].get<double>());
  }
  // Per stage: two forwards, two backwards and the optimizer step at least.
  CHECK(step["submissions"].get<int>() >= 2 * 5);
  CHECK(step["dispatches"].get<int>() > j["dispatches"].size());
  CHECK(step["barriers"].get<int>() > 0);
  CHECK(step["record_ms"].get<double>() > 0);
}

TEST_CASE("every subcommand has --help naming its flags") {
  for (const auto& [cmd_, flag_] : std::vector<std::pair<std::string, std::string>>{
           {"devices", "--json"}, {"plan", "--mem-limit"}, {"init", "--seed"}, {"step", "--micro-batches"},
           {"train", "--resume"}, {"eval", "--batch-size"}, {"sample", "--temperature"}, {"plot", "--smooth"},
           {"bench kernels", "--reps"}, {"bench pipeline", "--stages"}, {"bench profile", "--micro-batches"},
           {"bench products", "--reps"}, {"bench capacity", "--mem-limit"}}) {
    const std::string &cmd = cmd_, &flag = flag_;  // references: doctest's messages capture them
    const auto r = test::brigade_run(cmd + " --help");
    INFO(cmd, "\n", r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find(flag) != std::string::npos);
  }
  // Each lists the pipeline flags its passes use: eval runs no backward, sample one sequence.
  const std::vector<std::string> training{"--micro-batches", "--schedule", "--virtual-stages", "--remat", "--replicas", "--bucket-size"};
  for (const auto& [cmd_, takes_] : std::vector<std::pair<std::string, size_t>>{{"train", 6}, {"eval", 3}, {"sample", 0}}) {
    const std::string& cmd = cmd_;
    const size_t takes = takes_;
    const auto r = test::brigade_run(cmd + " --help");
    for (size_t i = 0; i < training.size(); ++i) {
      const bool listed = r.output.find(training[i] + " ") != std::string::npos;
      const bool wanted = i < takes || (cmd == "eval" && training[i] == "--replicas");
      CHECK_MESSAGE(listed == wanted, cmd, " ", training[i]);
    }
  }
}

TEST_CASE("the parser's refusals are one line each, naming the flag or word and what was wanted") {
  // (arguments, the whole of standard error): a negative whole number is refused, not wrapped
  // round to 2^64 - 5 steps.
  for (const auto& [args_, said_] : std::vector<std::pair<std::string, std::string>>{
           {"train --model fashion-mlp --out x --steps -5", "brigade: error: --steps: -5 is negative (brigade train --help)"},
           {"train --model fashion-mlp --out x --eval-every -1",
            "brigade: error: --eval-every: -1 is negative (brigade train --help)"},
           {"train --model fashion-mlp --out x --steps abc",
            "brigade: error: --steps: 'abc' is not a whole number in decimal digits (brigade train --help)"},
           // What the parser would read as octal 8, hex 16, 2^64 - 5 and 2^64 - 1.
           {"train --model fashion-mlp --out x --steps 010x",
            "brigade: error: --steps: '010x' is not a whole number in decimal digits (brigade train --help)"},
           {"train --model fashion-mlp --out x --steps 0x10",
            "brigade: error: --steps: '0x10' is not a whole number in decimal digits (brigade train --help)"},
           {"train --model fashion-mlp --out x --steps ' -5'",
            "brigade: error: --steps: ' -5' is not a whole number in decimal digits (brigade train --help)"},
           {"train --model fashion-mlp --out x --steps 18446744073709551616",
            "brigade: error: --steps: 18446744073709551616 is more than 18446744073709551615 (brigade train --help)"},
           {"train --model fashion-mlp --out x --batch-size 4294967296",
            "brigade: error: --batch-size 4294967296 is more than 4294967295 (brigade train --help)"},
           {"train --model fashion-mlp --out x --lr fast", "brigade: error: --lr fast is not a number (brigade train --help)"},
           {"train --model fashion-mlp --bogus", "brigade: error: unknown flag --bogus (brigade train --help)"},
           {"train --model fashion-mlp --out ''", "brigade: error: --out: empty; expected a folder (brigade train --help)"},
           {"train --model fashion-mlp --out x --data ''",
            "brigade: error: --data: empty; expected a folder or a file (brigade train --help)"},
           {"plan --model fashion-mlp --bucket-size foo",
            "brigade: error: --bucket-size: 'foo' does not start with a number; expected a size such as 512MiB, 2GiB, "
            "64KiB or a byte count (brigade plan --help)"},
           {"frobnicate", "brigade: error: unknown command 'frobnicate' (brigade: devices, plan, init, train, eval, "
                          "sample, supervise, step, plot, bench)"},
           {"bench bogus", "brigade: error: unknown command 'bogus' (brigade bench: kernels, pipeline, schedules, "
                           "partition, profile, products, attention, capacity, planner)"},
           {"", "brigade: error: a command is required (brigade: devices, plan, init, train, eval, sample, supervise, "
                "step, plot, bench)"}}) {
    const std::string &args = args_, &said = said_;
    const auto r = test::brigade_run(args);
    INFO(args, "\n", r.output);
    CHECK(r.status >= 100);  // the parser's exit codes (docs/COMMANDS.md)
    CHECK(r.output == said + "\n");
  }
  // A leading zero is decimal's, not octal's.
  const auto ten = test::brigade_run("plan --model fashion-mlp -b 010 --devices 0");
  INFO(ten.output);
  CHECK(ten.output.find("mini-batch 10 as 1 micro-batches") != std::string::npos);
}

TEST_CASE("--precision: plan shows each stage's, and bad values are refused in one line") {
  const auto mixed = test::brigade_run("plan --model gpt-mini --devices 0,0 -b 16 -m 4 --precision bf16,fp32");
  INFO(mixed.output);
  REQUIRE(mixed.status == 0);
  CHECK(mixed.output.find("embedding..gpt_mlp       bf16") != std::string::npos);
  CHECK(mixed.output.find("gpt_attention..lm_head  fp32") != std::string::npos);
  const auto automatic = test::brigade_run("plan --model gpt-mini --devices 0,0 -b 16 --precision auto");
  // Devices without matrix units: auto keeps bf16 storage, and plan says where each stage's
  // products run and why.
  INFO(automatic.output);
  CHECK(automatic.output.find("stage 1: bf16 products on the SIMT kernel in fp32 arithmetic: the device lists no bf16 "
                              "matrix product; auto: bf16 (16 bits with fp32's exponent range") != std::string::npos);
  CHECK(mixed.output.find("stage 1: fp32 products on the SIMT kernel\n") != std::string::npos);
  // Which kernels attention takes: lavapipe's matrix form by default; fused, the row kernels
  // staged in fp32, and in 16 bits the matrix form where the products take no matrix units.
  CHECK(automatic.output.find("stage 1 attention: attention in the matrix form: its products on the matrix kernel") !=
        std::string::npos);
  const auto fused = test::command_run("BRIGADE_ATTENTION=fused " + std::string(BRIGADE_EXE) +
                                       " plan --model gpt-mini --devices 0,0 -b 16 -m 4 --precision bf16,fp32");
  INFO(fused.output);
  CHECK(fused.output.find("stage 0 attention: attention in the matrix form: fused, bf16 attention takes matrix tiles "
                          "only where the stage's products take the device's matrix units\n") != std::string::npos);
  CHECK(fused.output.find("stage 1 attention: attention fused: flash attention on SIMT cores") != std::string::npos);
  const auto half = test::brigade_run("plan --model gpt-mini --devices 0,0 -b 16 --precision fp32,fp16");
  CHECK(half.output.find("gpt_attention..lm_head  fp16") != std::string::npos);
  CHECK(half.output.find("fp16 stages train with dynamic loss scaling") != std::string::npos);
  CHECK(automatic.output.find("loss scaling from") == std::string::npos);
  // Where the 16-bit tensors are: a stage names the layers whose kernels take them and those
  // on fp32 copies (an fp32 stage's first layer reads its bf16 input); fp32 alone says nothing.
  CHECK(mixed.output.find("stage 0 bf16: 16-bit tensors taken by 1 gpt_attention, 2 gpt_mlp, 3 gpt_attention, 4 gpt_mlp; on fp32 copies: "
                              "0 embedding; fp32 work ") !=
        std::string::npos);
  CHECK(mixed.output.find("stage 1 fp32: 16-bit tensors taken by 5 gpt_attention; on fp32 copies: none; fp32 work 0 B") !=
        std::string::npos);
  const auto wide = test::brigade_run("plan --model gpt-mini --devices 0,0 -b 16");
  CHECK(wide.status == 0);
  CHECK(wide.output.find("16-bit tensors") == std::string::npos);
  const auto cnn = test::brigade_run("plan --model fashion-cnn-bn --devices 0 -b 16 --precision bf16");
  INFO(cnn.output);
  CHECK(cnn.output.find("stage 0 bf16: 16-bit tensors taken by 0 conv2d, 1 batchnorm2d, 3 maxpool2d, 4 conv2d, 5 batchnorm2d, "
                        "7 maxpool2d, 9 linear, 11 linear; on fp32 copies: none; fp32 work ") != std::string::npos);
  const std::pair<std::string, std::string> refused[] = {
      {"--precision fp8", "brigade: error: unknown --precision 'fp8'; expected fp32, bf16, fp16 or auto\n"},
      {"--precision bf16,bf16,fp32", "brigade: error: --precision: 3 values for 2 stages; give one for all or one per stage\n"},
  };
  for (const auto& [flag_, line_] : refused) {
    const std::string &flag = flag_, &line = line_;  // references: doctest's messages capture them
    const auto r = test::brigade_run("plan --model gpt-mini --devices 0,0 " + flag);
    CHECK_MESSAGE(r.status == 2, flag);
    CHECK_MESSAGE(r.output == line, flag, ": ", r.output);
  }
}

}  // namespace cli_commands_test
