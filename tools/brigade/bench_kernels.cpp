// `brigade bench kernels`: the speed of the matmul kernel on one device, over square
// problems and the real Linear shapes of the presets. Every case is first checked against
// the CPU reference; a kernel that disagrees gets no speed. Times are GPU timestamps around
// each repetition, the tilings of one shape timed in turn, round after round; the median is
// reported, beside OpenBLAS's for the same product on the host's cores, measured right after
// them (blas_peer.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "bench_tilings.h"
#include "blas_peer.h"
#include "checks.h"
#include "commands.h"
#include "table.h"
#include "ops/linear.h"
#include "ops/matmul.h"
#include "ops/matmul_candidates.h"
#include "ops/matmul_split.h"
#include "ops/matmul_tiles.h"
#include "ops/precision.h"
#include "shaders/precision.h"
#include "ref/linear.h"
#include "ref/matmul.h"
#include "util/stats.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/device.h"
#include "vk/instance.h"

namespace brigade::cli {

namespace {

enum class Op { Matmul, LinearForward, LinearBackwardData, LinearBackwardWeight };

const char* op_name(Op op) {
  switch (op) {
    case Op::Matmul: return "matmul";
    case Op::LinearForward: return "linear forward";
    case Op::LinearBackwardData: return "linear backward-data";
    case Op::LinearBackwardWeight: return "linear backward-weight";
  }
  return "?";
}

struct Case {
  std::string name;
  Op op;
  uint32_t d0, d1, d2;  // Matmul: M, N, K.  Linear: N rows, IN, OUT.
  std::optional<ops::MatmulTiling> tiling;  // unset: the device's default
  // Matmul: A and B stored in 16 bits (values of that precision), C in fp32.
  ops::Precision format = ops::Precision::Fp32;

  // The matmul it amounts to, (M,N,K) of C (M,N) += (M,K)(K,N).
  std::array<uint64_t, 3> mnk() const {
    switch (op) {
      case Op::Matmul: return {d0, d1, d2};
      case Op::LinearForward: return {d0, d2, d1};
      case Op::LinearBackwardData: return {d0, d1, d2};
      case Op::LinearBackwardWeight: return {d2, d1, d0};
    }
    return {};
  }
  // How the product's operands are stored, as the Linear pass lays them out.
  bool trans_a() const { return op == Op::LinearBackwardWeight; }
  bool trans_b() const { return op == Op::LinearForward; }
  std::string shape() const {
    const auto [m, n, k] = mnk();
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

struct Result {
  Case c;
  std::string tiling;  // its name; "default: ..." where the device's default picked it
  bool valid = false;
  double max_err = 0, median_ms = 0, gflops = 0;
  double peer_gflops = NAN;  // OpenBLAS on the same product; NaN without it
};

// Values of the inputs, and what the reference says the outputs are. A square product past
// kFullCheckFlops is checked on kCheckedRows rows spread over C (the first and last among
// them): the double reference of all of a 4096^3 product would take the host minutes.
struct Problem {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> outputs;
  std::vector<uint32_t> rows;  // the rows of outputs[0] the reference holds; empty: all
};

constexpr double kFullCheckFlops = 2.0 * 1024 * 1024 * 1024;
constexpr uint32_t kCheckedRows = 64;

std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<float> narrow(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Inputs: Matmul A, B; forward x, weight, bias; backward-data dy, weight; backward-weight
// dy, x. Outputs start at zero and are computed in double.
Problem make_problem(const Case& c) {
  Problem p;
  const uint32_t a = c.d0, b = c.d1, d = c.d2;
  switch (c.op) {
    case Op::Matmul: {
      p.inputs = {random_values(size_t(a) * d, 1), random_values(size_t(d) * b, 2)};
      for (auto& input : p.inputs)
        for (float& x : input) x = ops::round_on_host(x, c.format);
      std::vector<double> rows_of_a;
      if (2.0 * a * b * d > kFullCheckFlops && a > kCheckedRows)
        for (uint32_t i = 0; i < kCheckedRows; ++i) {
          p.rows.push_back(uint32_t(uint64_t(i) * (a - 1) / (kCheckedRows - 1)));
          const float* row = p.inputs[0].data() + size_t(p.rows.back()) * d;
          rows_of_a.insert(rows_of_a.end(), row, row + d);
        }
      else
        rows_of_a = wide(p.inputs[0]);
      const uint32_t m = p.rows.empty() ? a : kCheckedRows;
      std::vector<double> out(size_t(m) * b);
      ref::matmul<double>(rows_of_a, wide(p.inputs[1]), out, {.M = m, .N = b, .K = d});
      p.outputs = {narrow(out)};
      break;
    }
    case Op::LinearForward: {
      p.inputs = {random_values(size_t(a) * b, 1), random_values(size_t(d) * b, 2), random_values(d, 3)};
      std::vector<double> y(size_t(a) * d);
      ref::linear_forward<double>(wide(p.inputs[0]), wide(p.inputs[1]), wide(p.inputs[2]), y, a, b, d);
      p.outputs = {narrow(y)};
      break;
    }
    case Op::LinearBackwardData: {
      p.inputs = {random_values(size_t(a) * d, 1), random_values(size_t(d) * b, 2)};
      std::vector<double> dx(size_t(a) * b);
      ref::linear_backward_data<double>(wide(p.inputs[0]), wide(p.inputs[1]), dx, a, b, d);
      p.outputs = {narrow(dx)};
      break;
    }
    case Op::LinearBackwardWeight: {
      p.inputs = {random_values(size_t(a) * d, 1), random_values(size_t(a) * b, 2)};
      std::vector<double> dw(size_t(d) * b), db(d);
      ref::linear_backward_weight<double>(wide(p.inputs[0]), wide(p.inputs[1]), dw, db, a, b, d);
      p.outputs = {narrow(dw), narrow(db)};
      break;
    }
  }
  return p;
}

std::vector<size_t> output_sizes(const Case& c) {
  const size_t a = c.d0, b = c.d1, d = c.d2;
  switch (c.op) {
    case Op::Matmul: return {a * b};
    case Op::LinearForward: return {a * d};
    case Op::LinearBackwardData: return {a * b};
    case Op::LinearBackwardWeight: return {d * b, d};
  }
  return {};
}

void record(vk::Commands& cmd, const Case& c, const std::vector<vk::Buffer>& in,
            const std::vector<vk::Buffer>& out) {
  switch (c.op) {
    case Op::Matmul:
      ops::matmul(cmd, in[0], in[1], out[0],
                  {.M = c.d0, .N = c.d1, .K = c.d2, .a_format = c.format, .b_format = c.format, .tiling = c.tiling});
      break;
    case Op::LinearForward:
      ops::linear_forward(cmd, in[0], in[1], vk::View(in[2]), out[0], c.d0, c.d1, c.d2, c.tiling);
      break;
    case Op::LinearBackwardData:
      ops::linear_backward_data(cmd, in[0], in[1], out[0], c.d0, c.d1, c.d2, c.tiling);
      break;
    case Op::LinearBackwardWeight:
      ops::linear_backward_weight(cmd, in[0], in[1], out[0], vk::View(out[1]), c.d0, c.d1, c.d2,
                                  c.tiling);
      break;
  }
}

// The validation tolerance: fp32 sums of K products of values in [-1, 1], against double.
bool close(float got, float want, uint64_t k) {
  return std::abs(double(got) - want) <= 1e-6 * double(k) + 1e-4 * std::abs(double(want));
}

double gflops(const Case& c, double ms) {
  const auto [m, n, k] = c.mnk();
  return 2.0 * double(m) * double(n) * double(k) / (ms * 1e6);
}

// The tiling ops::matmul picks for the case when none is given, K split where it would be in a
// stage (a Linear's forward adds a bias, so it never is).
ops::MatmulTiling default_tiling(const vk::PhysicalInfo& info, const Case& c) {
  const auto [m, n, k] = c.mnk();
  ops::MatmulParams p{.M = uint32_t(m), .N = uint32_t(n), .K = uint32_t(k), .trans_a = c.trans_a(), .trans_b = c.trans_b()};
  p.a_format = p.b_format = c.format;
  return ops::default_tiling(info, p, c.op == Op::LinearForward, ops::matmul_workspace_bytes(info));
}

// The buffers of one shape's cases: its inputs as stored, its outputs, and a stage's workspace
// where products split K (ops/matmul_split.h).
struct ShapeBuffers {
  std::vector<vk::Buffer> in, out;
  std::optional<vk::Buffer> workspace;
  ShapeBuffers(vk::Device& dev, const Case& c, const Problem& problem) {
    for (size_t i = 0; i < problem.inputs.size(); ++i) {
      const std::vector<uint32_t> words = stored_words(problem.inputs[i], c.format);
      in.emplace_back(dev, words.size() * 4, vk::Category::Activations, "input " + std::to_string(i));
      vk::upload(in.back(), words.data(), words.size() * 4);
    }
    for (size_t n : output_sizes(c)) out.emplace_back(dev, n * 4, vk::Category::Activations, "output");
    if (const uint64_t bytes = ops::matmul_workspace_bytes(dev.info()))
      workspace.emplace(dev, bytes, vk::Category::Scratch, "products' workspace");
  }
  void attach(vk::Commands& cmd) const {
    if (workspace) cmd.set_workspace(vk::View(*workspace));
  }
};

// The case run once from zeroed outputs and checked against the reference (its speed left to
// time_cases).
Result check_case(vk::Device& dev, const Case& c, const Problem& problem, const ShapeBuffers& operands) {
  Result r{c, c.tiling ? c.tiling->name() : "default: " + default_tiling(dev.info(), c).name()};
  vk::Commands cmd(dev, "bench");
  operands.attach(cmd);
  for (auto& b : operands.out) cmd.fill(b, 0);
  record(cmd, c, operands.in, operands.out);
  cmd.run();
  r.valid = true;
  const bool ceiling = c.tiling && c.tiling->feed == ops::MatmulTiling::Feed::StageOnce;  // C wrong: not checked
  if (ceiling) r.max_err = NAN;
  for (size_t i = 0; i < operands.out.size() && !ceiling; ++i) {
    std::vector<float> got(operands.out[i].size() / 4);
    vk::download(operands.out[i], got.data(), got.size() * 4);
    const std::vector<float>& want = problem.outputs[i];
    const size_t width = problem.rows.empty() ? want.size() : want.size() / problem.rows.size();
    for (size_t j = 0; j < want.size(); ++j) {
      const size_t at = problem.rows.empty() ? j : problem.rows[j / width] * width + j % width;
      r.max_err = std::max(r.max_err, std::abs(double(got[at]) - want[j]));
      if (!close(got[at], want[j], c.mnk()[2]) || std::isnan(got[at])) r.valid = false;
    }
  }
  return r;
}

// The median time and GFLOPS of each valid result of one shape, its tilings timed in turn,
// `reps` rounds (alternated_ms): a change in the device's clock falls on all of them alike.
void time_cases(vk::Device& dev, const ShapeBuffers& operands, std::span<Result> results, int reps) {
  std::vector<Result*> timed;
  for (Result& r : results)
    if (r.valid) timed.push_back(&r);
  if (timed.empty()) return;
  vk::Commands cmd(dev, "bench");
  operands.attach(cmd);
  const auto record_run = [&](vk::Commands& to, size_t run, size_t) { record(to, timed[run]->c, operands.in, operands.out); };
  const std::vector<std::vector<double>> ms = alternated_ms(cmd, timed.size(), 1, reps, record_run);
  for (size_t i = 0; i < timed.size(); ++i) {
    timed[i]->median_ms = ms[i][0];
    timed[i]->gflops = gflops(timed[i]->c, ms[i][0]);
  }
}

// The Linear layers of the presets (DESIGN.md): forward and both backward passes.
std::vector<Case> preset_cases() {
  struct Layer {
    std::string name;
    uint32_t n, in, out;
  };
  const Layer layers[] = {
      {"fashion-mlp fc1", 64, 784, 256},      {"fashion-mlp fc2", 64, 256, 128},
      {"fashion-mlp fc3", 64, 128, 10},       {"gpt-mini c_attn", 8 * 128, 128, 384},
      {"gpt-mini attn c_proj", 8 * 128, 128, 128}, {"gpt-mini mlp c_fc", 8 * 128, 128, 512},
      {"gpt-mini mlp c_proj", 8 * 128, 512, 128},
  };
  std::vector<Case> cases;
  for (const Layer& l : layers)
    for (Op op : {Op::LinearForward, Op::LinearBackwardData, Op::LinearBackwardWeight})
      cases.push_back({l.name + " " + std::to_string(l.in) + "->" + std::to_string(l.out), op, l.n,
                       l.in, l.out, std::nullopt});
  return cases;
}

void run_kernels(const std::string& device_spec, const std::vector<uint32_t>& squares, int reps, bool json,
                 bool compare, const std::string& precision) {
  if (reps < 1 || reps > 500) throw UserError("--reps must be between 1 and 500, got " + std::to_string(reps));
  vk::Instance instance;
  const uint32_t device_index = instance.find_device(device_spec, "--device");
  vk::Device dev(instance, device_index, {.label = "bench"});
  const vk::PhysicalInfo& info = dev.info();
  const ops::Precision format = bench_precision(precision, info);
  if (!info.timestamps) throw UserError(dev.label() + ": its compute queue has no timestamps to time kernels with");

  // Square problems under every candidate tiling; the presets' shapes under the default,
  // or under every candidate too when comparing.
  std::vector<Case> cases;
  const auto tilings = ops::candidate_tilings(info, format);
  for (uint32_t n : squares)
    for (const auto& t : tilings) cases.push_back({"square " + std::to_string(n) + "^3", Op::Matmul, n, n, n, t, format});
  for (Case c : preset_cases()) {
    if (format != ops::Precision::Fp32) {  // 16-bit: the product each pass amounts to
      const auto [m, n, k] = c.mnk();
      c = {c.name + " " + op_name(c.op), Op::Matmul, uint32_t(m), uint32_t(n), uint32_t(k), std::nullopt, format};
    }
    if (!compare) {
      cases.push_back(c);
      continue;
    }
    for (const auto& t : tilings) {
      if (t && t->feed != ops::MatmulTiling::Feed::Staged) continue;  // measurements on square blocks only
      cases.push_back(c);
      cases.back().tiling = t;
    }
  }

  // The cases of one shape and op (consecutive) share their reference, their operands and their
  // timing rounds; OpenBLAS is timed on the shape right after them.
  const BlasPeer peer;
  std::vector<Result> results;
  for (size_t first = 0; first < cases.size();) {
    const auto key = [&](const Case& c) { return std::tuple(c.op, c.format, c.d0, c.d1, c.d2); };
    size_t end = first + 1;
    while (end < cases.size() && key(cases[end]) == key(cases[first])) ++end;
    const Problem problem = make_problem(cases[first]);
    const ShapeBuffers operands(dev, cases[first], problem);
    for (size_t i = first; i < end; ++i) {
      results.push_back(check_case(dev, cases[i], problem, operands));
      if (!json) std::fprintf(stderr, "  %s %s: %s\n", cases[i].name.c_str(), op_name(cases[i].op),
                              results.back().valid ? "ok" : "WRONG");
    }
    time_cases(dev, operands, std::span(results).subspan(results.size() - (end - first)), reps);
    if (peer.found()) {
      const Case& c = cases[first];
      const auto [m, n, k] = c.mnk();
      const double peer_gflops = gflops(c, peer.median_ms(m, n, k, c.trans_a(), c.trans_b(), reps));
      for (size_t i = results.size() - (end - first); i < results.size(); ++i) results[i].peer_gflops = peer_gflops;
    }
    first = end;
  }

  const size_t wrong = std::count_if(results.begin(), results.end(), [](auto& r) { return !r.valid; });
  // With --compare: the time of all the presets' passes under each tiling, the figure the
  // default is chosen by.
  std::vector<std::pair<std::string, double>> totals;
  for (const Result& r : results) {
    if (r.c.op == Op::Matmul || !compare) continue;
    const std::string label = r.c.tiling ? r.tiling : "default";
    auto it = std::find_if(totals.begin(), totals.end(), [&](auto& t) { return t.first == label; });
    if (it == totals.end()) it = totals.insert(totals.end(), {label, 0.0});
    it->second += r.valid ? r.median_ms : NAN;
  }
  const std::string device = info.name + " (" + info.type_name() + "), " + info.driver_name + " " +
                             info.driver_version_string() + " (" + info.driver_info + ")";
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (auto& r : results) {
      const auto [m, n, k] = r.c.mnk();
      nlohmann::json row = {{"case", r.c.name}, {"op", op_name(r.c.op)}, {"M", m}, {"N", n}, {"K", k},
                            {"tiling", r.tiling}, {"valid", r.valid}, {"max_abs_error", r.max_err}};
      if (r.valid) row["median_ms"] = r.median_ms, row["gflops"] = r.gflops;
      if (peer.found()) row["openblas_gflops"] = r.peer_gflops;
      if (peer.found() && r.valid) row["ratio_to_openblas"] = r.gflops / r.peer_gflops;
      rows.push_back(row);
    }
    nlohmann::json out{{"device", device}, {"device_index", device_index}, {"precision", ops::precision_name(format)}, {"reps", reps},
                       {"peer", peer.description()},
                       {"default_tiling", ops::matmul_tiling(info).name()}, {"results", rows}};
    for (auto& [tiling, ms] : totals) out["preset_total_ms"][tiling] = ms;
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("device %u: %s\ndefault matmul tiling: %s\nmedian of %d repetitions (GPU timestamps)\n"
                "peer: %s, median of %d calls (wall clock)\n\n",
                device_index, device.c_str(), ops::matmul_tiling(info).name().c_str(), reps,
                peer.description().c_str(), reps);
    std::vector<std::vector<std::string>> rows = {{"case", "op", "MxNxK", "tiling", "median ms",
                                                   "GFLOPS", "OpenBLAS GFLOPS", "ratio", "max |err|"}};
    for (auto& r : results)
      rows.push_back({r.c.name, op_name(r.c.op), r.c.shape(), r.tiling,
                      r.valid ? fixed(r.median_ms, 3) : "-", r.valid ? fixed(r.gflops, 2) : "WRONG",
                      peer.found() ? fixed(r.peer_gflops, 2) : "-",
                      peer.found() && r.valid ? fixed(r.gflops / r.peer_gflops, 2) : "-",
                      fixed(r.max_err, 7)});
    print_table(rows);
    if (!totals.empty()) {
      std::printf("\nall the presets' passes above, summed per tiling\n");
      rows = {{"tiling", "total ms"}};
      for (auto& [tiling, ms] : totals) rows.push_back({tiling, fixed(ms, 2)});
      print_table(rows);
    }
  }
  if (wrong)
    throw vk::VulkanError(std::to_string(wrong) + " kernel case(s) disagree with the CPU reference; "
                          "no speed is reported for them", VK_ERROR_UNKNOWN);
}

}  // namespace

void add_bench_kernels(CLI::App& bench) {
  auto* kernels = bench.add_subcommand(
      "kernels", "Matmul and Linear GFLOPS: square problems and the presets' Linear shapes, each "
                 "checked against the CPU reference first");
  struct Options {
    std::string device = "0";
    std::vector<uint32_t> squares = {256, 1024};
    int reps = 9;
    bool json = false;
    bool compare = false;
    std::string precision = "fp32";
  };
  auto opt = std::make_shared<Options>();
  kernels->add_option("--device", opt->device, "device from `brigade devices`: index, part of its name or a UUID prefix")->capture_default_str();
  kernels->add_option("--square", opt->squares,
                      "sizes n of the square n^3 products (past 1024, checked on 64 rows of C)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  kernels->add_option("--reps", opt->reps, "Timed repetitions per case (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  kernels->add_flag("--json", opt->json, "Print JSON instead of a table");
  kernels->add_flag("--compare", opt->compare,
                    "Time the presets' shapes under every candidate tiling, not just the default");
  kernels->add_option("--precision", opt->precision,
                      "how A and B are stored: fp32, or bf16 or fp16 (their products on the device's "
                      "matrix units where it lists the type; the Linear shapes as plain products), or "
                      "auto: what `train --precision auto` stores in on the device")
      ->capture_default_str();
  kernels->callback([opt] {
    run_kernels(opt->device, opt->squares, opt->reps, opt->json, opt->compare, opt->precision);
  });
}

}  // namespace brigade::cli
