#include "auto_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "engine_words.h"
#include "ops/matmul_tiles.h"
#include "ops/tuned_tilings.h"
#include "pipeline/link.h"
#include "pipeline/planner.h"
#include "pipeline/profile.h"
#include "pipeline/profile_cache.h"
#include "ranks.h"
#include "table.h"
#include "util/error.h"
#include "util/stats.h"
#include "util/units.h"

namespace brigade::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string join(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string precisions_text(const std::vector<ops::Precision>& p) {
  std::string s;
  for (ops::Precision x : p) s += (s.empty() ? "" : ",") + std::string(ops::precision_name(x));
  return s;
}

// The precisions a stage on `info` may store in: those --precision fixes, else fp32 and what
// the device multiplies best (ops::auto_precision), fp32 first.
std::vector<ops::Precision> candidate_precisions(const PipelineFlags& f, ops::Precision multiplies) {
  if (!f.given("--precision")) return {ops::Precision::Fp32, multiplies};
  std::set<ops::Precision> fixed;
  for (const std::string& item : split_list(f.precision)) fixed.insert(item == "auto" ? multiplies : ops::parse_precision(item));
  return {fixed.begin(), fixed.end()};
}

struct Profiling {
  size_t measured = 0, cached = 0;
};

// Layer times on `dev` in precision `p` at every micro-batch size of `sizes`: the largest, the
// smallest and the one nearest their geometric middle profiled (or found in the cache), the
// others interpolated linearly in rows between their neighbours. Largest first: each profile
// takes as many timed runs as fit in about a second by the one before it, from 2 to 7.
// Not `training` (eval, sample): forward passes alone are profiled, kept under a key of their
// own; a training profile in the cache serves where no such one is.
std::map<uint32_t, pipeline::LayerTimes> profile_sizes(vk::Device& dev, const model::Model& m,
                                                       const std::set<uint32_t>& sizes, ops::Precision p,
                                                       bool training, pipeline::ProfileCache& cache,
                                                       Profiling& counts) {
  const size_t L = m.layers.size();
  const uint32_t small = *sizes.begin(), large = *sizes.rbegin();
  uint32_t middle = small;
  const double mid = std::sqrt(double(small) * double(large));
  for (uint32_t r : sizes)
    if (std::abs(double(r) - mid) < std::abs(double(middle) - mid)) middle = r;
  std::map<uint32_t, pipeline::LayerTimes> out;
  double run_seconds = 0;  // the last profile's, per run
  for (uint32_t r : std::set<uint32_t, std::greater<>>{large, middle, small}) {
    const std::string key = pipeline::profile_key(dev.info(), m, r, p, training);
    std::optional<pipeline::LayerTimes> found = cache.find(key, L);
    if (!found && !training) found = cache.find(pipeline::profile_key(dev.info(), m, r, p), L);
    if (found) {
      out[r] = *found, ++counts.cached;
      continue;
    }
    const uint32_t runs = run_seconds > 0 ? uint32_t(std::clamp(1.0 / run_seconds, 2.0, 7.0)) : 2;
    std::fprintf(stderr, "plan auto: profiling %s on %s: %smicro-batches of %u in %s (%u runs)\n", m.name.c_str(),
                 dev.info().name.c_str(), training ? "" : "forward passes of ", r, ops::precision_name(p), runs);
    const Clock::time_point t = Clock::now();
    const pipeline::LayerProfile lp = pipeline::profile_layer_times(dev, m, r, runs, p, training);
    run_seconds = since(t) / (runs + 1);
    out[r] = {lp.forward, lp.backward};
    cache.put(key, out[r]);
    ++counts.measured;
  }
  for (uint32_t r : sizes) {
    if (out.count(r)) continue;
    const auto hi = out.upper_bound(r), lo = std::prev(hi);
    const double w = double(r - lo->first) / double(hi->first - lo->first);
    pipeline::LayerTimes& t = out[r];
    for (size_t l = 0; l < L; ++l) {
      t.forward.push_back((1 - w) * lo->second.forward[l] + w * hi->second.forward[l]);
      t.backward.push_back((1 - w) * lo->second.backward[l] + w * hi->second.backward[l]);
    }
  }
  return out;
}

// Seconds per byte of a staging link between two devices: the host copy it makes, timed.
double staging_seconds_per_byte(vk::Device& a, vk::Device& b) {
  const uint64_t bytes = 4 << 20;
  pipeline::LinkMemory link(a, b, bytes, 1, pipeline::LinkKind::Staging, "planner probe");
  std::vector<double> s;
  for (int r = 0; r < 4; ++r) {
    const Clock::time_point t = Clock::now();
    link.relay(0);
    if (r) s.push_back(since(t));
  }
  return median(s) / double(bytes);
}

// Under mpirun: seconds per byte of a message between ranks, from a broadcast of 4 MiB.
double rank_seconds_per_byte() {
  const std::string payload(4 << 20, 'x');
  std::vector<double> s;
  for (int r = 0; r < 3; ++r) {
    world().allgather("");  // start together
    const Clock::time_point t = Clock::now();
    world().broadcast(world().rank() == 0 ? payload : std::string());
    s.push_back(since(t));
  }
  // The slowest rank's median, the same on every rank.
  double worst = 0;
  for (const std::string& x : world().allgather(std::to_string(median(s)))) worst = std::max(worst, std::stod(x));
  return worst / double(payload.size());
}

// Constraints nothing satisfies: one line, naming what refused the combination nearest to
// running. A re-plan after a lost device (recovery.h: flags fixed over the command line) is
// not named --plan auto, which the user may not have given.
void refuse_if_empty(const model::Model& m, const PipelineFlags& f, const pipeline::SearchResult& r) {
  if (!r.ranked.empty()) return;
  const std::string who = f.fixed.empty() ? "--plan auto: " : "";
  if (!r.closest.empty())
    throw UserError(who + "no configuration of " + m.name + " fits the devices' memory (" +
                    std::to_string(r.considered) + " planned); the closest: " + in_flags(r.closest));
  throw UserError(who + "no configuration of " + m.name + " satisfies the flags given (" +
                  std::to_string(r.invalid) + " combinations refused): " + in_flags(r.refused));
}

// The devices the search may use, opened once each: those of --devices (default:
// vk::default_devices, each entry it leaves out said in a line), or under mpirun every rank's.
struct Pool {
  std::unique_ptr<vk::Instance> instance;
  std::vector<std::unique_ptr<vk::Device>> opened;  // one per physical device here
  std::vector<vk::Device*> device_of;               // per entry (null: another rank's)
  std::vector<StageDevice> described;               // per entry
  std::vector<uint64_t> caps;                       // per entry
};

Pool open_pool(const PipelineFlags& f) {
  Pool pool;
  vk::InstanceOptions io;
  io.validation = f.validation;
  if (world().multi()) {
    Devices d = open_devices(f);
    pool.instance = std::move(d.instance);
    for (auto& dev : d.devices) {
      pool.device_of.push_back(dev.get());
      if (dev) pool.opened.push_back(std::move(dev));
    }
    pool.described = d.stages, pool.caps = d.caps;
  } else {
    pool.instance = std::make_unique<vk::Instance>(io);
    const std::vector<vk::PhysicalInfo> all = pool.instance->describe_devices();
    std::vector<uint32_t> indices;
    if (f.given("--devices")) {
      indices = parse_devices(f.devices, *pool.instance);
    } else {  // CPU drivers and integrated GPUs only where nothing better is there, each GPU once
      const vk::DefaultDevices d = vk::default_devices(all);
      indices = d.indices;
      for (const std::string& line : d.left_out)
        std::fprintf(stderr, "plan auto: %s (--devices takes it by name or index)\n", line.c_str());
    }
    std::map<uint32_t, vk::Device*> by_index;
    for (uint32_t index : indices) {
      if (!by_index.count(index)) {
        vk::DeviceOptions o;
        o.label = "device " + std::to_string(index);
        pool.opened.push_back(std::make_unique<vk::Device>(*pool.instance, index, o));
        use_tilings(f, *pool.opened.back());
        by_index[index] = pool.opened.back().get();
      }
      pool.device_of.push_back(by_index[index]);
      pool.described.push_back(describe(*by_index[index], all));
    }
    pool.caps = memory_caps(f.mem_limit, indices.size(), "devices; give one for all or one per device in --devices");
  }
  return pool;
}

// The axes of the search: what the user fixed, else every candidate.
// (The device orders come once the links are measured: device_orders_of.)
void set_axes(pipeline::SearchSpace& space, const PipelineFlags& f, uint32_t rows) {
  if (f.given("--micro-batches")) {
    // Refused as a given plan refuses it (0, or more than the rows); one that does not divide
    // the rows splits unevenly, as there.
    pipeline::split_rows(rows, f.micro_batches);
    space.micro_batches = {f.micro_batches};
  } else {
    space.micro_batches = pipeline::divisors(rows);
  }
  if (f.given("--schedule")) {
    const pipeline::ScheduleKind kind = pipeline::parse_schedule_kind(f.schedule);
    if (kind == pipeline::ScheduleKind::Interleaved && !f.given("--virtual-stages"))
      space.schedules = {{kind, 2}, {kind, 4}};
    else
      space.schedules = {{kind, f.virtual_stages}};
  } else if (f.given("--virtual-stages")) {
    space.schedules = {{pipeline::ScheduleKind::Interleaved, f.virtual_stages}};
  } else {
    space.schedules = pipeline::all_schedules();
  }
  if (f.given("--remat")) space.remats = {pipeline::parse_remat(f.remat)};
  else if (!space.training) space.remats = {pipeline::Remat::Never};  // a forward recomputes nothing
  else space.remats = {pipeline::Remat::Never, pipeline::Remat::ExceptLast, pipeline::Remat::Always};
  // One precision per stage, fixed, auto being the stage's device's (one for all, or auto, is
  // each device's candidates).
  if (f.given("--precision") && f.precision.find(',') != std::string::npos)
    for (const std::string& item : split_list(f.precision))
      space.precision.push_back(item == "auto" ? std::nullopt : std::optional(ops::parse_precision(item)));
  if (f.given("--balance")) space.balance = pipeline::parse_balance(f.balance);
}

// Under mpirun the ranks in order, one stage each; else every order of the pool's entries,
// interchangeable ones in pool order (pipeline::device_orders, which reads the links).
std::vector<std::vector<uint32_t>> device_orders_of(const pipeline::SearchSpace& space, uint32_t layers) {
  if (!world().multi()) return pipeline::device_orders(space.pool, layers, space.links);
  std::vector<uint32_t> all(space.pool.size());
  for (uint32_t k = 0; k < all.size(); ++k) all[k] = k;
  return {all};
}

// Each pair's link rate: shared memory moves nothing; a staging copy and messages between
// ranks are timed. A pair that cannot take a forced --link is marked, with its reason, for the
// search to leave out.
void measure_links(pipeline::SearchSpace& space, const PipelineFlags& f, const Pool& pool) {
  const size_t P = space.pool.size();
  space.links.seconds_per_byte.assign(P, std::vector<double>(P, 0.0));
  space.links.unlinkable.assign(P, std::vector<std::string>(P));
  if (world().multi()) {
    const double rate = rank_seconds_per_byte();
    for (auto& row : space.links.seconds_per_byte) std::fill(row.begin(), row.end(), rate);
  } else {
    const pipeline::LinkKind requested = pipeline::parse_link(f.link);
    std::map<std::pair<uint32_t, uint32_t>, std::pair<double, std::string>> by_pair;
    for (size_t i = 0; i < P; ++i)
      for (size_t j = 0; j < P; ++j) {
        const uint32_t a = pool.described[i].index, b = pool.described[j].index;
        // Logical devices of one device share its memory, unless a staging copy is forced.
        if (i == j || (a == b && requested != pipeline::LinkKind::Staging)) continue;
        if (!by_pair.count({a, b})) {
          auto& [rate, refused] = by_pair[{a, b}];
          try {
            const pipeline::LinkChoice c = pipeline::choose_link(*pool.device_of[i], *pool.device_of[j], requested);
            if (c.kind == pipeline::LinkKind::Staging || a == b)
              rate = staging_seconds_per_byte(*pool.device_of[i], *pool.device_of[j]);
          } catch (const UserError& e) {  // a forced path the pair cannot take
            refused = e.what();
          }
        }
        std::tie(space.links.seconds_per_byte[i][j], space.links.unlinkable[i][j]) = by_pair[{a, b}];
      }
  }
}

// The choice as flags, the table of the best configurations, the lines that say why, and the
// record for metrics.jsonl and the checkpoint.
AutoPlan report(const PipelineFlags& f, const pipeline::SearchResult& r, const Pool& pool, std::string profiled,
                size_t top) {
  const bool ranks = world().multi();
  const size_t P = pool.described.size();
  AutoPlan out;
  auto flags_of = [&](const pipeline::Candidate& c) {
    PipelineFlags x = f;
    x.plan = "given";
    x.device_uuids.clear(), x.device_names.clear();  // a plan resumed from: its own devices, not these
    std::vector<uint32_t> indices;
    std::vector<uint64_t> stage_caps;
    for (uint32_t i : c.devices) indices.push_back(pool.described[i].index), stage_caps.push_back(pool.caps[i]);
    if (!ranks) x.devices = join(indices);
    x.micro_batches = c.micro_batches;
    x.schedule = pipeline::schedule_kind_name(c.schedule.kind);
    x.virtual_stages = c.schedule.virtual_stages;
    x.remat = pipeline::remat_name(c.remat);
    const bool same = std::all_of(c.precision.begin(), c.precision.end(), [&](ops::Precision p) { return p == c.precision[0]; });
    x.precision = same ? ops::precision_name(c.precision[0]) : precisions_text(c.precision);
    x.balance = join(c.balance);
    x.partition = "cost";
    if (!ranks && !f.mem_limit.empty()) {
      std::string s;
      for (uint64_t cap : stage_caps) s += (s.empty() ? "" : ",") + std::to_string(cap);
      x.mem_limit = s;
    }
    return x;
  };
  auto text_of = [&](const PipelineFlags& x) {
    return x.devices + " M" + std::to_string(x.micro_batches) + " " + x.schedule +
           (x.virtual_stages > 1 ? " V" + std::to_string(x.virtual_stages) : "") + " " + x.remat + " " + x.precision;
  };
  const pipeline::Candidate& best = r.ranked.front();
  for (const pipeline::Candidate& c : r.ranked) {
    PipelineFlags x = flags_of(c);
    const std::string same = x.devices + " " + std::to_string(x.micro_batches) + " " + x.precision + " " +
                             std::to_string(std::llround(c.step_seconds / best.step_seconds * 1e6));
    out.ranked.push_back({x, c.step_seconds * 1e3, text_of(x), same});
  }
  out.flags = out.ranked.front().flags;
  // A step for training; eval and sample rank their forward passes of a batch.
  const bool training = f.use == PipelineUse::Training;
  out.table.push_back({"#", ranks ? "ranks' devices" : "devices", "K", "M", "schedule", "remat", "precision",
                       "layers", training ? "ms/step" : "ms/forward", "vs choice", "simulated bubble", "peak per device"});
  // Configurations that differ only in schedule or remat and take the same time (one stage,
  // one micro-batch) show once, the simplest.
  std::set<std::string> shown;
  for (size_t i = 0; i < r.ranked.size() && out.table.size() <= top; ++i) {
    const pipeline::Candidate& c = r.ranked[i];
    const PipelineFlags& x = out.ranked[i].flags;
    if (!shown.insert(out.ranked[i].same).second) continue;
    std::string peak;
    for (uint64_t b : c.peak) peak += (peak.empty() ? "" : ", ") + format_bytes(b);
    out.table.push_back({std::to_string(i + 1), ranks ? "ranks 0-" + std::to_string(P - 1) : x.devices,
                         std::to_string(c.devices.size()), std::to_string(c.micro_batches),
                         x.schedule + (x.virtual_stages > 1 ? " V" + std::to_string(x.virtual_stages) : ""), x.remat,
                         x.precision, x.balance, fixed(c.step_seconds * 1e3, 2),
                         i ? (c.step_seconds >= best.step_seconds ? "+" : "") +
                                 fixed((c.step_seconds / best.step_seconds - 1) * 100, 1) + "%"
                           : "choice",
                         fixed(c.bubble, 3), peak});
  }
  out.profiled = std::move(profiled);
  std::string names;
  for (uint32_t i : best.devices) names += (names.empty() ? "" : ", ") + pool.described[i].driver;
  out.line = "plan auto: " + std::string(ranks ? "" : "devices " + out.flags.devices + " (" + names + "), ") +
             std::to_string(out.flags.micro_batches) + " micro-batches, schedule " + out.flags.schedule +
             (out.flags.virtual_stages > 1 ? " (" + std::to_string(out.flags.virtual_stages) + " virtual stages)" : "") +
             ", remat " + out.flags.remat + ", precision " + out.flags.precision + ", layers " + out.flags.balance +
             "; predicted " + fixed(best.step_seconds * 1e3, 2) + (training ? " ms per step" : " ms per forward pass of a batch") +
             ", simulated bubble " + fixed(best.bubble, 3);
  out.same_as = std::string(ranks ? "" : "--devices " + out.flags.devices + " ") + "--micro-batches " +
                std::to_string(out.flags.micro_batches) + " --schedule " + out.flags.schedule +
                (out.flags.virtual_stages > 1 ? " --virtual-stages " + std::to_string(out.flags.virtual_stages) : "") +
                " --remat " + out.flags.remat + " --precision " + out.flags.precision + " --balance " + out.flags.balance;
  // The search is deterministic on gathered inputs; that every rank reached the same plan is
  // checked, not assumed.
  if (ranks) agree("the plan --plan auto chose", out.same_as);
  const PipelineFlags& x = out.flags;
  out.record = {{"flags", {{"devices", x.devices}, {"micro_batches", x.micro_batches}, {"schedule", x.schedule},
                           {"virtual_stages", x.virtual_stages}, {"remat", x.remat}, {"precision", x.precision},
                           {"balance", x.balance}, {"mem_limit", x.mem_limit}}},
                {"predicted_step_ms", best.step_seconds * 1e3}, {"bubble", best.bubble},
                {"considered", r.considered}, {"over_memory", r.over_memory},
                {"how", out.profiled}};
  // Indices follow the loader's order, which drivers installed or listed since can change: a
  // run resumed on this plan finds its devices by UUID (recorded_flags).
  if (!ranks) {
    nlohmann::json uuids = nlohmann::json::array(), device_names = nlohmann::json::array();
    for (uint32_t i : best.devices)
      uuids.push_back(pool.described[i].uuid), device_names.push_back(pool.described[i].name);
    out.record["flags"]["device_uuids"] = uuids, out.record["flags"]["device_names"] = device_names;
  }
  return out;
}

}  // namespace

AutoPlan auto_plan(const model::Model& m, const PipelineFlags& f, uint32_t rows, uint32_t optimizer_states,
                   size_t top) {
  if (f.given("--partition"))
    throw UserError("--partition: --plan auto cuts by each layer's measured time; drop --partition or --plan auto");
  const bool ranks = world().multi();
  const uint32_t L = uint32_t(m.layers.size());

  Pool pool = open_pool(f);
  const std::vector<vk::Device*>& device_of = pool.device_of;
  const std::vector<StageDevice>& described = pool.described;
  const std::vector<uint64_t>& caps = pool.caps;
  pipeline::SearchSpace space;
  space.rows = rows, space.optimizer_states = optimizer_states;
  space.training = f.use == PipelineUse::Training;
  const size_t P = described.size();

  // What each pool entry's kernels take in 16 bits, and its candidates.
  const std::vector<pipeline::DeviceFacts> facts = device_facts(m, device_of);
  for (size_t i = 0; i < P; ++i) {
    const StageDevice& s = described[i];
    pipeline::PlanDevice d;
    d.spec.memory_cap = caps[i];
    d.spec.device = (s.rank.empty() ? "" : s.rank + ", ") + "device " + std::to_string(s.index) + ", " + s.name;
    d.spec.physical = s.physical, d.spec.device_memory = s.heap;
    // Its model: tuned tilings make one device's kernels another's (under mpirun each rank
    // profiles its own, and every rank must read the pool alike).
    d.model = s.name + ", " + s.driver;
    if (!ranks && device_of[i]) {
      const std::string tuned = ops::tuned_checksum(device_of[i]->info());
      if (!tuned.empty()) d.model += ", tilings " + tuned;
    }
    d.spec.facts = facts[i];
    // Stages share compute where their devices do: CPU drivers in one process share the host's
    // cores, two drivers' entries of one GPU the GPU (StageDevice::physical); a rank computes
    // on its own.
    const bool cpu = device_of[i] && device_of[i]->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    d.resource = ranks ? uint32_t(i) : cpu ? 0 : 1 + s.physical;
    d.precisions = candidate_precisions(f, s.multiplies), d.multiplies = s.multiplies;
    d.precisions.erase(std::unique(d.precisions.begin(), d.precisions.end()), d.precisions.end());
    space.pool.push_back(std::move(d));
  }
  pipeline::align_budgets(space.pool);

  set_axes(space, f, rows);

  // Memory and the devices' limits do not depend on time: constraints nothing satisfies are
  // refused before anything is profiled, and micro-batch counts no configuration can run with
  // are left out (a mini-batch past a device's binding range is never timed whole).
  for (pipeline::PlanDevice& d : space.pool)
    for (ops::Precision p : d.precisions)
      for (uint32_t M : space.micro_batches)
        d.times[{pipeline::split_rows(rows, M).front(), p}] = {std::vector<double>(L, 0.0), std::vector<double>(L, 0.0)};
  measure_links(space, f, pool);
  space.device_orders = device_orders_of(space, L);
  space.first_fit = true;
  const std::vector<uint32_t> every = space.micro_batches;
  std::vector<uint32_t> usable;
  for (uint32_t M : every) {
    space.micro_batches = {M};
    if (!pipeline::search(m, space).ranked.empty()) usable.push_back(M);
  }
  space.micro_batches = every;
  if (usable.empty()) refuse_if_empty(m, f, pipeline::search(m, space));
  space.micro_batches = usable;
  space.first_fit = false;
  // Profiles: each device here, each precision it may take, each micro-batch size left.
  std::set<uint32_t> sizes;
  for (uint32_t M : space.micro_batches) sizes.insert(pipeline::split_rows(rows, M).front());
  pipeline::ProfileCache cache(pipeline::default_profile_cache());
  if (!cache.warning().empty()) std::fprintf(stderr, "brigade: warning: %s\n", cache.warning().c_str());
  const Clock::time_point profile_start = Clock::now();
  size_t measured = 0, cached = 0;
  // Entries of one model share its profile (the search takes them as interchangeable), so
  // a rig of identical GPUs profiles one.
  std::map<std::pair<std::string, ops::Precision>, std::map<uint32_t, pipeline::LayerTimes>> by_model;
  for (size_t i = 0; i < P; ++i) {
    if (!device_of[i]) continue;
    vk::Device& dev = *device_of[i];
    for (ops::Precision p : space.pool[i].precisions) {
      auto& times = by_model[{space.pool[i].model, p}];
      if (times.empty()) {
        Profiling counts;
        times = profile_sizes(dev, m, sizes, p, space.training, cache, counts);
        measured += counts.measured, cached += counts.cached;
      }
      for (const auto& [r, t] : times) space.pool[i].times[{r, p}] = t;
    }
  }
  bool saved = false;
  if (measured) {
    const std::string why = cache.save();
    if (!why.empty()) std::fprintf(stderr, "brigade: warning: profile cache: %s\n", why.c_str());
    saved = why.empty();
  }
  if (ranks) {  // every rank's times, gathered: each rank profiled its own device
    nlohmann::json mine = nlohmann::json::array();
    const auto me = std::find_if(device_of.begin(), device_of.end(), [](vk::Device* d) { return d; });
    for (const auto& [key, t] : space.pool[size_t(me - device_of.begin())].times)
      mine.push_back({{"rows", key.first}, {"precision", ops::precision_name(key.second)}, {"forward", t.forward}, {"backward", t.backward}});
    const std::vector<std::string> all = world().allgather(mine.dump());
    for (size_t k = 0; k < P; ++k)
      for (const nlohmann::json& e : nlohmann::json::parse(all[k]))
        space.pool[k].times[{e.at("rows").get<uint32_t>(), ops::parse_precision(e.at("precision"))}] = {
            e.at("forward").get<std::vector<double>>(), e.at("backward").get<std::vector<double>>()};
    measured = std::stoul(world().allgather(std::to_string(measured)).front());  // rank 0 speaks
  }
  const double profile_seconds = since(profile_start);

  const Clock::time_point search_start = Clock::now();
  const pipeline::SearchResult r = pipeline::search(m, space);
  const double search_seconds = since(search_start);
  refuse_if_empty(m, f, r);

  std::string how = measured ? "profiled " + std::to_string(measured) + " layer timing runs in " + fixed(profile_seconds, 1) + " s"
                             : "layer times from the profile cache";
  if (!cache.path().empty() && measured && saved) how += " (cached in " + cache.path() + ")";
  else if (!measured && cached) how += " (" + cache.path() + ")";
  how += "; " + std::to_string(r.considered) + " configurations planned in " + fixed(search_seconds, 2) + " s, " +
         std::to_string(r.over_memory) + " over memory";
  AutoPlan out = report(f, r, pool, how, top);
  for (size_t i = 0; i < P; ++i) out.pool.push_back({described[i].index, caps[i]});
  out.stage_entries = r.ranked.front().devices;
  return out;
}

}  // namespace brigade::cli
