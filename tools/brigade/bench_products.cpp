// `brigade bench products`: every matrix product of one micro-batch of a model, forward and
// backward (the micro-batch `bench profile` times), each timed alone under its default tiling
// and under every candidate tiling of the device (`bench kernels --compare`'s, and a split K's
// parts where the product can split), on buffers laid out as the step's were. Each candidate's
// C is checked against the default's first. What it shows: for each shape, whether its default
// is its fastest, and what the micro-batch's products would take with each shape's fastest.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_tilings.h"
#include "checks.h"
#include "commands.h"
#include "io/cache_file.h"
#include "ops/matmul_candidates.h"
#include "ops/matmul_split.h"
#include "ops/product_capture.h"
#include "ops/tuned_tilings.h"
#include "pipeline/profile.h"
#include "pipeline_flags.h"
#include "product_check.h"
#include "product_operands.h"
#include "table.h"
#include "util/error.h"
#include "vk/buffer.h"

namespace brigade::cli {
namespace bench_products {
namespace {

using ops::MatmulParams;
using ops::MatmulTiling;

struct Options : ModelPipeline {
  int reps = 5;
  uint32_t top = 0;  // candidates for this many shapes, the most of the step's time first; 0: all
  bool json = false;
  bool save = false;      // keep the tilings that beat their defaults (ops/tuned_tilings.h)
  double min_gain = 3;    // by this many percent of the default's time at least

};

// A product as the table names it: "8192x512x128 B^T (GELU, bias)".
std::string named(const ops::CapturedProduct& c) {
  const std::string d = ops::product_details(c);
  return ops::product_name(c.params) + (d.empty() ? "" : " (" + d + ")");
}

struct Shape {
  ops::CapturedProduct product;
  uint32_t count = 0;
};

// The micro-batch's products, each distinct one once with how often it came. profile_model
// records the micro-batch twice (a warm-up, then the timed run): the two halves are the same.
std::vector<Shape> capture_products(vk::Device& dev, const model::Model& m, uint32_t rows, ops::Precision precision,
                                    uint32_t& total) {
  ops::ProductCapture capture;
  pipeline::profile_model(dev, m, rows, 1, false, precision);
  const std::vector<ops::CapturedProduct>& all = capture.products();
  const size_t half = all.size() / 2;
  BRIGADE_EXPECT(all.size() % 2 == 0, "the warm-up and the timed run record the same products");
  for (size_t i = 0; i < half; ++i) BRIGADE_EXPECT(ops::product_key(all[i]) == ops::product_key(all[half + i]), "the same products twice");
  std::vector<Shape> shapes;
  std::vector<std::string> keys;
  for (size_t i = 0; i < half; ++i) {
    const std::string k = ops::product_key(all[i]);
    const auto it = std::find(keys.begin(), keys.end(), k);
    if (it != keys.end()) {
      shapes[size_t(it - keys.begin())].count++;
      continue;
    }
    keys.push_back(k);
    shapes.push_back({all[i], 1});
  }
  total = uint32_t(half);
  return shapes;
}

// The median GPU time of one run of each of `runs` (the product under its tilings), alternated.
std::vector<double> products_ms(vk::Device& dev, const Operands& o, const std::vector<MatmulParams>& runs,
                                std::optional<vk::View> workspace, int reps) {
  vk::Commands cmd(dev, "bench products");
  cmd.set_workspace(workspace);
  std::vector<double> out;
  for (const std::vector<double>& ms : alternated_ms(cmd, runs.size(), 1, reps,
                                                     [&](vk::Commands& c, size_t i, size_t) { o.record(c, runs[i]); }))
    out.push_back(ms[0]);
  return out;
}

// The tiling ops::matmul takes for the product.
MatmulTiling default_tiling(const vk::PhysicalInfo& info, const ops::CapturedProduct& c, uint64_t workspace) {
  const MatmulParams& p = c.params;
  return p.tiling ? *p.tiling : ops::default_tiling(info, p, c.bias || c.epilogue || c.copy, workspace);
}

struct Timed {
  std::string tiling;
  double ms = NAN;           // NAN: not run
  Disagreement check;       // with the default's C (product_check.h)
  // Where they lie farther apart than IEEE sums would: the worst element summed in double, and
  // how far the tiling and the default lie from the double sums of it and of the farthest
  // element, as shares of what fp32 sums can be off (at most 1: both right).
  Summed summed;
  double tiling_off = NAN, default_off = NAN;
  std::string not_run;       // why it does not compute this product
  bool agrees() const { return check.share <= 1 || (tiling_off <= 1 && default_off <= 1); }
};

struct Row {
  Shape shape;
  Timed by_default;
  std::vector<Timed> others;
  std::string saved;  // the tiling --save kept for it ("" none)
  double again = NAN;  // --save: the best other's time over the default's, timed again the two alone
  // The fastest of the other tilings that computed the product and agreed with the default.
  const Timed* best_other() const {
    const Timed* best = nullptr;
    for (const Timed& t : others)
      if (t.not_run.empty() && t.agrees() && (!best || t.ms < best->ms)) best = &t;
    return best;
  }
  // The default, or the best other where it was faster.
  const Timed& fastest() const {
    const Timed* best = best_other();
    return best && best->ms < by_default.ms ? *best : by_default;
  }
};

// The product under its default and (with `others`) every candidate tiling. Where the best of
// them took at most `recheck` of the default's time, the two are timed again alone, so that a
// tiling is kept (--save) only for a gain seen twice.
Row measure(vk::Device& dev, const Shape& s, std::optional<vk::View> workspace, int reps, bool others,
            double recheck = 0) {
  const vk::PhysicalInfo& info = dev.info();
  const uint64_t room = workspace ? workspace->range : 0;
  const MatmulTiling chosen = default_tiling(info, s.product, room);
  const Operands o(dev, s.product);
  const MatmulParams& p = s.product.params;
  const std::vector<MatmulTiling> tilings = others ? ops::product_candidates(info, s.product, chosen, room) : std::vector<MatmulTiling>{};
  Row row{s, {"default: " + chosen.name()}, {}};
  row.others.reserve(tilings.size());
  // Each tiling run once and checked (its pipeline made), then all of them timed together.
  const std::vector<float> want = o.run_once(dev, p, workspace);
  std::optional<HostOperands> host;  // read back at the first disagreement
  std::vector<MatmulParams> runs{p};
  std::vector<Timed*> timed{&row.by_default};
  for (const MatmulTiling& t : tilings) {
    Timed& mine = row.others.emplace_back(Timed{t.name()});
    MatmulParams q = p;
    q.tiling = t;
    try {
      mine.check = disagreement(p, o.run_once(dev, q, workspace), want);
      if (mine.check.share > 1 && std::isfinite(mine.check.share)) {
        if (!host) host = o.host(p);
        const Element& worst = mine.check.worst;
        const Element& far = mine.check.farthest;
        mine.summed = summed_element(p, *host, worst);
        const Summed at_far = summed_element(p, *host, far);
        mine.tiling_off = std::max(off_by(worst.got, mine.summed), off_by(far.got, at_far));
        mine.default_off = std::max(off_by(worst.want, mine.summed), off_by(far.want, at_far));
      }
      runs.push_back(q);
      timed.push_back(&mine);
    } catch (const InternalError& e) {  // a tiling that cannot take this product: file:line and why
      mine.not_run = e.what();
    }
  }
  const std::vector<double> ms = products_ms(dev, o, runs, workspace, reps);
  for (size_t i = 0; i < ms.size(); ++i) timed[i]->ms = ms[i];
  if (const Timed* best = row.best_other(); best && best->ms <= row.by_default.ms * recheck) {
    MatmulParams q = p;
    q.tiling = tilings[size_t(best - row.others.data())];
    const std::vector<double> two = products_ms(dev, o, {p, q}, workspace, reps);
    row.again = two[1] / two[0];
  }
  return row;
}

// --save: for each shape timed under the other tilings, the fastest of them where it took at
// most (1 - min_gain / 100) of the default's time, among all of them and again timed alone
// beside the default (Row::again), kept in the cache as the device's tuned tiling for that
// product (a timed shape with none loses any it had); written as each shape is timed, so that
// a run stopped part way keeps what it measured.
class Saver {
 public:
  Saver(const vk::PhysicalInfo& info, double min_gain)
      : file_(ops::default_tiling_cache(), "tiling", "tilings"), device_(ops::tuned_device_key(info)),
        name_(info.name), min_gain_(min_gain) {
    if (file_.path().empty()) throw UserError("--save: no cache folder (set BRIGADE_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    if (!file_.warning().empty()) std::fprintf(stderr, "brigade: warning: %s\n", file_.warning().c_str());
    if (const nlohmann::json* had = file_.find(device_); had && had->is_object()) entry_ = *had;
    // A cache that cannot be written is refused before minutes of timing, not after.
    if (const std::string why = file_.save(); !why.empty()) throw UserError("--save: " + why);
  }
  double share() const { return 1 - min_gain_ / 100; }  // of the default's time, at most
  void add(Row& r) {
    const Timed* best = r.best_other();
    const std::string key = ops::product_key(r.shape.product);
    // `again` is measured only where the best other beat the default by the gain in turn.
    if (!best || !(r.again <= share())) {
      entry_.erase(key);
    } else {
      entry_[key] = {{"tiling", best->tiling}, {"ms", best->ms}, {"default_ms", r.by_default.ms}, {"again", r.again},
                     {"product", named(r.shape.product)}};
      r.saved = best->tiling;
      ++kept_;
    }
    file_.put(device_, entry_);
    if (error_.empty()) error_ = file_.save();  // the first failure kept, the timing goes on
  }
  // Why the cache could not be written part way ("" when it was).
  const std::string& error() const { return error_; }
  std::string summary() const {
    if (!error_.empty()) return "not saved: " + error_;
    return "saved " + std::to_string(kept_) + " tuned tiling(s) for " + name_ + " in " + file_.path() + " (" +
           std::to_string(entry_.size()) + " product(s) there for this device and build); later commands take "
           "them, --tilings default the built-in ones";
  }

 private:
  io::CacheFile file_;
  std::string device_, name_;
  double min_gain_;
  nlohmann::json entry_ = nlohmann::json::object();
  size_t kept_ = 0;
  std::string error_;
};

nlohmann::json candidate_json(const Timed& t) {
  nlohmann::json j{{"tiling", t.tiling}, {"ms", t.ms}, {"disagreement", t.check.share}, {"agrees", t.agrees()}};
  const auto known = [](double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); };
  if (t.check.share > 1)
    j["worst"] = {{"batch", t.check.worst.z}, {"row", t.check.worst.m}, {"column", t.check.worst.n},
                  {"value", t.check.worst.got}, {"default", t.check.worst.want}, {"double", known(t.summed.value)},
                  {"allowed", known(std::isnan(t.summed.value) ? NAN : t.summed.allowed)},
                  {"tiling_off", known(t.tiling_off)}, {"default_off", known(t.default_off)}};
  return j;
}

double gflops(const MatmulParams& p, double ms) { return ops::product_flops(p) / (ms * 1e6); }

void run(const Options& o) {
  const model::Model m = model::build(o.model, o.set);
  Pipeline p = open_pipeline(m, o.pipeline, o.batch, 2);
  const uint32_t rows = p.plan.micro_rows.front();
  vk::Device& dev = *p.devices.front();
  ops::use_tuned_tilings(dev.info(), {});  // measured against the built-in defaults, whatever was tuned
  std::optional<Saver> saver;
  if (o.save) saver.emplace(dev.info(), o.min_gain);
  const ops::Precision precision = p.precision.front();
  uint32_t total = 0;
  const std::vector<Shape> shapes = capture_products(dev, m, rows, precision, total);
  if (shapes.empty()) throw UserError(m.name + " records no matrix product on " + dev.label());
  // A GPU stage's workspace, where products split K (ops/matmul_split.h).
  std::optional<vk::Buffer> workspace;
  if (const uint64_t bytes = ops::matmul_workspace_bytes(dev.info()))
    workspace.emplace(dev, bytes, vk::Category::Scratch, "products' workspace");
  const std::optional<vk::View> room = workspace ? std::optional(vk::View(*workspace)) : std::nullopt;

  // With --top, every shape's default first, then the others for the shapes that take most of
  // the step under it.
  std::vector<Row> table;
  for (const Shape& s : shapes) table.push_back(o.top ? measure(dev, s, room, o.reps, false) : Row{s, {}, {}});
  std::vector<size_t> order(shapes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (o.top) {
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return table[x].shape.count * table[x].by_default.ms > table[y].shape.count * table[y].by_default.ms;
    });
    order.resize(std::min<size_t>(order.size(), o.top));
  }
  size_t wrong = 0;
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t i = order[n];
    table[i] = measure(dev, shapes[i], room, o.reps, true, saver ? saver->share() : 0);
    Row& r = table[i];
    if (saver) saver->add(r);
    if (!o.json)
      std::fprintf(stderr, "  %zu/%zu %s (%u in a step): default %.3f ms, fastest %.3f ms (%s)%s%s\n", n + 1,
                   order.size(), ops::product_name(r.shape.product.params).c_str(), r.shape.count, r.by_default.ms,
                   r.fastest().ms, r.fastest().tiling.c_str(),
                   std::isnan(r.again) ? "" : ("; timed again alone: " + fixed(r.again, 2) + "x the default's time").c_str(),
                   r.saved.empty() ? "" : ("; kept: " + r.saved).c_str());
    for (const Timed& t : r.others) {
      if (!t.not_run.empty() || t.check.share <= 1) continue;
      wrong += !t.agrees();
      if (!o.json)
        std::fprintf(stderr, "    %s: %s (%s)\n",
                     t.agrees() ? "differs from the default, both within what fp32 sums allow"
                                : "disagrees with the default",
                     t.tiling.c_str(),
                     explained(r.shape.product.params, t.check, t.summed, t.tiling_off, t.default_off).c_str());
    }
  }
  double by_default = 0, fastest = 0;
  for (const Row& r : table) by_default += r.shape.count * r.by_default.ms, fastest += r.shape.count * r.fastest().ms;
  const std::string saved = saver ? saver->summary() : "";

  if (o.json) {
    nlohmann::json j{{"model", m.name}, {"device", dev.info().name}, {"micro_batch_rows", rows},
                     {"precision", ops::precision_name(precision)}, {"reps", o.reps}, {"products", total},
                     {"top", o.top},
                     {"default_ms", by_default}, {"fastest_ms", fastest}, {"shapes", nlohmann::json::array()}};
    if (o.save) j["saved"] = saved;
    for (const Row& r : table) {
      const MatmulParams& q = r.shape.product.params;
      nlohmann::json s{{"shape", ops::product_name(q)}, {"details", ops::product_details(r.shape.product)}, {"count", r.shape.count},
                       {"flops", ops::product_flops(q)},
                       {"default", {{"tiling", r.by_default.tiling}, {"ms", r.by_default.ms}, {"gflops", gflops(q, r.by_default.ms)}}},
                       {"fastest", {{"tiling", r.fastest().tiling}, {"ms", r.fastest().ms}, {"gflops", gflops(q, r.fastest().ms)}}}};
      if (o.save) s["saved"] = r.saved.empty() ? nlohmann::json() : nlohmann::json(r.saved);
      if (!std::isnan(r.again)) s["again"] = r.again;
      for (const Timed& t : r.others)
        s["candidates"].push_back(t.not_run.empty() ? candidate_json(t) : nlohmann::json{{"tiling", t.tiling}, {"not_run", t.not_run}});
      j["shapes"].push_back(std::move(s));
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s on %s: the %u products of one micro-batch of %u rows in %s, forward and backward, in %zu "
                "shapes; each timed alone, median of %d runs, under its default tiling and every other that "
                "computes it, in turn%s\n",
                m.name.c_str(), dev.label().c_str(), total, rows, ops::precision_name(precision), shapes.size(), o.reps,
                o.top && o.top < shapes.size() ? (" (the others for the " + std::to_string(o.top) +
                                                 " shapes that take the most of the step)").c_str() : "");
    std::vector<std::vector<std::string>> t{
        {"product", "in a step", "default ms", "GFLOPS", "fastest", "ms", "GFLOPS", "of default"}};
    for (const Row& r : table) {
      const Timed& best = r.fastest();
      t.push_back({named(r.shape.product), std::to_string(r.shape.count),
                   fixed(r.by_default.ms, 3), fixed(gflops(r.shape.product.params, r.by_default.ms), 1),
                   r.others.empty() ? "-" : &best == &r.by_default ? "the default" : best.tiling, fixed(best.ms, 3),
                   fixed(gflops(r.shape.product.params, best.ms), 1), fixed(best.ms / r.by_default.ms, 2)});
    }
    print_table(t);
    std::printf("the micro-batch's products: %.2f ms under their default tilings, %.2f ms under each shape's "
                "fastest (%.2fx)\n", by_default, fastest, fastest / by_default);
    if (o.save) std::printf("%s\n", saved.c_str());
  }
  if (saver && !saver->error().empty()) throw UserError("--save: " + saver->error());
  if (wrong)
    throw vk::VulkanError(std::to_string(wrong) + " tiling(s) disagree with a product's default tiling" +
                              (o.json ? std::string(" (each shape's candidates say by how much)") : " (listed above)"),
                          VK_ERROR_UNKNOWN);
}

}  // namespace
}  // namespace bench_products

void add_bench_products(CLI::App& bench) {
  auto o = std::make_shared<bench_products::Options>();
  CLI::App* cmd = bench.add_subcommand(
      "products", "Every matrix product of a model's micro-batch timed alone, on the first stage's device, under "
                  "its default tiling and every other the device has: where a shape's default is not its fastest");
  add_model_pipeline_flags(*cmd, *o);
  cmd->add_option("--reps", o->reps, "timed runs of each product under each tiling (the median is reported)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--top", o->top,
                  "time the other tilings only for the N shapes that take the most of the step under their "
                  "defaults (0: every shape)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  cmd->add_flag("--save", o->save,
                "keep each timed shape's fastest other tiling, where it beats the default by --min-gain among all "
                "of them and again timed alone beside it, in the cache (tilings.json) as the device's tuned tiling "
                "for that product: every later command on the device takes it (--tilings default for the built-in "
                "ones)");
  cmd->add_option("--min-gain", o->min_gain,
                  "with --save: the percent of the default's time a tiling must save to be kept (negative: kept "
                  "even when slower by up to that much, to try the tuned path)")
      ->capture_default_str()
      ->check(CLI::Range(-1e6, 99.0));
  cmd->callback([o] { bench_products::run(*o); });
}

}  // namespace brigade::cli
