// Checks of numeric flags that refuse in words: CLI11's PositiveNumber and NonNegativeNumber
// name their upper bound, the largest double, in all of its 309 digits.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

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

}  // namespace brigade::cli
