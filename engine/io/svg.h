// SVG line charts for training curves: a fixed-size chart with "nice" ticks, a light grid, a
// legend and a title, written as plain text with no dependency. Any browser shows the file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace brigade::io {

struct Series {
  std::string label;
  std::vector<double> x, y;  // same length; a non-finite point breaks the line
  bool dashed = false;
  bool markers = false;  // a small circle on every point
  int color = -1;        // index into the palette; -1: the series' position in the chart
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;  // y on a log scale; points with y <= 0 are skipped
};

// The chart as a standalone SVG document. Throws UserError when no series has a point that
// can be drawn.
std::string render_svg(const Chart& chart);

// Evenly spaced ticks 1, 2 or 5 x 10^k apart, at most `max_ticks` of them, the first at or
// below `lo` and the last at or above `hi`: the axis runs from the first tick to the last.
// `max_ticks` below 3 counts as 3, the fewest that can span a range around zero.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// Ticks of a log axis (lo > 0): powers of ten from at or below `lo` to at or above `hi`,
// with 2x and 5x between them when the range spans at most two decades.
std::vector<double> log_ticks(double lo, double hi);

// Trailing moving average over `window` points (at least 1), the same length as `y`. Each
// mean is over the finite values in its window; a non-finite input stays non-finite so
// breaks in the line stay where they were.
std::vector<double> smooth(const std::vector<double>& y, size_t window);

}  // namespace brigade::io
