// Byte sizes as people write them: "512MiB", "2GiB", "64KiB", "1048576".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

// Parses one size; throws UserError naming `what` (e.g. "the memory cap") on bad input.
uint64_t parse_size(std::string_view text, std::string_view what);

// Parses "SIZE" or "SIZE,SIZE,..." (one per device).
std::vector<uint64_t> parse_size_list(std::string_view text, std::string_view what);

// "3,5,4" -> {3, 5, 4}: unsigned decimal integers separated by commas; nullopt when the text
// is anything else (empty items, signs, spaces, values over 2^32 - 1).
std::optional<std::vector<uint32_t>> parse_uint_list(std::string_view text);

// "1.5 MiB", "512 B", "2.0 GiB".
std::string format_bytes(uint64_t bytes);

// A number as people write it, in the shortest of %g's forms: "0.001", "2", "1e-08", "nan".
std::string format_number(double value);

}  // namespace brigade
