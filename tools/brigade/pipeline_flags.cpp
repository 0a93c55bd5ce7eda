#include "pipeline_flags.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <map>
#include <sstream>
#include <set>

#include "auto_plan.h"
#include "checks.h"
#include "ops/attention.h"
#include "ops/matmul_tiles.h"
#include "ops/tuned_tilings.h"
#include "pipeline/profile.h"
#include "engine_words.h"
#include "ranks.h"
#include "util/units.h"
#include "util/error.h"

namespace brigade::cli {

void add_pipeline_flags(CLI::App& cmd, PipelineFlags& f, PipelineUse use) {
  f.use = use;
  const bool backward = use == PipelineUse::Training, batches = use != PipelineUse::Generation;
  const std::string chosen = use == PipelineUse::Training     ? "--micro-batches, --schedule, --virtual-stages, --remat, "
                             : use == PipelineUse::Evaluation ? "--micro-batches, --schedule, --virtual-stages, "
                                                              : "";
  cmd.add_option("--plan", f.plan,
                 "given (the pipeline as the other flags say) or auto: every pipeline flag left out "
                 "(which devices in which order, " + chosen + "--precision, the cut) chosen from each "
                 "layer's measured time on each device and the plan's memory model; the flags given stay fixed")
      ->capture_default_str()
      ->check(CLI::IsMember({"given", "auto"}));
  cmd.add_option("--devices", f.devices,
                 "device per pipeline stage, from `brigade devices`: an index, a unique part of "
                 "its name or a UUID prefix; a device may repeat (0,0 = two stages on device 0; "
                 "llvmpipe,swiftshader = one stage on each driver); with --plan auto, the devices it may use")
      ->capture_default_str();
  if (batches) {
    cmd.add_option("--micro-batches,-m", f.micro_batches, "micro-batches M per mini-batch")
        ->capture_default_str();
    cmd.add_option("--schedule", f.schedule,
                 "pipeline schedule: gpipe (fill-drain), 1f1b (one forward one backward: "
                 "activations of at most K micro-batches), interleaved (1f1b over --virtual-stages "
                 "cells per device: a smaller bubble) or zb (zero-bubble ZB-H1: weight gradients "
                 "deferred into the bubble)")
        ->capture_default_str();
    cmd.add_option("--virtual-stages", f.virtual_stages, "cells per device for --schedule interleaved")
        ->capture_default_str()
        ->check(CLI::Range(1u, 64u));
  }
  if (backward)
    cmd.add_option("--remat", f.remat, "re-materialization: never, always or except-last")
        ->capture_default_str();
  cmd.add_option("--link", f.link, "boundary transfers: auto, fd, host or staging")
      ->capture_default_str();
  cmd.add_option("--balance", f.balance, std::string("layers per stage") + (batches ? " (per cell with --virtual-stages)" : "") +
                                             " by hand, e.g. 3,5,4 (default: planned)");
  cmd.add_option("--partition", f.partition,
                 "what the planner balances: cost (estimated FLOPs), memory, or profile (each "
                 "layer timed on each stage's own device)")
      ->capture_default_str();
  cmd.add_option("--mem-limit", f.mem_limit,
                 "memory cap per device, e.g. 256MiB or 1GiB,512MiB (one per stage)");
  cmd.add_option("--precision", f.precision,
                 "how activations, saved tensors and stage boundaries are stored: fp32, bf16 "
                 "(half the bytes, fp32's range), fp16 (half the bytes, 3 more bits, trained "
                 "with dynamic loss scaling) or auto (per device: bf16 where its matrix units "
                 "multiply bf16, fp16 where they multiply only fp16, bf16 elsewhere); one for all "
                 "stages or one per stage (bf16,fp32). Products of 16-bit values run on the "
                 "device's matrix units where it lists their type, elsewhere in fp32 arithmetic; "
                 "every sum accumulates in fp32 and the products read 16-bit copies of their "
                 "weights; the weights and optimizer state stay fp32")
      ->capture_default_str();
  cmd.add_option("--tilings", f.tilings,
                 "the matrix products' tilings: tuned (where `brigade bench products --save` measured "
                 "one faster than the default for a product on this device, that one) or default")
      ->capture_default_str()
      ->check(CLI::IsMember({"tuned", "default"}));
  cmd.add_flag("--validation", f.validation, "run under the Khronos validation layer");
  cmd.add_flag("--record-each-step", f.record_each_step,
               "record every action's commands each step, rather than submitting again the "
               "recording of an action whose commands did not change");
  if (batches)
    cmd.add_option("--replicas", f.replicas,
                   "under mpirun: data-parallel replicas R, each a pipeline of ranks / R stages "
                   "taking its share of every mini-batch")
        ->capture_default_str()
        ->check(kPositive);
  for (const char* flag : {"--devices", "--micro-batches", "--schedule", "--virtual-stages", "--remat", "--link",
                           "--balance", "--partition", "--mem-limit", "--precision", "--replicas"})
    if (CLI::Option* o = cmd.get_option_no_throw(flag)) f.options[flag] = o;
  if (!backward) return;
  cmd.add_option("--bucket-size", f.bucket_size,
                 "with --replicas: the gradients are summed over the replicas in buckets of about "
                 "this size while the backward goes on (64KiB, 4MiB, ...); 0 sums them all after it")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              if (v != "0") parse_size(v, "--bucket-size");
              return std::string();
            } catch (const UserError& e) {  // "--bucket-size: 'foo' ...", the parser names the flag
              const std::string what = e.what();
              return what.substr(what.find(": ") + 2);
            }
          },
          "SIZE"));
}

CLI::Option* add_model_flags(CLI::App& cmd, std::string& model, std::vector<std::string>& set, uint32_t& batch) {
  CLI::Option* o = cmd.add_option("--model", model, "preset name or a model .toml file")->capture_default_str();
  cmd.add_option("--set", set, "override a model setting, e.g. --set n_layer=6 (repeatable)");
  cmd.add_option("--batch-size,-b", batch, "samples per mini-batch")->capture_default_str()->check(kPositive);
  return o;
}

void add_model_pipeline_flags(CLI::App& cmd, ModelPipeline& o) {
  add_model_flags(cmd, o.model, o.set, o.batch);
  add_pipeline_flags(cmd, o.pipeline);
}

std::vector<uint32_t> parse_devices(const std::string& text, const vk::Instance& instance) {
  const std::vector<vk::PhysicalInfo> all = instance.describe_devices();
  std::vector<uint32_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.push_back(vk::find_device(all, text.substr(start, comma - start), "--devices"));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string logical_devices(const std::string& device, uint32_t K) {
  std::string s = device;
  for (uint32_t k = 1; k < K; ++k) s += "," + device;
  return s;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

std::vector<pipeline::DeviceFacts> device_facts(const model::Model& m, const std::vector<vk::Device*>& devices) {
  std::vector<pipeline::DeviceFacts> out(devices.size());
  for (size_t k = 0; k < devices.size(); ++k)
    if (devices[k]) out[k] = pipeline::device_facts(m, devices[k]->info());
  if (!world().multi()) return out;
  // Under mpirun each rank opens one: every rank learns the others', a letter a layer ('a'
  // plus 1 where it stores 16 bits, plus twice its lean precisions), then the workspace's
  // bytes, the largest binding, the largest allocation and the staging buffer.
  const size_t here = size_t(std::find_if(devices.begin(), devices.end(), [](vk::Device* d) { return d; }) - devices.begin());
  std::string mine;
  for (size_t l = 0; l < out[here].stores_half.size(); ++l)
    mine += char('a' + (out[here].stores_half[l] ? 1 : 0) + 2 * out[here].lean_scratch[l]);
  mine += std::to_string(out[here].workspace_bytes) + " " + std::to_string(out[here].max_binding) + " " +
          std::to_string(out[here].max_allocation) + " " + std::to_string(out[here].staging_bytes);
  const std::vector<std::string> all = world().allgather(mine);
  for (size_t k = 0; k < devices.size(); ++k) {
    out[k] = {};
    size_t c = 0;
    for (; c < all[k].size() && all[k][c] >= 'a'; ++c) {
      out[k].stores_half.push_back((all[k][c] - 'a') & 1);
      out[k].lean_scratch.push_back(uint8_t((all[k][c] - 'a') >> 1));
    }
    std::istringstream numbers(all[k].substr(c));
    numbers >> out[k].workspace_bytes >> out[k].max_binding >> out[k].max_allocation >> out[k].staging_bytes;
  }
  return out;
}

std::vector<uint64_t> memory_caps(const std::string& mem_limit, size_t n, const std::string& per) {
  std::vector<uint64_t> caps(n, 0);
  if (mem_limit.empty()) return caps;
  const std::vector<uint64_t> given = parse_size_list(mem_limit, "--mem-limit");
  if (given.size() != 1 && given.size() != n)
    throw UserError("--mem-limit: " + std::to_string(given.size()) + " sizes for " + std::to_string(n) + " " + per);
  for (size_t i = 0; i < n; ++i) caps[i] = given.size() == 1 ? given[0] : given[i];
  return caps;
}

StageDevice describe(const vk::Device& dev, const std::vector<vk::PhysicalInfo>& all) {
  const vk::PhysicalInfo& info = dev.info();
  uint64_t heap = 0;
  for (const vk::MemoryHeap& h : info.heaps)
    if (h.device_local) heap = std::max(heap, h.usable());
  StageDevice s{info.name, info.driver_name.empty() ? info.name : info.driver_name, info.index, heap, ""};
  s.multiplies = ops::auto_precision(info);
  s.uuid = info.device_uuid_string();
  s.physical = vk::gpu_of(all, info.index);
  for (ops::Precision p : {ops::Precision::Fp32, ops::Precision::Bf16, ops::Precision::Fp16}) {
    s.products[size_t(p)] = ops::matrix_path(info, p);
    s.attention[size_t(p)] = ops::attention_path(info, p);
  }
  return s;
}


void use_tilings(const PipelineFlags& f, const vk::Device& dev) {
  const vk::PhysicalInfo& info = dev.info();
  if (f.tilings == "default") return ops::use_tuned_tilings(info, {});
  const io::CacheFile file(ops::default_tiling_cache(), "tiling", "tilings");
  static std::set<std::string> told;  // the warning and the devices whose line was printed, once each
  if (!file.warning().empty() && told.insert(file.warning()).second)
    std::fprintf(stderr, "brigade: warning: %s\n", file.warning().c_str());
  ops::TunedTilings tuned = ops::tuned_tilings(file, info);
  if (!tuned.empty() && told.insert(ops::tuned_device_key(info)).second)
    std::fprintf(stderr, "tilings: %zu product(s) of %s take the tuned tilings of `bench products --save` (%s; "
                 "--tilings default for the built-in ones)\n", tuned.size(), info.name.c_str(), file.path().c_str());
  ops::use_tuned_tilings(info, std::move(tuned));
}

std::vector<uint32_t> recorded_devices(const PipelineFlags& f, const std::vector<vk::PhysicalInfo>& listed) {
  const std::vector<std::string> at = split_list(f.devices);
  std::vector<uint32_t> recorded(at.size(), UINT32_MAX);  // no index to prefer where not one
  for (size_t k = 0; k < at.size(); ++k)
    if (!at[k].empty() && at[k].size() < 10 && std::all_of(at[k].begin(), at[k].end(), ::isdigit))
      recorded[k] = uint32_t(std::stoul(at[k]));
  const auto named = [&](const std::string& name) {
    std::vector<uint32_t> out;
    for (const vk::PhysicalInfo& d : listed)
      if (d.name == name) out.push_back(d.index);
    return out;
  };
  // The listed devices of each stage's UUID, else of its name; the recorded indices of the stages
  // that share the UUID (or name), in order, take them in the same order where the listing moved.
  std::vector<std::vector<uint32_t>> same_of;  // each stage's devices of its UUID
  for (const std::string& uuid : f.device_uuids) same_of.push_back(vk::devices_with_uuid(listed, uuid));
  std::vector<uint32_t> out;
  std::set<std::string> warned;
  for (size_t k = 0; k < at.size(); ++k) {
    const std::vector<uint32_t>& same = same_of[k];
    const bool by_uuid = !same.empty();
    const std::vector<uint32_t> found = by_uuid ? same : named(f.device_names[k]);
    if (found.empty())
      throw UserError("the plan's device " + f.device_names[k] + " (deviceUUID " + f.device_uuids[k] +
                      ") is not listed here: no device has its deviceUUID or its name; devices: " +
                      vk::device_listing(listed));
    std::set<uint32_t> peers;  // the recorded indices of the stages on these devices
    for (size_t j = 0; j < at.size(); ++j)
      if (by_uuid ? same_of[j] == same : f.device_names[j] == f.device_names[k])
        peers.insert(recorded[j]);
    const bool unmoved = std::all_of(peers.begin(), peers.end(), [&](uint32_t r) {
      return std::find(found.begin(), found.end(), r) != found.end();
    });
    const uint32_t index = unmoved ? recorded[k]
                                   : found[size_t(std::distance(peers.begin(), peers.find(recorded[k]))) % found.size()];
    // A driver whose UUID changed with its version (lavapipe's is Mesa's): the same name, said once.
    if (!by_uuid && warned.insert(f.device_uuids[k]).second)
      std::fprintf(stderr, "brigade: warning: the plan's device %s (deviceUUID %s) is listed under deviceUUID %s now "
                   "(its driver changed?): taken by its name, device %u\n", f.device_names[k].c_str(),
                   f.device_uuids[k].c_str(), listed.at(index).device_uuid_string().c_str(), index);
    out.push_back(index);
  }
  return out;
}

Devices open_devices(const PipelineFlags& f) {
  Devices d;
  vk::InstanceOptions io;
  io.validation = f.validation;
  d.instance = std::make_unique<vk::Instance>(io);
  const std::vector<vk::PhysicalInfo> listed = d.instance->describe_devices();
  // A recorded plan's devices by their UUIDs (on each rank, against its own host's listing).
  std::vector<uint32_t> indices =
      f.device_uuids.empty() ? parse_devices(f.devices, *d.instance) : recorded_devices(f, listed);
  mpi::World& w = world();
  uint32_t here = 0;  // the stage this process opens a device for (all of them without ranks)
  if (w.multi()) {
    if (w.size() % f.replicas != 0)
      throw UserError("--replicas " + std::to_string(f.replicas) + " does not divide the " +
                      std::to_string(w.size()) + " ranks into pipelines of equal length");
    const uint32_t K = w.size() / f.replicas;
    here = w.rank() % K;
    const uint32_t mine = indices[w.local_rank() % indices.size()];
    indices.assign(K, mine);
  } else if (f.replicas != 1) {
    throw UserError("--replicas " + std::to_string(f.replicas) + " needs ranks: run under mpirun -np N");
  }
  const uint32_t K = uint32_t(indices.size());
  d.caps = memory_caps(f.mem_limit, K, "stages; give one for all or one per stage");
  for (uint32_t k = 0; k < K; ++k) {
    if (w.multi() && k != here) {
      d.devices.push_back(nullptr);
      continue;
    }
    vk::DeviceOptions o;
    o.label = "stage " + std::to_string(k);
    o.mem_limit = d.caps[k];
    d.devices.push_back(std::make_unique<vk::Device>(*d.instance, indices[k], o));
    use_tilings(f, *d.devices.back());
    d.stages.push_back(describe(*d.devices.back(), listed));
  }
  if (w.multi()) {  // every stage's device, from the first replica's ranks
    const StageDevice& mine = d.stages.front();
    // Its GPU on its host: the PCI address where the driver tells it (ranks on one host may
    // list their devices in other orders), else its index there.
    const vk::PhysicalInfo& info = d.devices[here]->info();
    const std::string gpu = info.pci_bus.empty() ? "#" + std::to_string(mine.physical) : info.pci_bus;
    const nlohmann::json j{{"name", mine.name}, {"driver", mine.driver}, {"index", mine.index},
                           {"gpu", gpu}, {"heap", mine.heap},
                           {"multiplies", ops::precision_name(mine.multiplies)}, {"products", mine.products},
                           {"attention", mine.attention}};
    const std::vector<std::string> all = w.allgather(j.dump() + "\n" + w.host());
    d.stages.clear();
    std::map<std::pair<std::string, std::string>, uint32_t> physical;  // by host and its GPU there
    for (uint32_t k = 0; k < K; ++k) {
      const std::string& s = all[k];
      const nlohmann::json o = nlohmann::json::parse(s.substr(0, s.find('\n')));
      const std::string host = s.substr(s.find('\n') + 1);
      d.stages.push_back({o.at("name"), o.at("driver"), o.at("index"), o.at("heap"), "rank " + std::to_string(k) + " on " + host,
                          ops::parse_precision(o.at("multiplies")), o.at("products"), o.at("attention")});
      d.stages.back().physical =
          physical.try_emplace({host, o.at("gpu").get<std::string>()}, uint32_t(physical.size())).first->second;
    }
  }
  return d;
}

std::vector<pipeline::LinkChoice> choose_links(const PipelineFlags& f, Devices& d, pipeline::LinkKind kind) {
  std::vector<vk::Device*> devices;
  for (auto& dev : d.devices) devices.push_back(dev.get());
  return pipeline::choose_links(devices, uint32_t(devices.size()) * f.virtual_stages, kind);
}

std::string link_lines(const std::vector<pipeline::LinkChoice>& links, const Devices& d) {
  const size_t K = d.devices.size();
  const bool cells = links.size() + 1 > K;
  std::string s;
  for (size_t b = 0; b < links.size(); ++b) {
    const StageDevice &x = d.stages[b % K], &y = d.stages[(b + 1) % K];
    s += "link " + std::to_string(b) + "->" + std::to_string(b + 1) + " (" +
         (cells ? "stage " + std::to_string(b % K) + " -> stage " + std::to_string((b + 1) % K) + ", " : "") +
         (x.rank.empty() ? x.driver + " -> " + y.driver : x.rank + " -> " + y.rank) + "): " +
         pipeline::link_name(links[b].kind) + ", " + in_flags(links[b].why) + "\n";
  }
  return s;
}

std::vector<ops::Precision> stage_precisions(const std::string& text, const std::vector<StageDevice>& stages) {
  const size_t K = stages.size();
  const std::vector<std::string> items = split_list(text);
  if (items.size() != 1 && items.size() != K)
    throw UserError("--precision: " + std::to_string(items.size()) + " values for " + std::to_string(K) +
                    " stages; give one for all or one per stage");
  std::vector<ops::Precision> out;
  for (size_t k = 0; k < K; ++k) {
    const std::string& item = items[items.size() == 1 ? 0 : k];
    out.push_back(item == "auto" ? stages[k].multiplies : ops::parse_precision(item));
  }
  return out;
}

std::string precision_words(const std::string& text, const std::vector<ops::Precision>& p) {
  const bool same = std::all_of(p.begin(), p.end(), [&](ops::Precision x) { return x == p.front(); });
  std::string s;
  for (size_t k = 0; k < (same ? 1 : p.size()); ++k) s += (k ? "," : "") + std::string(ops::precision_name(p[k]));
  return s + (text.find("auto") != std::string::npos ? " (auto)" : "");
}

bool scales_loss(const std::vector<ops::Precision>& stages) {
  return std::find(stages.begin(), stages.end(), ops::Precision::Fp16) != stages.end();
}

pipeline::Plan make_plan(const model::Model& m, const PipelineFlags& f, Devices& d, uint32_t rows,
                         uint32_t optimizer_states) {
  const uint32_t K = uint32_t(d.devices.size());
  pipeline::PlanOptions po;
  po.rows = rows;
  po.micro_batches = f.micro_batches;
  po.remat = pipeline::parse_remat(f.remat);
  po.schedule = pipeline::parse_schedule_kind(f.schedule);
  po.virtual_stages = f.virtual_stages;
  po.optimizer_states = optimizer_states;
  po.training = f.use == PipelineUse::Training;
  po.precision = stage_precisions(f.precision, d.stages);
  if (f.partition != "cost" && f.partition != "memory" && f.partition != "profile")
    throw UserError("--partition: '" + f.partition + "' is not an objective; expected cost, memory or profile");
  if (f.partition == "memory") po.objective = pipeline::Objective::Memory;
  if (!f.balance.empty()) po.balance = pipeline::parse_balance(f.balance);
  for (uint32_t k = 0; k < K; ++k) {
    const StageDevice& s = d.stages[k];
    po.stages.push_back({1.0, d.caps[k], (s.rank.empty() ? "" : s.rank + ", ") + "device " + std::to_string(s.index) + ", " + s.name,
                         s.physical, s.heap, {}});
  }
  // Which layers each stage's device runs on 16-bit tensors as stored, and with a lean
  // scratch (the plan is the same on every rank).
  std::vector<vk::Device*> devices;
  for (auto& dev : d.devices) devices.push_back(dev.get());
  const std::vector<pipeline::DeviceFacts> facts = device_facts(m, devices);
  for (uint32_t k = 0; k < K; ++k) po.stages[k].facts = facts[k];
  if (f.partition == "profile" && world().multi()) {
    // Each rank times every layer on its own device; every rank plans on all the times.
    const uint32_t micro_rows = pipeline::split_rows(rows, f.micro_batches).front();
    const auto here = std::find_if(d.devices.begin(), d.devices.end(), [](const auto& dev) { return dev != nullptr; });
    const uint32_t stage = uint32_t(here - d.devices.begin());
    const nlohmann::json mine = pipeline::profile_layers(**here, m, micro_rows, po.precision[stage]);
    const std::vector<std::string> all = world().allgather(mine.dump());
    for (uint32_t k = 0; k < K; ++k) po.stages[k].layer_times = nlohmann::json::parse(all[k]).get<std::vector<double>>();
  } else if (f.partition == "profile") {
    const uint32_t micro_rows = pipeline::split_rows(rows, f.micro_batches).front();
    // Logical devices of one GPU in one precision share a profile.
    std::map<std::pair<uint32_t, ops::Precision>, std::vector<double>> by_physical;
    for (uint32_t k = 0; k < K; ++k) {
      const ops::Precision p = po.precision[k];
      const auto key = std::pair(d.devices[k]->info().index, p);
      if (!by_physical.count(key)) by_physical[key] = pipeline::profile_layers(*d.devices[k], m, micro_rows, p);
      po.stages[k].layer_times = by_physical[key];
    }
  }
  return pipeline::plan(m, po);
}

Pipeline open_pipeline(const model::Model& m, const PipelineFlags& given, uint32_t rows,
                       uint32_t optimizer_states) {
  Pipeline p;
  if (given.plan == "auto") {
    // With replicas each pipeline takes its share of the mini-batch: the first's is the largest.
    const uint32_t share = pipeline::split_rows(rows, world().multi() ? given.replicas : 1).front();
    auto chosen = std::make_shared<AutoPlan>(auto_plan(m, given, share, optimizer_states));
    p.flags = chosen->flags;
    p.chosen = std::move(chosen);
  } else {
    p.flags = given;
  }
  const PipelineFlags& f = p.flags;
  Devices d = open_devices(f);
  if (!f.device_uuids.empty() && !world().multi()) {  // a recorded plan's devices, as listed now
    std::vector<std::string> now;
    for (const StageDevice& st : d.stages) now.push_back(std::to_string(st.index));
    p.flags.devices = join_list(now);
  }
  const uint32_t K = uint32_t(d.devices.size());
  std::unique_ptr<pipeline::Topology> topology;
  if (world().multi())
    topology = world().place(K, f.replicas);
  else
    topology = std::make_unique<pipeline::OneProcess>(K);
  pipeline::ExecutorOptions eo;
  eo.bucket_bytes = f.bucket_size == "0" ? 0 : parse_size(f.bucket_size, "--bucket-size");
  eo.link = pipeline::parse_link(f.link);
  eo.replay = !f.record_each_step;
  eo.cpu_times = f.cpu_times;
  eo.links = choose_links(f, d, eo.link);
  p.link_lines = link_lines(eo.links, d);
  // With replicas, each pipeline is planned for its share: the first replica's is the largest,
  // and the last's, the smallest, needs a sample for each micro-batch.
  if (const uint32_t R = topology->replicas(); R > 1 && pipeline::split_rows(rows, R).back() < f.micro_batches)
    throw UserError("--micro-batches " + std::to_string(f.micro_batches) + " is more than the " +
                    std::to_string(pipeline::split_rows(rows, R).back()) + " samples of replica " + std::to_string(R - 1) +
                    "'s share of the mini-batch of " + std::to_string(rows) + " (--replicas " + std::to_string(R) + ")");
  p.plan = make_plan(m, f, d, topology->largest_share(rows), optimizer_states);
  p.precision = stage_precisions(f.precision, d.stages);
  if (!p.plan.problem.empty()) throw UserError(p.plan.problem);  // before anything is allocated
  p.instance = std::move(d.instance);
  p.devices = std::move(d.devices);
  std::vector<vk::Device*> devs;
  for (auto& dev : p.devices) devs.push_back(dev.get());
  p.executor = std::make_unique<pipeline::Executor>(m, devs, p.plan, eo, std::move(topology));
  return p;
}

uint64_t warm_up(pipeline::Executor& ex, const pipeline::Batch& batch, optim::Optimizer* optimizer, double lr) {
  const uint32_t steps = ex.recording_turns();
  for (uint32_t t = 1; t <= steps; ++t) ex.train(batch, {optimizer, optim::Step{t, lr, 1}, 0});
  return uint64_t(steps) + 1;
}

}  // namespace brigade::cli
