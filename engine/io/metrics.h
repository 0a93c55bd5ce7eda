// A training run's DIR/metrics.jsonl: one JSON object per line, told apart by "kind".
//   {"kind":"train","step":12,"epoch":0.0128,"loss":2.21,"lr":0.001,"grad_norm":1.3,
//    "samples_per_s":512.0,"elapsed_s":3.2}          ("tokens_per_s" may replace samples_per_s)
//   {"kind":"eval","step":938,"epoch":1.0,"split":"test","loss":0.41,"accuracy":0.87}
// Records of other kinds ("start", "end", ...) are skipped, so the file can grow new kinds
// without breaking its readers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::io {

// A number that is absent, or null (how JSON writers store NaN), reads as NaN.
struct TrainRecord {
  int64_t step = 0;
  double epoch, loss, lr, grad_norm, samples_per_s, tokens_per_s, elapsed_s;
};

struct EvalRecord {
  int64_t step = 0;
  std::string split;  // "test" or "val"
  double epoch, loss, accuracy;  // accuracy is NaN for text models
};

struct Metrics {
  std::vector<TrainRecord> train;  // in the file's order
  std::vector<EvalRecord> eval;
  // "FILE:LINE" of a last line cut short (no newline, not JSON: a write that a full disk or a
  // killed process left unfinished), skipped; empty where there is none.
  std::string torn;
};

// Throws UserError naming the file and line of the first line that is not a JSON object (but
// a torn last line, Metrics::torn), or a train or eval record without an integer "step" and
// a "loss".
Metrics parse_metrics(std::string_view text, const std::string& source);
Metrics read_metrics(const std::string& path);

// The file a run writes: one line of JSON appended and flushed per record, so a crash loses
// nothing before it.
class MetricsFile {
 public:
  // Fresh: truncates. Resumed at `step`: keeps the records up to that step, drops the rest
  // (steps that the resumed run will redo) and a torn last line; a file that cannot be read,
  // or with a line parse_metrics refuses, is refused (UserError naming it) and left as it is.
  MetricsFile(const std::string& path, bool resume, uint64_t step);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  void write(std::string_view json_line);  // one record, without its newline

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace brigade::io
