// Checks of numeric flags that refuse in words: CLI11's PositiveNumber and NonNegativeNumber
// name their upper bound, the largest double, in all of its 309 digits.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace brigade::cli {

namespace detail {
template <bool kZeroToo>
CLI::Validator number_check(const char* name, const char* expected) {
  return CLI::Validator(
      [expected](std::string& text) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(text, x)) return "'" + text + "' is not a number";
        return (kZeroToo ? x >= 0 : x > 0) ? std::string() : text + " is out of range; expected " + expected;
      },
      name);
}
}  // namespace detail

// A number above 0.
inline const CLI::Validator kPositive = detail::number_check<false>("POSITIVE", "a number above 0");
// 0 or a number above it.
inline const CLI::Validator kNonNegative = detail::number_check<true>("NONNEGATIVE", "0 or more");

}  // namespace brigade::cli
