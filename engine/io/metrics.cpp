#include "io/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "io/files.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace brigade::io {
namespace {

using nlohmann::json;

struct Line {
  const json& record;
  std::string where;  // "FILE:LINE"

  [[noreturn]] void fail(const std::string& what) const { throw UserError(where + ": " + what); }

  double number(const char* key, bool required = false) const {
    const auto it = record.find(key);
    if (it == record.end() && required)
      fail("a \"" + record.at("kind").get<std::string>() + "\" record without \"" + key + "\"");
    if (it == record.end() || it->is_null()) return NAN;
    if (!it->is_number()) fail(std::string("\"") + key + "\" is not a number");
    return it->get<double>();
  }

  int64_t step() const {
    const double s = number("step", true);
    if (s != std::floor(s) || std::fabs(s) > 9e15) fail("\"step\" is not an integer");
    return int64_t(s);
  }
};

}  // namespace

Metrics parse_metrics(std::string_view text, const std::string& source) {
  Metrics m;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    json record;
    try {
      record = json::parse(line.begin(), line.end());
    } catch (const json::parse_error& e) {
      if (end == text.size()) {  // the last line, without its newline: a write cut short
        m.torn = where;
        break;
      }
      throw UserError(where + ": not valid JSON (error at column " + std::to_string(e.byte) +
                      "); each line must be one JSON object");
    } catch (const json::exception& e) {  // a number past a double's range
      const std::string what = e.what();
      throw UserError(where + ": not valid JSON (" + what.substr(what.find("] ") + 2) +
                      "); each line must be one JSON object");
    }
    if (!record.is_object()) throw UserError(where + ": not a JSON object; each line must be one");
    const auto kind = record.find("kind");
    if (kind == record.end() || !kind->is_string()) throw UserError(where + ": a record without a \"kind\" string");
    const Line l{record, where};
    if (*kind == "train") {
      m.train.push_back({l.step(), l.number("epoch"), l.number("loss", true), l.number("lr"),
                         l.number("grad_norm"), l.number("samples_per_s"), l.number("tokens_per_s"),
                         l.number("elapsed_s")});
    } else if (*kind == "eval") {
      std::string split = "eval";
      if (const auto s = record.find("split"); s != record.end()) {
        if (!s->is_string()) l.fail("\"split\" is not a string");
        split = *s;
      }
      m.eval.push_back({l.step(), split, l.number("epoch"), l.number("loss", true), l.number("accuracy")});
    }
  }
  return m;
}

namespace {

// The file's text (io::read_file's refusals: a folder, a device, what cannot be opened or read).
std::string read_text(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

Metrics read_metrics(const std::string& path) { return parse_metrics(read_text(path), path); }

MetricsFile::MetricsFile(const std::string& path, bool resume, uint64_t step) : path_(path) {
  std::string kept;
  if (resume && std::filesystem::exists(path)) {
    const std::string text = read_text(path);
    try {
      parse_metrics(text, path);  // refuses what it cannot read, by line
    } catch (const UserError& e) {
      throw UserError(std::string(e.what()) + "; fix or remove that line to resume");
    }
    std::istringstream in(text);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto j = json::parse(line, nullptr, false);
      if (j.is_discarded()) break;  // past parse_metrics, only the torn last line
      const auto at = j.find("step");  // a whole number (2.0 as parse_metrics takes it), or none
      const bool whole = at != j.end() && at->is_number() && at->get<double>() >= 0 &&
                         at->get<double>() == std::floor(at->get<double>());
      if (at != j.end() && !whole && !at->is_null())
        throw UserError(path + ":" + std::to_string(n) + ": \"step\" is not a whole number, 0 or more; fix or remove that line to resume");
      const bool later = whole && at->get<double>() > double(step);
      if (!later && j.value("kind", "") != "end") kept += line + "\n";
    }
  }
  write_atomically(path, kept);
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw UserError(path + ": cannot open for writing (" + std::strerror(errno) + ")");
}

MetricsFile::~MetricsFile() { std::fclose(f_); }

void MetricsFile::write(std::string_view json_line) {
  const std::string line = std::string(json_line) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    throw UserError(path_ + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace brigade::io
