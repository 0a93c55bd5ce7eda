#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "io/svg.h"
#include "util/error.h"
#include "xml_check.h"

namespace io_svg_test {

using namespace brigade;
using namespace brigade::io;

namespace {

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The number of points of each <polyline>, in document order.
std::vector<size_t> polyline_points(const std::string& svg) {
  std::vector<size_t> counts;
  for (size_t p = svg.find("<polyline points=\""); p != std::string::npos; p = svg.find("<polyline points=\"", p + 1)) {
    const size_t start = p + 18, end = svg.find('"', start);
    counts.push_back(occurrences(svg.substr(start, end - start), ","));
  }
  return counts;
}

void check_ticks(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("nice ticks step by 1, 2 or 5 x 10^k and cover the range") {
  check_ticks(nice_ticks(0, 1876, 8), {0, 500, 1000, 1500, 2000});
  check_ticks(nice_ticks(0, 1, 6), {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  check_ticks(nice_ticks(0.23, 2.4, 6), {0, 0.5, 1, 1.5, 2, 2.5});
  check_ticks(nice_ticks(-3, 7, 6), {-5, 0, 5, 10});
  check_ticks(nice_ticks(1e6, 5e6, 5), {1e6, 2e6, 3e6, 4e6, 5e6});
  check_ticks(nice_ticks(0.0012, 0.0049, 5), {0.001, 0.002, 0.003, 0.004, 0.005});
  check_ticks(nice_ticks(7, 3, 6), {3, 4, 5, 6, 7});  // reversed bounds
  CHECK(nice_ticks(0.3, 0.3, 5).front() <= 0.3);       // one value still gets an axis
  CHECK(nice_ticks(0.3, 0.3, 5).back() >= 0.3);
  CHECK(nice_ticks(0, 0, 5).size() >= 2);
  for (double lo : {-17.3, 0.0, 0.004, 3.0, 912.0})
    for (double span : {0.01, 1.0, 77.0, 5e4})
      for (int max_ticks : {3, 5, 8, 11}) {
        const auto t = nice_ticks(lo, lo + span, max_ticks);
        CAPTURE(lo);
        CAPTURE(span);
        CAPTURE(max_ticks);
        REQUIRE(t.size() >= 2);
        CHECK(int(t.size()) <= max_ticks);
        CHECK(t.front() <= lo);
        CHECK(t.back() >= lo + span);
        const double step = t[1] - t[0], mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
        CHECK((mantissa == doctest::Approx(1) || mantissa == doctest::Approx(2) || mantissa == doctest::Approx(5)));
      }
}

TEST_CASE("log ticks are powers of ten, with 2x and 5x over a short range") {
  check_ticks(log_ticks(0.3, 4), {0.1, 0.2, 0.5, 1, 2, 5, 10});
  check_ticks(log_ticks(0.3, 40), {0.1, 1, 10, 100});
  check_ticks(log_ticks(2e-4, 3), {1e-4, 1e-3, 1e-2, 0.1, 1, 10});
  CHECK(log_ticks(1e-9, 1e9).size() <= 10);
  CHECK_THROWS_AS(log_ticks(0, 1), UserError);
}

TEST_CASE("smooth is a trailing mean over the finite values of its window") {
  CHECK(smooth({1, 2, 3, 4, 5}, 2) == std::vector<double>{1, 1.5, 2.5, 3.5, 4.5});
  CHECK(smooth({1, 2, 3, 4, 5}, 3) == std::vector<double>{1, 1.5, 2, 3, 4});
  CHECK(smooth({4, 8, 6}, 1) == std::vector<double>{4, 8, 6});
  CHECK(smooth({4, 8, 6}, 0) == std::vector<double>{4, 8, 6});  // 0 counts as 1
  CHECK(smooth({}, 20).empty());
  const auto s = smooth({2, NAN, 4, 1e20, 1, 3}, 2);
  CHECK(s[0] == 2);
  CHECK(std::isnan(s[1]));  // a gap stays a gap
  CHECK(s[2] == 4);          // the mean of the window's one finite value
  CHECK(s[4] == 5e19);
  CHECK(s[5] == 2);          // exact once the spike has left the window
}

TEST_CASE("a chart draws one polyline per series with its points, and a legend") {
  Chart c{"loss", "step", "loss"};
  c.series.push_back({.label = "cnn train", .x = {1, 2, 3, 4, 5}, .y = {2.3, 1.9, 1.2, 0.9, 0.7}});
  c.series.push_back({.label = "cnn test", .x = {2, 4, 5}, .y = {1.5, 0.8, 0.6}, .dashed = true, .markers = true});
  const std::string svg = render_svg(c);
  CHECK_MESSAGE(test::xml_problem(svg) == "", test::xml_problem(svg));
  CHECK(svg.starts_with("<?xml"));
  CHECK(polyline_points(svg) == std::vector<size_t>{5, 3});
  CHECK(occurrences(svg, ">cnn train</text>") == 1);
  CHECK(occurrences(svg, ">cnn test</text>") == 1);
  CHECK(occurrences(svg, "stroke-dasharray") == 2);  // the dashed series and its legend line
  CHECK(occurrences(svg, "<circle") == 3 + 1);        // a marker per point, one in the legend
  CHECK(svg.find(">loss</text>") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
}

TEST_CASE("tick labels of large values carry the digits down to the step, so that no two are alike") {
  Chart c{"loss", "step", "loss"};
  c.series.push_back({.label = "run", .x = {10000000, 10000030, 10000070}, .y = {2.0, 1.5, 1.0}});
  const std::string svg = render_svg(c);
  CHECK(occurrences(svg, ">1e+07</text>") == 1);
  CHECK(occurrences(svg, ">1.000001e+07</text>") == 1);
  CHECK(occurrences(svg, ">1.000007e+07</text>") == 1);
  c.series[0].x = {1.2e7, 1.6e7, 2.0e7};
  const std::string coarse = render_svg(c);
  CHECK(occurrences(coarse, ">1.2e+07</text>") == 1);
  CHECK(occurrences(coarse, ">2e+07</text>") == 1);
}

TEST_CASE("chart text is escaped") {
  Chart c{"a<b & \"c\"", "x's", "y>0"};
  c.series.push_back({.label = "<script>&", .x = {0, 1}, .y = {0, 1}});
  const std::string svg = render_svg(c);
  CHECK_MESSAGE(test::xml_problem(svg) == "", test::xml_problem(svg));
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot;") != std::string::npos);
  CHECK(svg.find("&lt;script&gt;&amp;") != std::string::npos);
  CHECK(svg.find("x&apos;s") != std::string::npos);
  CHECK(svg.find("<script>") == std::string::npos);
}

TEST_CASE("non-finite points break the line, and a chart with none to draw is refused") {
  Chart c{"loss", "step", "loss"};
  c.series.push_back({.label = "run", .x = {1, 2, 3, 4, 5, 6}, .y = {3, 2, NAN, 1, INFINITY, 0.5}});
  c.series.push_back({.label = "other", .x = {1, NAN, 3}, .y = {1, 1, 1}});
  const std::string svg = render_svg(c);
  CHECK_MESSAGE(test::xml_problem(svg) == "", test::xml_problem(svg));
  CHECK(polyline_points(svg) == std::vector<size_t>{2});  // 3,2 then lone dots 1 and 0.5, 1 and 1
  CHECK(occurrences(svg, "<circle") == 4);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);

  Chart empty{"nothing", "step", "loss"};
  empty.series.push_back({.label = "run", .x = {1, 2}, .y = {NAN, NAN}});
  CHECK_THROWS_WITH_AS(render_svg(empty), doctest::Contains("'nothing' has no point to draw"), UserError);
  CHECK_THROWS_AS(render_svg(Chart{"no series"}), UserError);
}

TEST_CASE("a log axis skips non-positive values and labels powers of ten") {
  Chart c{"loss", "step", "loss"};
  c.log_y = true;
  c.series.push_back({.label = "run", .x = {1, 2, 3, 4, 5}, .y = {-1, 0, 1, 10, 100}});
  const std::string svg = render_svg(c);
  CHECK_MESSAGE(test::xml_problem(svg) == "", test::xml_problem(svg));
  CHECK(polyline_points(svg) == std::vector<size_t>{3});
  for (const char* label : {">1</text>", ">10</text>", ">100</text>"}) CHECK(svg.find(label) != std::string::npos);
  c.series[0].y = {0, -2, 0, 0, 0};
  CHECK_THROWS_WITH_AS(render_svg(c), doctest::Contains("not positive on its log axis"), UserError);
}

TEST_CASE("the XML check catches what a chart writer could get wrong") {
  CHECK(test::xml_problem("<svg><g></g></svg>") == "");
  CHECK(test::xml_problem("<svg><g></svg>") != "");
  CHECK(test::xml_problem("<svg><text>a<b</text></svg>") != "");
  CHECK(test::xml_problem("<svg><text>a & b</text></svg>") != "");
  CHECK(test::xml_problem("<svg x=1/>") != "");
  CHECK(test::xml_problem("<svg/><svg/>") != "");
  CHECK(test::xml_problem("<svg><text>a &amp; b</text></svg>") == "");
}

}  // namespace io_svg_test
