#include "engine_words.h"

#include <map>

namespace brigade::cli {

namespace {

// Engine setting (PlanOptions, ExecutorOptions, StageSpec, the data, lr-schedule and optimizer
// settings)
// -> the flag that sets it.
const std::map<std::string, std::string, std::less<>>& flags() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"balance", "--balance"},
      {"base_lr", "--lr"},
      {"beta1", "--beta1"},
      {"beta2", "--beta2"},
      {"data", "--data"},
      {"devices", "--devices"},
      {"eps", "--eps"},
      {"link", "--link"},
      {"lr_schedule", "--lr-schedule"},
      {"memory_cap", "--mem-limit"},
      {"micro_batches", "--micro-batches"},
      {"min_lr", "--min-lr"},
      {"momentum", "--momentum"},
      {"partition", "--partition"},
      {"precision", "--precision"},
      {"remat", "--remat"},
      {"rows", "--batch-size"},
      {"schedule", "--schedule"},
      {"total_steps", "--steps"},
      {"virtual_stages", "--virtual-stages"},
      {"warmup_steps", "--warmup"},
      {"weight_decay", "--weight-decay"},
  };
  return table;
}

}  // namespace

std::string in_flags(std::string_view message) {
  std::string out;
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('`', at);
    const size_t close = open == std::string_view::npos ? open : message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const auto it = flags().find(message.substr(open + 1, close - open - 1));
    out += message.substr(at, open - at);
    if (it != flags().end()) {
      out += it->second;
    } else {
      out += message.substr(open, close - open + 1);
    }
    at = close + 1;
  }
  out += message.substr(at);
  return out;
}

}  // namespace brigade::cli
