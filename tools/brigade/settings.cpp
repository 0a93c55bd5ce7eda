// A run's settings as its checkpoint saves them (train.h): written as JSON, and read back
// held to what each one's flag takes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "train.h"
#include "util/error.h"

namespace brigade::cli {

nlohmann::json to_json(const Settings& s) {
  return {{"model", s.model},         {"model_toml", s.model_toml},   {"data", s.data},
          {"data_checksum", s.data_checksum},
          {"seed", s.seed},           {"batch_size", s.batch_size},   {"steps", s.steps},
          {"decay_steps", s.decay_steps},
          {"optimizer", s.optimizer}, {"lr", s.lr},                   {"min_lr", s.min_lr},
          {"weight_decay", s.weight_decay}, {"momentum", s.momentum}, {"beta1", s.beta1},
          {"beta2", s.beta2},         {"eps", s.eps},                 {"schedule", s.schedule},
          {"warmup", s.warmup},       {"clip", s.clip},               {"eval_every", s.eval_every},
          {"eval_batches", s.eval_batches}, {"precision", s.precision}, {"micro_batches", s.micro_batches}, {"plan", s.plan},
          {"plan_history", s.plan_history}};
}

namespace {

// The saved settings of a checkpoint (or its plan's flags, `prefix` "plan."), each held to
// what its flag takes: a string, a whole number from `least` to what its type holds, or a
// finite number (not negative where `non_negative`). A checkpoint Brigade wrote passes; one
// edited by hand or damaged is refused naming the setting.
struct SavedSettings {
  const nlohmann::json& j;
  const std::string& source;
  std::string prefix;

  [[noreturn]] void refuse(const char* key, const std::string& expected) const {
    const std::string text = j.at(key).dump();
    throw UserError(source + ": the saved training setting '" + prefix + key + "' is " +
                    (text.size() > 40 ? text.substr(0, 37) + "..." : text) + "; expected " + expected);
  }
  template <class T>
  void read(const char* key, T& out, uint64_t least = 0) const {
    const nlohmann::json& v = j.at(key);
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) refuse(key, "a string");
    } else {
      static_assert(std::is_unsigned_v<T>);
      if (!v.is_number_unsigned() || v.get<uint64_t>() < least || v.get<uint64_t>() > std::numeric_limits<T>::max())
        refuse(key, "a whole number from " + std::to_string(least) + " to " + std::to_string(std::numeric_limits<T>::max()));
    }
    out = v.get<T>();
  }
  void number(const char* key, double& out, bool non_negative = false) const {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || (non_negative && v.get<double>() < 0))
      refuse(key, non_negative ? "a finite number, 0 or more" : "a finite number");
    out = v.get<double>();
  }
};

// A setting (or a plan's flag) missing: json's own words name it.
[[noreturn]] void incomplete(const std::string& source, const nlohmann::json::exception& e) {
  std::string why = e.what();  // "[json.exception.out_of_range.403] key 'lr' not found"
  if (const size_t cut = why.find("] "); why.starts_with("[json.exception.") && cut != std::string::npos) why.erase(0, cut + 2);
  throw UserError(source + ": the saved training settings are incomplete (" + why + ")");
}

}  // namespace

Settings settings_from_json(const nlohmann::json& j, const std::string& source) {
  Settings s;
  if (!j.is_object()) throw UserError(source + ": metadata 'config' is not a JSON object of training settings");
  try {
    const SavedSettings in{j, source, ""};
    in.read("model", s.model), in.read("model_toml", s.model_toml), in.read("data", s.data), in.read("seed", s.seed);
    in.read("batch_size", s.batch_size, 1), in.read("steps", s.steps, 1), in.read("optimizer", s.optimizer);
    s.decay_steps = s.steps;
    if (j.contains("decay_steps")) in.read("decay_steps", s.decay_steps, 1);
    in.number("lr", s.lr), in.number("min_lr", s.min_lr, true), in.number("weight_decay", s.weight_decay, true);
    in.number("momentum", s.momentum), in.number("beta1", s.beta1), in.number("beta2", s.beta2);
    in.number("eps", s.eps, true);
    if (!(s.eps > 0)) in.refuse("eps", "a number above 0");
    // What the optimizer and the schedule take (optim::validate), refused naming the setting
    // rather than a flag the run was not given.
    if (!(s.lr > 0)) in.refuse("lr", "a number above 0");
    if (s.min_lr > s.lr) in.refuse("min_lr", "a number from 0 to lr's " + std::to_string(s.lr));
    for (const auto& [key, value] : {std::pair{"momentum", s.momentum}, std::pair{"beta1", s.beta1},
                                     std::pair{"beta2", s.beta2}})
      if (!(value >= 0 && value < 1)) in.refuse(key, "a number from 0 up to 1 (not 1)");
    in.read("schedule", s.schedule), in.read("warmup", s.warmup), in.number("clip", s.clip, true);
    in.read("eval_every", s.eval_every, 1), in.read("eval_batches", s.eval_batches);
    if (j.contains("data_checksum")) in.read("data_checksum", s.data_checksum);
    if (j.contains("micro_batches")) in.read("micro_batches", s.micro_batches);
    if (j.contains("precision")) {
      in.read("precision", s.precision);
      for (const std::string& item : split_list(s.precision))
        if (item != "auto" && item != "fp32" && item != "bf16" && item != "fp16")
          in.refuse("precision", "fp32, bf16, fp16 or auto, one for all stages or one per stage");
    }
    if (j.contains("plan") && !j.at("plan").is_null()) {  // --plan auto's choice: recorded_flags reads it
      if (!j.at("plan").is_object()) in.refuse("plan", "a JSON object of pipeline flags");
      s.plan = j.at("plan");
    }
    if (j.contains("plan_history")) {  // each re-plan's record, kept and added to
      if (!j.at("plan_history").is_array()) in.refuse("plan_history", "a JSON array of re-plans");
      s.plan_history = j.at("plan_history");
    }
  } catch (const nlohmann::json::exception& e) {
    incomplete(source, e);
  }
  if (s.optimizer != "adamw" && s.optimizer != "sgd")
    throw UserError(source + ": the saved training setting 'optimizer' is '" + s.optimizer + "'; expected adamw or sgd");
  if (s.schedule != "constant" && s.schedule != "cosine")
    throw UserError(source + ": the saved training setting 'schedule' is '" + s.schedule + "'; expected constant or cosine");
  return s;
}

std::string trained_precision(const Settings& s) {
  if (s.plan.is_object() && s.plan.contains("precision") && s.plan["precision"].is_string())
    return s.plan["precision"].get<std::string>();
  return s.precision;
}

PipelineFlags recorded_flags(const PipelineFlags& f, const nlohmann::json& plan, const std::string& source) {
  PipelineFlags out = f;
  out.plan = "given";
  try {
    const SavedSettings in{plan, source, "plan."};
    in.read("devices", out.devices), in.read("micro_batches", out.micro_batches, 1);
    in.read("schedule", out.schedule), in.read("virtual_stages", out.virtual_stages, 1);
    in.read("remat", out.remat), in.read("precision", out.precision);
    in.read("balance", out.balance), in.read("mem_limit", out.mem_limit);
    // The devices' UUIDs and names where the plan keeps them (indices are the loader's order).
    for (const auto& [key, to] : {std::pair{"device_uuids", &out.device_uuids}, std::pair{"device_names", &out.device_names}})
      if (plan.contains(key)) {
        const nlohmann::json& v = plan.at(key);
        if (!v.is_array() || v.size() != split_list(out.devices).size() ||
            !std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_string(); }))
          in.refuse(key, "an array of strings, one per entry of 'devices'");
        *to = v.get<std::vector<std::string>>();
      }
    if (plan.contains("device_uuids") != plan.contains("device_names"))
      in.refuse(plan.contains("device_uuids") ? "device_uuids" : "device_names",
                "kept with 'device_names' and 'device_uuids' both (one per entry of 'devices')");
  } catch (const nlohmann::json::exception& e) {
    incomplete(source, e);
  }
  return out;
}

const std::vector<std::string>& setting_flags() {
  static const std::vector<std::string> flags{"--model", "--set", "--data", "--seed", "--batch-size", "--steps",
                                              "--epochs", "--optimizer", "--lr", "--min-lr", "--weight-decay",
                                              "--momentum", "--beta1", "--beta2", "--eps", "--lr-schedule",
                                              "--warmup", "--clip", "--eval-every", "--eval-batches"};
  return flags;
}

}  // namespace brigade::cli
