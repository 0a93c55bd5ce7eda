// Checks of numeric flags that refuse in words: CLI11's PositiveNumber and NonNegativeNumber
// name their upper bound, the largest double, in all of its 309 digits.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "util/error.h"

namespace brigade::cli {

namespace detail {
// Refuses text that is not a number, or a number below 0 (or at 0, unless `zero_too`).
inline CLI::Validator number_check(const char* name, const char* expected, bool zero_too) {
  return CLI::Validator(
      [expected, zero_too](std::string& text) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(text, x)) return "'" + text + "' is not a number";
        return (x > 0 || (zero_too && x == 0)) ? std::string() : text + " is out of range; expected " + expected;
      },
      name);
}
}  // namespace detail

// A path, not an empty word (which would read as the default left unsaid).
inline CLI::Validator path_check(const char* expected) {
  return CLI::Validator([expected](std::string& v) { return v.empty() ? std::string("empty; expected ") + expected : ""; },
                        "PATH");
}

// A number above 0.
inline const CLI::Validator kPositive = detail::number_check("POSITIVE", "a number above 0", false);
// 0 or a number above it.
inline const CLI::Validator kNonNegative = detail::number_check("NONNEGATIVE", "0 or more", true);

// A bench's --micro-batches, every M from 1 to the mini-batch's `batch` samples, checked before
// the first is timed.
inline void check_micro_batch_list(const std::vector<uint32_t>& list, uint32_t batch) {
  if (list.empty()) throw UserError("--micro-batches: give at least one number of micro-batches");
  for (uint32_t M : list)
    if (M == 0 || M > batch)
      throw UserError("--micro-batches: " + std::to_string(M) + " is not between 1 and the " + std::to_string(batch) +
                      " samples of a mini-batch (--batch-size); give each M at most " + std::to_string(batch));
}

// A bench's chart folder (--svg): made, and each of its `files` known writable, before the work.
inline void prepare_chart_folder(const std::string& dir, std::initializer_list<const char*> files) {
  std::filesystem::create_directories(dir);
  for (const char* file : files) io::check_writable(dir + "/" + file);
}

}  // namespace brigade::cli
