// The flags every command that runs a pipeline takes (--devices, --micro-batches, --schedule,
// --virtual-stages, --remat, --link, --balance, --mem-limit, --partition), and what they
// open: one logical device per stage, the plan, and the executor.
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "mpi/world.h"
#include "optim/optimizer.h"
#include "pipeline/batch.h"
#include "pipeline/executor.h"
#include "pipeline/plan.h"
#include "vk/device.h"
#include "vk/instance.h"

namespace brigade::cli {

// Which passes a command runs: training (every flag), evaluation (forward passes of batches:
// no --remat or --bucket-size) or generation (one sequence: no micro-batches, schedules or
// replicas either).
enum class PipelineUse { Training, Evaluation, Generation };

struct PipelineFlags {
  PipelineUse use = PipelineUse::Training;  // not a flag: the command's (add_pipeline_flags)
  std::string devices = "0";
  uint32_t replicas = 1;  // under mpirun: data-parallel copies of the pipeline
  std::string bucket_size = "25MiB";  // replicas' gradients summed in buckets of this size
  uint32_t micro_batches = 1;
  std::string schedule = "gpipe";
  uint32_t virtual_stages = 1;
  std::string remat = "never";
  std::string link = "auto";
  std::string balance;
  std::string mem_limit;
  std::string partition = "cost";
  std::string precision = "fp32";
  std::string tilings = "tuned";  // or default: no tuned tilings (ops/tuned_tilings.h)
  bool validation = false;
  bool record_each_step = false;
  bool cpu_times = false;  // not a flag: bench profile's (ExecutorOptions::cpu_times)
  std::string plan = "given";  // or auto: the flags left out chosen by the planner (auto_plan.h)
  // Not flags: a recorded plan's devices (one each per entry of `devices`), found by UUID
  // wherever the loader lists them now, else by name (recorded_devices).
  std::vector<std::string> device_uuids, device_names;
  // Whether the command line gave `flag` ("--micro-batches"): what --plan auto leaves alone.
  bool given(const std::string& flag) const {
    if (const auto f = fixed.find(flag); f != fixed.end()) return f->second;
    const auto it = options.find(flag);
    return it != options.end() && it->second->count() > 0;
  }
  std::map<std::string, const CLI::Option*> options;  // add_pipeline_flags's, by flag
  // What re-planning (recovery.h) says over the command line: a flag counted as given (true)
  // or left to the planner (false).
  std::map<std::string, bool> fixed;
};

// The flags of `use` (also kept in f.use: evaluation and generation plan forward passes only).
void add_pipeline_flags(CLI::App& cmd, PipelineFlags& f, PipelineUse use = PipelineUse::Training);
// --model, --set and --batch-size of the commands that build a model and plan for a batch
// size; returns --model's option (plan requires it).
CLI::Option* add_model_flags(CLI::App& cmd, std::string& model, std::vector<std::string>& set, uint32_t& batch);

// What the bench commands that build one model's pipelines share.
struct ModelPipeline {
  std::string model = "fashion-cnn";
  std::vector<std::string> set;
  uint32_t batch = 64;
  PipelineFlags pipeline;
};
// add_model_flags and add_pipeline_flags for `o`.
void add_model_pipeline_flags(CLI::App& cmd, ModelPipeline& o);
// --devices for K logical devices of one device: "device,device,...".
std::string logical_devices(const std::string& device, uint32_t K);

// "0,0,1" -> {0, 0, 1}; each item an index, a unique part of a device's name or a UUID
// prefix ("llvmpipe,swiftshader"); refuses what names no device, or several.
std::vector<uint32_t> parse_devices(const std::string& text, const vk::Instance& instance);

// What the planner and the link lines need of a stage's device, wherever it runs.
struct StageDevice {
  std::string name, driver;
  uint32_t index = 0;  // in its host's `brigade devices`
  uint64_t heap = 0;   // the largest device-local heap
  std::string rank;    // under mpirun: "rank 1 on host"
  ops::Precision multiplies = ops::Precision::Bf16;  // --precision auto there (ops::auto_precision)
  std::array<std::string, 3> products;   // ops::matrix_path for each ops::Precision
  std::array<std::string, 3> attention;  // ops::attention_path for each
  // The GPU as one of the job's: in one process its first entry's index (vk::gpu_of: two
  // drivers' entries of one card share it); under mpirun each host's GPUs numbered apart
  // (ranks on one host and GPU share it; another host's is another).
  uint32_t physical = 0;
  std::string uuid;  // its deviceUUID (vk::PhysicalInfo::device_uuid_string); in one process
};

// "bf16,fp32" -> {"bf16", "fp32"}.
std::vector<std::string> split_list(const std::string& text);
std::string join_list(const std::vector<std::string>& items);  // split_list undone
// What each device makes of `m` (pipeline::device_facts), per device (null: another rank's,
// learnt from it); the same on every rank.
std::vector<pipeline::DeviceFacts> device_facts(const model::Model& m, const std::vector<vk::Device*>& devices);
// A device as a stage's: its names, heap and what it multiplies; `all`, every device listed
// (vk::Instance::describe_devices), tells which entries are one GPU.
StageDevice describe(const vk::Device& dev, const std::vector<vk::PhysicalInfo>& all);
// --mem-limit for n stages or devices: one size for all or one each (0: no cap); `per` ends
// the refusal of another count ("stages; give one for all or one per stage").
std::vector<uint64_t> memory_caps(const std::string& mem_limit, size_t n, const std::string& per);

// The devices of --devices with their --mem-limit caps, opened. Under mpirun (K = ranks /
// --replicas stages), each rank opens one: the entry of --devices at its local rank (the
// list repeating), and learns the others' from every rank.
struct Devices {
  std::unique_ptr<vk::Instance> instance;
  std::vector<std::unique_ptr<vk::Device>> devices;  // per stage; null: another rank's
  std::vector<StageDevice> stages;
  std::vector<uint64_t> caps;
};
Devices open_devices(const PipelineFlags& f);
// A recorded plan's devices as listed now: each entry by its UUID (the recorded index where
// several share it), else by its name (with a warning), else refused naming it.
std::vector<uint32_t> recorded_devices(const PipelineFlags& f, const std::vector<vk::PhysicalInfo>& listed);
// The tuned tilings of `dev` from the cache (ops/tuned_tilings.h), unless --tilings default
// says none; a line on stderr, once a process for each device, where it has some.
void use_tilings(const PipelineFlags& f, const vk::Device& dev);
// Each boundary's path under --link (pipeline::choose_links): every pair of neighbouring
// devices is probed; a forced path a pair cannot take is refused here, before anything is
// allocated.
std::vector<pipeline::LinkChoice> choose_links(const PipelineFlags& f, Devices& d, pipeline::LinkKind kind);
// One line per boundary, "link 0->1 (llvmpipe -> SwiftShader driver): host, because ..."
// (with virtual stages, boundaries are between cells: "link 3->4 (stage 1 -> stage 0, ...").
std::string link_lines(const std::vector<pipeline::LinkChoice>& links, const Devices& d);
// --precision for the stages, one value each (one given serves all); auto resolved per stage
// from what its device multiplies (StageDevice::multiplies). Refuses unknown values and lists
// of the wrong length.
std::vector<ops::Precision> stage_precisions(const std::string& text, const std::vector<StageDevice>& stages);
// The stages' precisions as said back: "bf16", "bf16,fp32", "bf16 (auto)".
std::string precision_words(const std::string& text, const std::vector<ops::Precision>& stages);
// Whether a pipeline of those stages trains with loss scaling (optim::LossScale): when a
// stage keeps fp16, whose range small gradients fall below.
bool scales_loss(const std::vector<ops::Precision>& stages);
// Why auto chose a precision (ops::auto_precision), by ops::Precision.
inline constexpr const char* kAutoPrecision[] = {
    "fp32", "bf16 (16 bits with fp32's exponent range: no loss scaling; on matrix units where the device multiplies bf16)",
    "fp16 (the device's matrix units multiply fp16, not bf16; trained with loss scaling)"};
// The plan for `rows`-sample mini-batches on those devices.
pipeline::Plan make_plan(const model::Model& m, const PipelineFlags& f, Devices& d, uint32_t rows,
                         uint32_t optimizer_states);

struct AutoPlan;
// The pipeline for `rows`-sample mini-batches: devices opened, plan made, executor built.
struct Pipeline {
  std::unique_ptr<vk::Instance> instance;
  std::vector<std::unique_ptr<vk::Device>> devices;
  std::string link_lines;  // link_lines() of the executor's boundaries ("" with one stage)
  pipeline::Plan plan;
  std::vector<ops::Precision> precision;  // per stage, auto resolved
  PipelineFlags flags;                    // as run: --plan auto's choice where it chose
  std::shared_ptr<const AutoPlan> chosen;  // --plan auto: what it chose and why (auto_plan.h)
  std::unique_ptr<pipeline::Executor> executor;
};
Pipeline open_pipeline(const model::Model& m, const PipelineFlags& f, uint32_t rows,
                       uint32_t optimizer_states);
// A benchmark's warm-up: training steps 1, 2, ... of `optimizer` at `lr` on `batch` until its
// pipelines are compiled, its memory touched and every action's recording made once
// (Executor::recording_turns), so that each step it times replays as a long run's do. Returns
// the number of the first step to time.
uint64_t warm_up(pipeline::Executor& ex, const pipeline::Batch& batch, optim::Optimizer* optimizer, double lr);

}  // namespace brigade::cli
