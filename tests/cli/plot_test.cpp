// `brigade plot` end to end: a run's metrics.jsonl becomes loss.svg and accuracy.svg, several
// runs share a chart, and a bad file is one line naming it with nothing written.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run.h"
#include "xml_check.h"

namespace cli_plot_test {

using namespace brigade;
using test::brigade_run, test::Result, test::scratch_dir;
namespace fs = std::filesystem;

namespace {

// A classifier's run: `steps` training records, an evaluation every 50 steps, and the
// start and end records a trainer writes around them.
void write_run(const fs::path& dir, int steps, bool accuracy) {
  fs::create_directories(dir);
  std::ofstream f(dir / "metrics.jsonl");
  f << R"({"kind":"start","model":"fashion-cnn","devices":[0]})" << "\n";
  for (int s = 1; s <= steps; ++s) {
    f << R"({"kind":"train","step":)" << s << R"(,"epoch":)" << s / 938.0 << R"(,"loss":)"
      << 2.3 / (1 + 0.05 * s) + 0.1 * ((s * 7) % 5) << R"(,"lr":0.001,"samples_per_s":512.0,"elapsed_s":)"
      << 0.01 * s << "}\n";
    if (s % 50 == 0) {
      f << R"({"kind":"eval","step":)" << s << R"(,"epoch":)" << s / 938.0 << R"(,"split":"test","loss":)"
        << 2.0 / (1 + 0.05 * s);
      if (accuracy) f << R"(,"accuracy":)" << 0.5 + s / 1000.0;
      f << "}\n";
    }
  }
  f << R"({"kind":"end","elapsed_s":9.5})" << "\n";
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("brigade plot draws a run's loss and accuracy as SVG next to its metrics") {
  const fs::path d = scratch_dir("plot");
  write_run(d / "cnn", 200, true);
  const Result r = brigade_run("plot " + (d / "cnn").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output == (d / "cnn" / "loss.svg").string() + ": 1 run, 200 training and 4 evaluation points\n" +
                        (d / "cnn" / "accuracy.svg").string() + ": 1 run, 4 evaluation points\n");
  const std::string loss = read(d / "cnn" / "loss.svg"), accuracy = read(d / "cnn" / "accuracy.svg");
  CHECK_MESSAGE(test::xml_problem(loss) == "", test::xml_problem(loss));
  CHECK_MESSAGE(test::xml_problem(accuracy) == "", test::xml_problem(accuracy));
  CHECK(loss.find(">cnn train</text>") != std::string::npos);
  CHECK(loss.find(">cnn test</text>") != std::string::npos);
  CHECK(accuracy.find(">cnn test</text>") != std::string::npos);
  CHECK(accuracy.find("train") == std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("brigade plot puts several runs on one chart under their labels") {
  const fs::path d = scratch_dir("plot-runs");
  write_run(d / "a", 120, false);  // a text model's run: no accuracy
  write_run(d / "b", 60, false);
  // --labels before the runs: it takes one argument, so the runs stay runs.
  const Result r = brigade_run("plot --labels 'one stage,four <stages>' " + (d / "a").string() + " " +
                               (d / "b" / "metrics.jsonl").string() + " --smooth 1 --out " + (d / "charts").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output == (d / "charts" / "loss.svg").string() + ": 2 runs, 180 training and 3 evaluation points\n");
  CHECK_FALSE(fs::exists(d / "charts" / "accuracy.svg"));
  const std::string loss = read(d / "charts" / "loss.svg");
  CHECK_MESSAGE(test::xml_problem(loss) == "", test::xml_problem(loss));
  CHECK(loss.find(">one stage train</text>") != std::string::npos);
  CHECK(loss.find(">four &lt;stages&gt; test</text>") != std::string::npos);
  size_t polylines = 0;
  for (size_t p = loss.find("<polyline"); p != std::string::npos; p = loss.find("<polyline", p + 1)) ++polylines;
  CHECK(polylines == 3);  // train and test of a, train of b: its one evaluation is a lone marker

  const Result dflt = brigade_run("plot " + (d / "b" / "metrics.jsonl").string());
  REQUIRE_MESSAGE(dflt.status == 0, dflt.output);
  CHECK(read(d / "b" / "loss.svg").find(">metrics train</text>") != std::string::npos);  // the file's stem
  fs::remove_all(d);
}

TEST_CASE("brigade plot keeps the later record of a step that a resumed run logged twice") {
  const fs::path d = scratch_dir("plot-resumed");
  std::ofstream(d / "metrics.jsonl") << R"({"kind":"train","step":1,"loss":3})" "\n"
                                     << R"({"kind":"train","step":2,"loss":9})" "\n"
                                     << R"({"kind":"train","step":3,"loss":9})" "\n"
                                     << R"({"kind":"train","step":2,"loss":2})" "\n"
                                     << R"({"kind":"train","step":3,"loss":1})" "\n";
  const Result r = brigade_run("plot --smooth 1 " + d.string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("1 run, 3 training and 0 evaluation points") != std::string::npos);
  const std::string loss = read(d / "loss.svg");
  const size_t start = loss.find("<polyline points=\"") + 18;
  const std::string points = loss.substr(start, loss.find('"', start) - start);
  CHECK(std::count(points.begin(), points.end(), ',') == 3);
  std::istringstream in(points);  // "x,y x,y x,y": x grows at every point, no line back to step 2
  double last_x = -1;
  for (std::string xy; in >> xy; last_x = std::stod(xy)) CHECK(std::stod(xy) > last_x);
  fs::remove_all(d);
}

TEST_CASE("brigade plot refuses bad input with one line and writes nothing") {
  const fs::path d = scratch_dir("plot-bad");
  write_run(d / "good", 10, true);
  fs::create_directories(d / "bad");
  std::ofstream(d / "bad" / "metrics.jsonl") << R"({"kind":"train","step":1,"loss":2.3})" "\n"
                                             << R"({"kind":"train","step":2,"loss":2.1)" "\n";
  fs::create_directories(d / "empty");
  std::ofstream(d / "empty" / "metrics.jsonl") << R"({"kind":"start"})" "\n";
  const std::string out = " --out " + (d / "out").string();
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"plot " + (d / "bad").string() + out, (d / "bad" / "metrics.jsonl").string() + ":2: not valid JSON"},
      {"plot " + (d / "good").string() + " " + (d / "bad").string() + out, "metrics.jsonl:2: not valid JSON"},
      {"plot " + (d / "missing").string() + out, "missing: no such run directory or metrics file"},
      {"plot " + d.string() + out, "holds no metrics.jsonl"},
      {"plot " + (d / "empty").string() + out, "holds no \"train\" or \"eval\" records"},
      {"plot " + (d / "good").string() + " --labels a,b" + out, "--labels: 2 labels for 1 run"},
  };
  for (const Case& c : cases) {
    const Result r = brigade_run(c.args);
    CHECK_MESSAGE(r.status != 0, c.args);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, c.args, " printed: ", r.output);
    CHECK_MESSAGE(lines(r.output) == 1, c.args, " printed: ", r.output);
  }
  CHECK_FALSE(fs::exists(d / "out"));  // nothing half-written
  fs::remove_all(d);
}

}  // namespace cli_plot_test
