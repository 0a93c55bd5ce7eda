#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "io/metrics.h"
#include "util/error.h"

namespace io_metrics_test {

using namespace brigade;
using namespace brigade::io;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path d = fs::temp_directory_path() / ("brigade-metrics-" + std::to_string(getpid()));
  fs::create_directories(d);
  std::ofstream(d / name, std::ios::binary) << text;
  return d / name;
}

std::string refusal(const std::string& text) {
  try {
    parse_metrics(text, "run/metrics.jsonl");
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("metrics.jsonl reads train and eval records and skips other kinds") {
  const fs::path path = write_file("metrics.jsonl",
      R"({"kind":"start","model":"fashion-cnn","devices":[0,0]})" "\n"
      R"({"kind":"train","step":1,"epoch":0.001,"loss":2.3,"lr":0.001,"grad_norm":1.5,"samples_per_s":512.0,"elapsed_s":0.2})" "\n"
      "\n"
      R"({"kind":"train","step":2,"epoch":0.002,"loss":null,"lr":0.001,"tokens_per_s":9000,"elapsed_s":0.4})" "\r\n"
      R"({"kind":"eval","step":2,"epoch":0.002,"split":"test","loss":1.9,"accuracy":0.41})" "\n"
      R"({"kind":"eval","step":2,"epoch":0.002,"split":"val","loss":2.0})" "\n"
      R"({"kind":"checkpoint","step":2,"path":"ckpt/2.safetensors"})" "\n"
      R"({"kind":"end","elapsed_s":0.5})");  // no newline after the last line
  const Metrics m = read_metrics(path.string());
  REQUIRE(m.train.size() == 2);
  CHECK(m.train[0].step == 1);
  CHECK(m.train[0].loss == 2.3);
  CHECK(m.train[0].grad_norm == 1.5);
  CHECK(m.train[0].samples_per_s == 512.0);
  CHECK(std::isnan(m.train[0].tokens_per_s));
  CHECK(m.train[1].step == 2);
  CHECK(std::isnan(m.train[1].loss));  // null: how a writer stores a NaN loss
  CHECK(std::isnan(m.train[1].grad_norm));
  CHECK(m.train[1].tokens_per_s == 9000);
  REQUIRE(m.eval.size() == 2);
  CHECK(m.eval[0].split == "test");
  CHECK(m.eval[0].accuracy == 0.41);
  CHECK(m.eval[1].split == "val");
  CHECK(m.eval[1].loss == 2.0);
  CHECK(std::isnan(m.eval[1].accuracy));  // a text model has no accuracy
  fs::remove_all(path.parent_path());
}

TEST_CASE("a bad metrics line is refused naming the file and the line") {
  const std::string good = R"({"kind":"train","step":1,"loss":2.3})" "\n";
  CHECK(refusal(good + good) == "accepted");
  CHECK(refusal(good + "\n" + R"({"kind":"train","step":2,"loss":)" "\n" + good)
            .starts_with("run/metrics.jsonl:3: not valid JSON"));
  CHECK(refusal(good + "[1,2]\n").starts_with("run/metrics.jsonl:2: not a JSON object"));
  CHECK(refusal(R"({"step":1,"loss":2})").starts_with("run/metrics.jsonl:1: a record without a \"kind\""));
  CHECK(refusal(R"({"kind":"train","loss":2})") == "run/metrics.jsonl:1: a \"train\" record without \"step\"");
  CHECK(refusal(R"({"kind":"eval","step":3,"split":"test"})") == "run/metrics.jsonl:1: a \"eval\" record without \"loss\"");
  CHECK(refusal(R"({"kind":"train","step":1.5,"loss":2})") == "run/metrics.jsonl:1: \"step\" is not an integer");
  CHECK(refusal(R"({"kind":"train","step":1,"loss":"low"})") == "run/metrics.jsonl:1: \"loss\" is not a number");
  CHECK(refusal(R"({"kind":"eval","step":1,"loss":1,"split":7})") == "run/metrics.jsonl:1: \"split\" is not a string");
  CHECK(refusal(R"({"kind":"mystery","anything":[})" "\n").starts_with("run/metrics.jsonl:1: not valid JSON"));
  CHECK(refusal(good + R"({"kind":"train","step":2,"loss":1e999})") ==
        "run/metrics.jsonl:2: not valid JSON (number overflow parsing '1e999'); each line must be one JSON object");
  for (const std::string& r : {refusal("{\n"), refusal(good + "}{\n")}) CHECK(r.find('\n') == std::string::npos);
}

// A full disk or a killed run leaves its last record cut short, without a newline: readers
// leave it out and say where it was; a broken line with its newline is refused.
TEST_CASE("a torn last metrics line is left out, and said") {
  const std::string good = R"({"kind":"train","step":1,"loss":2.3})" "\n";
  const Metrics m = parse_metrics(good + R"({"kind":"train","st)", "run/metrics.jsonl");
  CHECK(m.train.size() == 1);
  CHECK(m.torn == "run/metrics.jsonl:2");
  CHECK(parse_metrics(good, "run/metrics.jsonl").torn.empty());
  CHECK(refusal(good + R"({"kind":"train","st)" "\n" + good).starts_with("run/metrics.jsonl:2: not valid JSON"));
}

// Resumed at step 2: the records up to it stay, later steps and the end go, and so does a
// torn last line; a file it cannot read, or one with a bad line, is refused and left as it is.
TEST_CASE("a resumed metrics file keeps its records up to the step and refuses what it cannot read") {
  const std::string head = R"({"kind":"start","model":"m"})" "\n" R"({"kind":"train","step":1,"loss":2.3})" "\n"
                           R"({"kind":"eval","step":2,"loss":2.1})" "\n";
  const std::string later = R"({"kind":"train","step":3.0,"loss":2.0})" "\n" R"({"kind":"end","elapsed_s":1})" "\n";
  const fs::path path = write_file("resumed.jsonl", head + later + R"({"kind":"tra)");
  const auto text = [&] {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  {
    MetricsFile f(path.string(), true, 2);
    f.write(R"({"kind":"train","step":3,"loss":1.9})");
  }
  CHECK(text() == head + R"({"kind":"train","step":3,"loss":1.9})" "\n");
  for (const std::string& bad : {std::string("5\n"), std::string(R"({"kind":"x","step":-1})" "\n"),
                                 std::string(R"({"kind":"train","step":"2","loss":1})" "\n")}) {
    CAPTURE(bad);
    std::ofstream(path, std::ios::binary) << head + bad + later;
    CHECK_THROWS_WITH_AS(MetricsFile(path.string(), true, 2), doctest::Contains((path.string() + ":4: ").c_str()), UserError);
    CHECK_THROWS_WITH_AS(MetricsFile(path.string(), true, 2), doctest::Contains("; fix or remove that line to resume"), UserError);
    CHECK(text() == head + bad + later);
  }
  fs::remove(path);
  fs::create_directory(path);  // where a file cannot be read
  CHECK_THROWS_WITH_AS(MetricsFile(path.string(), true, 2), doctest::Contains((path.string() + ": ").c_str()), UserError);
  CHECK(fs::is_directory(path));
  fs::remove_all(path.parent_path());
}

TEST_CASE("a missing metrics file is refused with its path") {
  CHECK_THROWS_WITH_AS(read_metrics("/nonexistent/metrics.jsonl"),
                       doctest::Contains("/nonexistent/metrics.jsonl: cannot open"), UserError);
  CHECK(parse_metrics("", "empty.jsonl").train.empty());
}

}  // namespace io_metrics_test
