// `brigade plot`: the loss and accuracy curves of one or more training runs, drawn from their
// metrics.jsonl as SVG files any browser shows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "commands.h"
#include "io/metrics.h"
#include "io/safetensors.h"
#include "io/svg.h"
#include "util/error.h"

namespace brigade::cli {
namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::vector<std::string> runs, labels;
  std::string out;
  size_t smooth = 20;
};

struct Run {
  std::string file, dir, label;
  io::Metrics metrics;
};

// RUN is a run's directory (holding metrics.jsonl) or the .jsonl file itself.
Run open_run(const std::string& arg) {
  std::error_code ec;
  const fs::path p(arg);
  Run r;
  if (fs::is_directory(p, ec)) {
    r.file = (p / "metrics.jsonl").string();
    if (!fs::exists(r.file, ec)) throw UserError(arg + ": holds no metrics.jsonl; give a run's directory or a .jsonl file");
    r.dir = arg;
    const fs::path full = fs::weakly_canonical(p, ec);  // "." and "runs/cnn/" have a name too
    r.label = (ec ? p : full).filename().string();
  } else if (fs::exists(p, ec)) {
    r.file = arg;
    r.dir = p.has_parent_path() ? p.parent_path().string() : ".";
    r.label = p.stem().string();
  } else {
    throw UserError(arg + ": no such run directory or metrics file");
  }
  r.metrics = io::read_metrics(r.file);
  if (!r.metrics.torn.empty())
    std::fprintf(stderr, "brigade: warning: %s: a last line cut short, left out\n", r.metrics.torn.c_str());
  if (r.metrics.train.empty() && r.metrics.eval.empty())
    throw UserError(r.file + ": holds no \"train\" or \"eval\" records to plot");
  return r;
}

// A resumed run appends from its checkpoint's step and so logs some steps twice: the later
// record of a key replaces the earlier one, and points go in key order.
template <class R, class Key>
std::vector<R> latest_per_key(std::vector<R> records, Key key) {
  std::stable_sort(records.begin(), records.end(), [&](const R& a, const R& b) { return key(a) < key(b); });
  std::vector<R> out;
  for (size_t i = 0; i < records.size(); ++i)
    if (i + 1 == records.size() || key(records[i + 1]) != key(records[i])) out.push_back(records[i]);
  return out;
}

std::string count(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

void write_text(const fs::path& path, const std::string& text) {
  io::write_atomically(path.string(), text);
}

void run_plot(PlotArgs a) {
  if (!a.labels.empty() && a.labels.size() != a.runs.size())
    throw UserError("--labels: " + count(a.labels.size(), "label") + " for " + count(a.runs.size(), "run") +
                    " (labels are one comma-separated list: --labels a,b)");
  std::vector<Run> runs;
  for (size_t i = 0; i < a.runs.size(); ++i) {
    runs.push_back(open_run(a.runs[i]));
    if (!a.labels.empty()) runs.back().label = a.labels[i];
  }
  const fs::path out = a.out.empty() ? fs::path(runs[0].dir) : fs::path(a.out);

  io::Chart loss{a.smooth > 1 ? "Loss (training: mean of the last " + std::to_string(a.smooth) + " records)" : "Loss",
                 "step", "loss"};
  io::Chart accuracy{"Accuracy", "step", "accuracy"};
  size_t train_points = 0, eval_points = 0, accuracy_points = 0, accuracy_runs = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    const int color = int(i);  // a run's curves share its colour; solid is training, dashed evaluation
    const auto train = latest_per_key(r.metrics.train, [](const io::TrainRecord& t) { return t.step; });
    if (!train.empty()) {
      io::Series s{.label = r.label + " train", .color = color};
      for (const io::TrainRecord& t : train) s.x.push_back(double(t.step)), s.y.push_back(t.loss);
      s.y = io::smooth(s.y, a.smooth);
      loss.series.push_back(std::move(s));
      train_points += train.size();
    }
    const size_t accuracy_curves = accuracy.series.size();
    const auto eval = latest_per_key(r.metrics.eval, [](const io::EvalRecord& e) { return std::pair(e.split, e.step); });
    for (size_t j = 0; j < eval.size();) {
      const std::string& split = eval[j].split;
      io::Series l{.label = r.label + " " + split, .dashed = true, .markers = true, .color = color};
      io::Series acc = l;
      for (; j < eval.size() && eval[j].split == split; ++j) {
        l.x.push_back(double(eval[j].step)), l.y.push_back(eval[j].loss);
        acc.x.push_back(double(eval[j].step)), acc.y.push_back(eval[j].accuracy);
        accuracy_points += std::isfinite(eval[j].accuracy);
      }
      eval_points += l.x.size();
      loss.series.push_back(std::move(l));
      if (std::any_of(acc.y.begin(), acc.y.end(), [](double v) { return std::isfinite(v); }))
        accuracy.series.push_back(std::move(acc));
    }
    accuracy_runs += accuracy.series.size() > accuracy_curves;
  }

  // Both files are rendered before either is written, so an error leaves neither half-done.
  const std::string loss_svg = io::render_svg(loss);
  const std::string accuracy_svg = accuracy.series.empty() ? "" : io::render_svg(accuracy);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw UserError(out.string() + ": cannot create the output directory (" + ec.message() + ")");
  write_text(out / "loss.svg", loss_svg);
  std::printf("%s: %s, %zu training and %zu evaluation points\n", (out / "loss.svg").c_str(),
              count(runs.size(), "run").c_str(), train_points, eval_points);
  if (accuracy_svg.empty()) return;
  write_text(out / "accuracy.svg", accuracy_svg);
  std::printf("%s: %s, %zu evaluation points\n", (out / "accuracy.svg").c_str(),
              count(accuracy_runs, "run").c_str(), accuracy_points);
}

}  // namespace

void plot_runs(const std::vector<std::string>& runs, const std::vector<std::string>& labels,
               const std::string& out, size_t smooth) {
  run_plot(PlotArgs{runs, labels, out, smooth});
}

void add_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "draw runs' loss (and accuracy) curves from their metrics.jsonl as loss.svg and accuracy.svg");
  cmd->add_option("runs", a->runs, "a run's directory holding metrics.jsonl, or a .jsonl file (one or more)")
      ->required();
  cmd->add_option("--out", a->out, "directory to write the SVG files (default: the first run's directory)");
  cmd->add_option("--labels", a->labels, "legend names of the runs, comma-separated (default: directory names)")
      ->delimiter(',')
      ->allow_extra_args(false);  // one comma-separated argument, so RUNs after it stay RUNs
  cmd->add_option("--smooth", a->smooth, "training loss: trailing mean over this many records (1: raw)")
      ->check(CLI::Range(size_t(1), size_t(1000000)))
      ->capture_default_str();
  cmd->callback([a] { run_plot(*a); });
}

}  // namespace brigade::cli
