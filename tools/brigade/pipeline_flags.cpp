#include "pipeline_flags.h"

#include "util/units.h"
#include "vk/check.h"

namespace brigade::cli {

void add_pipeline_flags(CLI::App& cmd, PipelineFlags& f) {
  cmd.add_option("--devices", f.devices,
                 "device index per pipeline stage, from `brigade devices`; an index may repeat "
                 "(0,0 = two stages on device 0)")
      ->capture_default_str();
  cmd.add_option("--micro-batches,-m", f.micro_batches, "micro-batches M per mini-batch")
      ->capture_default_str();
  cmd.add_option("--remat", f.remat, "re-materialization: never, always or except-last")
      ->capture_default_str();
  cmd.add_option("--link", f.link, "boundary transfers: auto, fd, host or staging")
      ->capture_default_str();
  cmd.add_option("--balance", f.balance, "layers per stage by hand, e.g. 3,5,4 (default: planned)");
  cmd.add_option("--partition", f.partition, "what the planner balances: cost or memory")
      ->capture_default_str();
  cmd.add_option("--mem-limit", f.mem_limit,
                 "memory cap per device, e.g. 256MiB or 1GiB,512MiB (one per stage)");
  cmd.add_flag("--validation", f.validation, "run under the Khronos validation layer");
}

std::vector<uint32_t> parse_devices(const std::string& text, uint32_t available) {
  std::vector<uint32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || item[0] == '-')
      throw UserError("--devices: '" + text + "' is not a list of device indices such as 0,0,1");
    if (v >= available)
      throw UserError("--devices: device " + item + " does not exist; this machine has " +
                      std::to_string(available) + " (see `brigade devices`)");
    out.push_back(uint32_t(v));
    start = comma + 1;
  }
  return out;
}

Pipeline open_pipeline(const model::Model& m, const PipelineFlags& f, uint32_t rows,
                       uint32_t optimizer_states) {
  Pipeline p;
  vk::InstanceOptions io;
  io.validation = f.validation;
  p.instance = std::make_unique<vk::Instance>(io);
  const std::vector<uint32_t> indices = parse_devices(f.devices, uint32_t(p.instance->physical_devices().size()));
  const uint32_t K = uint32_t(indices.size());
  std::vector<uint64_t> caps(K, 0);
  if (!f.mem_limit.empty()) {
    const std::vector<uint64_t> given = parse_size_list(f.mem_limit, "--mem-limit");
    if (given.size() != 1 && given.size() != K)
      throw UserError("--mem-limit: " + std::to_string(given.size()) + " sizes for " +
                      std::to_string(K) + " stages; give one for all or one per stage");
    for (uint32_t k = 0; k < K; ++k) caps[k] = given.size() == 1 ? given[0] : given[k];
  }
  pipeline::PlanOptions po;
  po.rows = rows;
  po.micro_batches = f.micro_batches;
  po.remat = pipeline::parse_remat(f.remat);
  po.optimizer_states = optimizer_states;
  if (f.partition == "memory") po.objective = pipeline::Objective::Memory;
  else if (f.partition != "cost")
    throw UserError("--partition: '" + f.partition + "' is not an objective; expected cost or memory");
  if (!f.balance.empty()) po.balance = pipeline::parse_balance(f.balance);
  for (uint32_t k = 0; k < K; ++k) po.stages.push_back({1.0, caps[k]});
  p.plan = pipeline::plan(m, po);
  for (uint32_t k = 0; k < K; ++k) {
    vk::DeviceOptions d;
    d.label = "stage " + std::to_string(k);
    d.mem_limit = caps[k];
    p.devices.push_back(std::make_unique<vk::Device>(*p.instance, indices[k], d));
  }
  std::vector<vk::Device*> devs;
  for (auto& d : p.devices) devs.push_back(d.get());
  pipeline::ExecutorOptions eo;
  eo.remat = po.remat;
  eo.link = pipeline::parse_link(f.link);
  p.executor = std::make_unique<pipeline::Executor>(m, devs, p.plan, eo);
  return p;
}

}  // namespace brigade::cli
