// `brigade bench attention`: flash attention on matrix tiles (ops/attention_tiles.h), its
// forward and its backward's two passes, on attention shapes (B samples of T tokens, C channels in NH heads),
// under the device's default attention tiling and every other block it can hold: up to 1 to 8
// warps of query (or key) rows a workgroup, each pass taking the most its shared memory allows,
// and blocks of 1 to 8 matrices' width on the other side. Each tiling's y, lse and gradient are
// checked against the default's first; then all are timed in turn, alternated, so that a change
// in the device's speed falls on all of them alike. What it shows: which blocks to make the
// default, by measurement. Where the device has no matrix tiles for the type, the same kernels
// run their tile operations on plain invocations, as the tests run them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_tilings.h"
#include "checks.h"
#include "commands.h"
#include "ops/attention_tiles.h"
#include "ops/matmul_tiles.h"
#include "table.h"
#include "util/error.h"
#include "util/units.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/device.h"
#include "vk/instance.h"

namespace brigade::cli {
namespace bench_attention {
namespace {

using ops::AttentionTiling;
using ops::Precision;
using ops::TilesPass;

struct Options {
  std::string device = "0";
  std::vector<std::string> shapes = {"16x1024x768x12"};  // gpt2-small's at -b 16
  std::string precision = "bf16";
  std::vector<uint32_t> warps = {1, 2, 4, 8};
  std::vector<uint32_t> blocks = {1, 2, 4, 8};
  int reps = 5;
  bool json = false;
};

struct Shape {
  uint32_t B = 0, T = 0, C = 0, NH = 0;
  std::string name() const {
    return std::to_string(B) + "x" + std::to_string(T) + "x" + std::to_string(C) + "x" + std::to_string(NH);
  }
  // The products' multiply-adds times two, the causal half: QK^T and PV forward; the backward
  // recomputes QK^T and makes dP, dV, dQ and dK.
  double forward_flops() const { return 2.0 * 2 * B * NH * double(T) * T * (C / NH) / 2; }
  double backward_flops() const { return 2.5 * forward_flops(); }
};

Shape parse_shape(const std::string& text) {
  const std::string expected =
      "--shape " + text + ": expected BxTxCxNH, four whole numbers above 0 (samples, tokens, channels, heads); ";
  std::vector<uint32_t> v;
  static const char* const kPart[] = {"B", "T", "C", "NH"};
  for (size_t start = 0;;) {
    const size_t x = std::min(text.find('x', start), text.size());
    if (v.size() == 4) throw UserError(expected + "it has more than four parts");
    const std::string part = text.substr(start, x - start);
    const auto n = parse_uint_list(part);
    if (!n || n->size() != 1 || n->front() == 0)
      throw UserError(expected + kPart[v.size()] + " '" + part + "' is not one");
    v.push_back(n->front());
    if (x == text.size()) break;
    start = x + 1;
  }
  if (v.size() != 4) throw UserError(expected + "it has " + std::to_string(v.size()) + " parts");
  const Shape s{v[0], v[1], v[2], v[3]};
  if (s.C % s.NH) throw UserError("--shape " + text + ": C (" + std::to_string(s.C) + ") is not a multiple of NH");
  return s;
}

// A tiling and the warps each pass takes under it (forward, queries', keys' and values').
struct Candidate {
  AttentionTiling t;
  std::array<uint32_t, 3> warps{};
  std::string name() const {
    return (t.emulated ? "plain " : "matrix units ") + std::to_string(t.lm) + "x" + std::to_string(t.ln) + "x" +
           std::to_string(t.lk) + ", " + std::to_string(warps[0]) + "/" + std::to_string(warps[1]) + "/" +
           std::to_string(warps[2]) + " warps of " + std::to_string(t.lanes) + ", blocks of " + ops::per_pass(t.bc);
  }
};

std::optional<Candidate> candidate(const vk::PhysicalInfo& info, const AttentionTiling& t, uint32_t HS) {
  if (HS % ops::heads_multiple(t)) return std::nullopt;
  for (uint32_t rows : t.bc)
    if (rows % t.ln || rows % t.lk) return std::nullopt;
  Candidate c{t, {}};
  for (size_t i = 0; i < 3; ++i) {
    c.warps[i] = t.warps_for(HS, TilesPass(i), info.max_shared_memory);
    if (!c.warps[i] || c.warps[i] * t.lanes > info.max_workgroup_invocations) return std::nullopt;
  }
  return c;
}

// The default first, then each warps x blocks the device holds, one of each distinct (warps of
// every pass, blocks).
std::vector<Candidate> candidates(const vk::PhysicalInfo& info, const Candidate& by_default, uint32_t HS,
                                  const Options& o) {
  std::vector<Candidate> out{by_default};
  for (uint32_t w : o.warps)
    for (uint32_t b : o.blocks) {
      AttentionTiling t = by_default.t;
      t.set_blocks(w, b * std::max(t.ln, t.lk));
      const auto c = candidate(info, t, HS);
      if (c && std::none_of(out.begin(), out.end(), [&](const Candidate& d) { return d.name() == c->name(); }))
        out.push_back(*c);
    }
  return out;
}

// The tensors of one shape: qkv in 16 bits, dy, and what the passes write.
struct Tensors {
  vk::Buffer qkv, y, lse, dy, dqkv, delta;
  Tensors(vk::Device& dev, const Shape& s, Precision p)
      : qkv(dev, ops::stored_bytes(uint64_t(s.B) * s.T * 3 * s.C, p), vk::Category::Activations, "qkv"),
        y(dev, ops::stored_bytes(uint64_t(s.B) * s.T * s.C, p), vk::Category::Activations, "y"),
        lse(dev, uint64_t(s.B) * s.T * s.NH * 4, vk::Category::Activations, "lse"),
        dy(dev, uint64_t(s.B) * s.T * s.C * 4, vk::Category::Activations, "dy"),
        dqkv(dev, uint64_t(s.B) * s.T * 3 * s.C * 4, vk::Category::Activations, "dqkv"),
        delta(dev, uint64_t(s.B) * s.T * s.NH * 4, vk::Category::Scratch, "delta") {
    const std::vector<uint32_t> q = stored_words(random_values(uint64_t(s.B) * s.T * 3 * s.C, 1), p);
    vk::upload(qkv, q.data(), qkv.size());
    const std::vector<float> g = random_values(uint64_t(s.B) * s.T * s.C, 2);
    vk::upload(dy, g.data(), dy.size());
  }
  void forward(vk::Commands& cmd, const AttentionTiling& t, const Shape& s, Precision p) {
    ops::attention_tiles_forward(cmd, t, qkv, y, lse, s.B, s.T, s.C, s.NH, p);
  }
  // Both passes, or `only` one.
  void backward(vk::Commands& cmd, const AttentionTiling& t, const Shape& s, Precision p,
                std::optional<TilesPass> only = std::nullopt) {
    ops::attention_tiles_backward(cmd, t, qkv, y, lse, dy, dqkv, delta, s.B, s.T, s.C, s.NH, p, std::nullopt, only);
  }
};

struct Outputs {
  std::vector<float> y, lse, dqkv;
};

Outputs run_once(vk::Device& dev, Tensors& x, const AttentionTiling& t, const Shape& s, Precision p) {
  vk::Commands cmd(dev, "bench attention");
  x.forward(cmd, t, s, p);
  x.backward(cmd, t, s, p);
  cmd.run();
  Outputs o;
  std::vector<uint32_t> words(x.y.size() / 4);
  vk::download(x.y, words.data(), x.y.size());
  o.y.resize(uint64_t(s.B) * s.T * s.C);
  ops::unpack_on_host(words, o.y, p);
  o.lse.resize(x.lse.size() / 4), o.dqkv.resize(x.dqkv.size() / 4);
  vk::download(x.lse, o.lse.data(), x.lse.size());
  vk::download(x.dqkv, o.dqkv.data(), x.dqkv.size());
  return o;
}

// How far `got` lies from the default's outputs, as a share of what the kernels' rounding
// allows (tests/kernels/attention_tiles_test.cpp's bounds, each side): y within 6u of the
// largest |v| (1 here), lse within 2e-5 relative, the gradient within 8u of its largest (u:
// the type's unit roundoff). At most 1 agrees; NaN on one side only is infinite.
double disagreement(const Outputs& got, const Outputs& want, Precision p) {
  const double u = p == Precision::Bf16 ? 0x1p-8 : 0x1p-11;
  double largest = 0;
  for (float g : want.dqkv) largest = std::max(largest, double(std::abs(g)));
  double worst = 0;
  const auto over = [&](const std::vector<float>& a, const std::vector<float>& b, auto allowed) -> double {
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
      if (!std::isnan(a[i])) worst = std::max(worst, std::abs(double(a[i]) - b[i]) / allowed(double(b[i])));
    }
    return worst;
  };
  if (std::isinf(over(got.y, want.y, [&](double) { return 6 * u; }))) return INFINITY;
  if (std::isinf(over(got.lse, want.lse, [](double w) { return 2e-5 * (1 + std::abs(w)); }))) return INFINITY;
  return over(got.dqkv, want.dqkv, [&](double) { return 8 * u * std::max(largest, 1e-30); });
}

struct Timed {
  Candidate c;
  double forward_ms = NAN, query_ms = NAN, key_value_ms = NAN, disagreement = 0;
  double backward_ms() const { return query_ms + key_value_ms; }
  double step_ms() const { return forward_ms + backward_ms(); }
};

// Each candidate's three passes, alternated.
void time_all(vk::Device& dev, Tensors& x, std::vector<Timed>& all, const Shape& s, Precision p, int reps) {
  vk::Commands cmd(dev, "bench attention");
  const auto ms = alternated_ms(cmd, all.size(), 3, reps, [&](vk::Commands& c, size_t i, size_t part) {
    if (part == 0)
      x.forward(c, all[i].c.t, s, p);
    else
      x.backward(c, all[i].c.t, s, p, part == 1 ? TilesPass::Query : TilesPass::KeyValue);
  });
  for (size_t i = 0; i < all.size(); ++i)
    all[i].forward_ms = ms[i][0], all[i].query_ms = ms[i][1], all[i].key_value_ms = ms[i][2];
}

// Each pass's fastest tiling of those that agreed, and their sum against the default's step:
// whether blocks of their own for each pass would gain over the best one tiling.
std::string fastest_each_pass(const std::vector<Timed>& all) {
  const char* names[] = {"forward", "queries'", "keys'"};
  const auto ms = [](const Timed& t, int pass) { return pass == 0 ? t.forward_ms : pass == 1 ? t.query_ms : t.key_value_ms; };
  std::string out = "fastest of each pass:";
  double sum = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const Timed* best = &all.front();
    for (const Timed& t : all)
      if (t.disagreement <= 1 && ms(t, pass) < ms(*best, pass)) best = &t;
    sum += ms(*best, pass);
    out += std::string(pass ? "; " : " ") + names[pass] + " " + fixed(ms(*best, pass), 3) + " ms (" + best->c.name() + ")";
  }
  return out + "; together " + fixed(sum, 3) + " ms, " + fixed(sum / all.front().step_ms(), 2) + "x the default's step";
}

// The tiling flash attention takes on the device by default, or where it has none for the type,
// the same kernels on plain invocations in 8x8x8 matrices in warps of its subgroup, in the
// default blocks (BRIGADE_ATTENTION_BLOCKS's where set).
AttentionTiling base_tiling(const vk::PhysicalInfo& info, Precision p, uint32_t HS, std::string& why) {
  if (const auto t = ops::attention_tiling(info, p, HS)) return *t;
  if (const auto m = ops::default_matrix_tiling(info, p))
    why = "its matrix tiles take heads in multiples of " + std::to_string(ops::heads_multiple(ops::attention_tiling(*m))) +
          " whose passes fit its shared memory";
  else
    why = ops::matrix_path(info, p);
  AttentionTiling t = ops::attention_tiling(ops::emulated_matrix_tiling(8, 8, 8, info.subgroup_size));
  t.emulated = true;
  return t;
}

void run(const Options& o) {
  std::vector<Shape> shapes;
  for (const std::string& text : o.shapes) shapes.push_back(parse_shape(text));
  vk::Instance instance;
  vk::Device dev(instance, instance.find_device(o.device, "--device"), {.label = "bench"});
  const vk::PhysicalInfo& info = dev.info();
  const Precision p = bench_precision(o.precision, info);  // auto: always 16 bits
  if (!ops::is_half(p))
    throw UserError("--precision " + o.precision + ": flash attention on matrix tiles reads 16-bit qkv (bf16, fp16 or auto)");
  if (!info.timestamps) throw UserError(dev.label() + ": its compute queue has no timestamps to time kernels with");

  nlohmann::json j{{"device", info.name}, {"precision", ops::precision_name(p)}, {"reps", o.reps},
                   {"shapes", nlohmann::json::array()}};
  size_t wrong = 0;
  for (const Shape& s : shapes) {
    const uint32_t HS = s.C / s.NH;
    std::string plain;
    const AttentionTiling base = base_tiling(info, p, HS, plain);
    // Brigade never runs these kernels there, and its compiler takes minutes over their plain
    // build (docs/TESTING.md).
    if (!plain.empty() && info.driver_id == VK_DRIVER_ID_GOOGLE_SWIFTSHADER)
      throw UserError(dev.label() + ": SwiftShader has no matrix units, so Brigade never runs flash attention on "
                      "matrix tiles there, and its compiler takes minutes over their plain build; try lavapipe");
    if (!plain.empty() && !o.json)
      std::fprintf(stderr, "%s: no flash attention on matrix tiles for %s heads of %u (%s); the kernels on plain invocations\n",
                  dev.label().c_str(), ops::precision_name(p), HS, plain.c_str());
    if (HS % ops::heads_multiple(base))
      throw UserError("attention " + s.name() + ": no tiling of " + dev.label() + " takes heads of " +
                      std::to_string(HS) + " (multiples of " + std::to_string(ops::heads_multiple(base)) + ")");
    const std::optional<Candidate> by_default = candidate(info, base, HS);  // the others' reference
    if (!by_default)
      throw UserError("attention " + s.name() + ": the default tiling (" + base.name() + ") does not fit " +
                      dev.label() + "'s shared memory or workgroups for heads of " + std::to_string(HS) +
                      " (BRIGADE_ATTENTION_BLOCKS?)");
    std::vector<Timed> all;
    for (const Candidate& c : candidates(info, *by_default, HS, o)) all.push_back({c});
    if (!o.json)
      std::fprintf(stderr, "attention %s: %zu tilings, each run and checked against the default, then all timed in turn\n",
                   s.name().c_str(), all.size());
    Tensors x(dev, s, p);
    const Outputs want = run_once(dev, x, all.front().c.t, s, p);
    for (size_t i = 1; i < all.size(); ++i) {
      all[i].disagreement = disagreement(run_once(dev, x, all[i].c.t, s, p), want, p);
      if (all[i].disagreement > 1) {
        ++wrong;
        if (!o.json)
          std::fprintf(stderr, "  %s: %s disagrees with the default (%s)\n", s.name().c_str(), all[i].c.name().c_str(),
                       std::isfinite(all[i].disagreement) ? (fixed(all[i].disagreement, 2) + "x the difference allowed").c_str()
                                                          : "NaN on one side only");
      }
    }
    time_all(dev, x, all, s, p, o.reps);

    const double def = all.front().step_ms();
    nlohmann::json js{{"shape", s.name()}, {"plain", !plain.empty()}, {"tilings", nlohmann::json::array()}};
    std::vector<std::vector<std::string>> t{
        {"tiling", "forward ms", "queries' ms", "keys' ms", "step ms", "GFLOPS", "of default"}};
    for (size_t i = 0; i < all.size(); ++i) {
      const Timed& a = all[i];
      const double gflops = (s.forward_flops() + s.backward_flops()) / (a.step_ms() * 1e6);
      const bool agrees = a.disagreement <= 1;
      t.push_back({(i == 0 ? "default: " : "") + a.c.name() + (agrees ? "" : " (disagrees)"), fixed(a.forward_ms, 3),
                   fixed(a.query_ms, 3), fixed(a.key_value_ms, 3), fixed(a.step_ms(), 3), fixed(gflops, 1),
                   fixed(a.step_ms() / def, 2)});
      js["tilings"].push_back({{"tiling", a.c.name()}, {"warps", a.c.warps}, {"up_to_warps", a.c.t.warps}, {"blocks", a.c.t.bc},
                               {"forward_ms", a.forward_ms}, {"query_ms", a.query_ms}, {"key_value_ms", a.key_value_ms},
                               {"backward_ms", a.backward_ms()},
                               {"disagreement", a.disagreement}, {"default", i == 0}});
    }
    j["shapes"].push_back(std::move(js));
    if (!o.json) {
      std::printf("attention %s (B x T x C x NH) in %s on %s: flash attention on matrix tiles, forward and backward, "
                  "median of %d runs, the tilings in turn; the backward's queries' pass, then its keys' and values'; warps "
                  "a workgroup in the forward/queries'/keys' passes\n",
                  s.name().c_str(), ops::precision_name(p), dev.label().c_str(), o.reps);
      print_table(t);
      std::printf("%s\n", fastest_each_pass(all).c_str());
    }
  }
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  if (wrong)
    throw vk::VulkanError(std::to_string(wrong) + " attention tiling(s) disagree with the default" +
                              (o.json ? std::string(" (each tiling's disagreement says by how much)") : " (listed above)"),
                          VK_ERROR_UNKNOWN);
}

}  // namespace
}  // namespace bench_attention

void add_bench_attention(CLI::App& bench) {
  auto o = std::make_shared<bench_attention::Options>();
  CLI::App* cmd = bench.add_subcommand(
      "attention", "Flash attention on matrix tiles, forward and backward, under the device's default blocks and "
                   "every other it holds, each checked against the default first: which blocks are fastest");
  cmd->add_option("--device", o->device, "device from `brigade devices`: index, part of its name or a UUID prefix")
      ->capture_default_str();
  cmd->add_option("--shape", o->shapes,
                  "BxTxCxNH: samples, tokens, channels and heads (gpt2-small at -b 16: 16x1024x768x12; gpt-small: "
                  "16x256x384x6; gpt-mini: 8x128x128x4)")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision, "how qkv and y are stored: bf16 or fp16, or auto: what `train --precision auto` stores in on the device")->capture_default_str();
  cmd->add_option("--warps", o->warps, "warps of rows a workgroup to try, at most (each pass takes what fits)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1u, 32u));
  cmd->add_option("--blocks", o->blocks, "the other side's blocks to try, in matrices' widths")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1u, 32u));
  cmd->add_option("--reps", o->reps, "timed runs of each tiling (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  cmd->callback([o] { bench_attention::run(*o); });
}

}  // namespace brigade::cli
