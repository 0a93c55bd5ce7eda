#include "io/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace brigade::io {
namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kTop = 40, kBottom = 50, kRight = 16;  // margins around the plot
constexpr double kCharWidth = 7;     // of the 12px legend font, for sizing the legend
constexpr size_t kMaxLabelChars = 36;

// Tableau's ten colours: distinguishable from each other and for most colour vision.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kColors = sizeof(kPalette) / sizeof(kPalette[0]);

std::string format(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

std::string coord(double v) { return format("%.1f", v); }

// Elements; `attrs` is appended as written (it starts with a space).
std::string line(double x1, double y1, double x2, double y2, const std::string& attrs = "") {
  return "<line x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" + coord(y2) + "\"" +
         attrs + "/>\n";
}

std::string circle(double cx, double cy, double r, const std::string& attrs = "") {
  return "<circle cx=\"" + coord(cx) + "\" cy=\"" + coord(cy) + "\" r=\"" + coord(r) + "\"" + attrs + "/>\n";
}

std::string text(double x, double y, const std::string& attrs, const std::string& escaped) {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\"" + attrs + ">" + escaped + "</text>\n";
}

// Text as XML character data: the five special characters as entities, and the control
// characters XML 1.0 forbids replaced.
std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += (unsigned char)c < 0x20 && c != '\t' ? '?' : c;
    }
  }
  return out;
}

// Long labels would push the plot aside; cut them on a UTF-8 character boundary.
std::string shorten(const std::string& s) {
  if (s.size() <= kMaxLabelChars) return s;
  size_t n = kMaxLabelChars - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

// m x 10^k computed so that e.g. 3 x 10^-1 is the double nearest 0.3.
double scaled(double m, int k) { return k >= 0 ? m * std::pow(10.0, k) : m / std::pow(10.0, -k); }

std::string tick_label(double v, double step, bool log) {
  if (log) return format("%g", v);
  if (std::fabs(v) >= 1e7) {  // in e notation, with the digits down to the step's: labels that differ
    const int digits = int(std::floor(std::log10(std::fabs(v)))) - int(std::floor(std::log10(step) + 1e-9)) + 1;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", std::clamp(digits, 1, 17), v);
    return buf;
  }
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0.0"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Axis {
  std::vector<double> ticks;
  bool log = false;
  double from = 0, to = 1;  // pixel positions of the first and the last tick

  double operator()(double v) const {
    const double lo = ticks.front(), hi = ticks.back();
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return from + t * (to - from);
  }
  std::string label(double v) const { return tick_label(v, ticks.size() > 1 ? ticks[1] - ticks[0] : 1, log); }
};

bool drawable(const Chart& c, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!c.log_y || y > 0);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) throw UserError("chart axis range is not finite");
  if (hi < lo) std::swap(lo, hi);
  if (!std::isfinite(hi - lo)) throw UserError("chart axis range is too wide to draw");
  max_ticks = std::max(max_ticks, 3);  // a range around zero needs three: -a, 0, a
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(lo))) {  // one value: give it room
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  // The smallest step of 1, 2 or 5 x 10^k that needs no more than max_ticks ticks.
  int k = int(std::floor(std::log10((hi - lo) / (max_ticks - 1)))) - 1;
  for (;; ++k) {
    for (int m : {1, 2, 5}) {
      const double step = scaled(m, k);
      const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
      if (last - first + 1 > max_ticks) continue;
      std::vector<double> ticks;
      for (double i = first; i <= last; ++i) ticks.push_back(scaled(i * m, k));
      return ticks;
    }
  }
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(hi)) throw UserError("log axis range must be positive and finite");
  if (hi < lo) std::swap(lo, hi);
  int k0 = int(std::floor(std::log10(lo) + 1e-9)), k1 = int(std::ceil(std::log10(hi) - 1e-9));
  if (k1 == k0) ++k1;
  std::vector<double> ticks;
  if (k1 - k0 <= 2) {
    for (int k = k0; k < k1; ++k)
      for (int m : {1, 2, 5}) ticks.push_back(scaled(m, k));
    ticks.push_back(scaled(1, k1));
    return ticks;
  }
  const int every = (k1 - k0 + 7) / 8;  // at most about 9 labelled decades
  k1 = k0 + every * ((k1 - k0 + every - 1) / every);
  for (int k = k0; k <= k1; k += every) ticks.push_back(scaled(1, k));
  return ticks;
}

std::vector<double> smooth(const std::vector<double>& y, size_t window) {
  window = std::max<size_t>(window, 1);
  std::vector<double> out(y.size());
  // Summed afresh for each point, not as a running sum: after a loss spike of 1e20 leaves
  // the window, a running sum would have lost every digit of the losses around it.
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      out[i] = y[i];
      continue;
    }
    double sum = 0;
    size_t count = 0;
    for (size_t j = i + 1 - std::min(i + 1, window); j <= i; ++j)
      if (std::isfinite(y[j])) sum += y[j], ++count;
    out[i] = sum / double(count);
  }
  return out;
}

std::string render_svg(const Chart& c) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  size_t label_chars = 0;
  for (const Series& s : c.series) {
    BRIGADE_EXPECT(s.x.size() == s.y.size(), "series '" + s.label + "' has x and y of different lengths");
    label_chars = std::max(label_chars, shorten(s.label).size());
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(c, s.x[i], s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (x_lo > x_hi)
    throw UserError("chart '" + c.title + "' has no point to draw (every value is missing, not finite" +
                    (c.log_y ? " or not positive on its log axis)" : ")"));

  const double legend_width = 36 + kCharWidth * double(label_chars);
  Axis x{nice_ticks(x_lo, x_hi, 8), false, kLeft, kWidth - kRight - legend_width - 12};
  Axis y{c.log_y ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, 7), c.log_y, kHeight - kBottom, kTop};

  const double x_mid = (x.from + x.to) / 2, y_mid = (y.from + y.to) / 2;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"420\" viewBox=\"0 0 720 420\" "
         "font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"720\" height=\"420\" fill=\"white\"/>\n";
  svg += text(x_mid, 24, " text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"", escape(c.title));

  // Grid, frame, tick labels and axis labels.
  svg += "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (double t : x.ticks) svg += line(x(t), y.to, x(t), y.from);
  for (double t : y.ticks) svg += line(x.from, y(t), x.to, y(t));
  svg += "</g>\n";
  svg += "<rect x=\"" + coord(x.from) + "\" y=\"" + coord(y.to) + "\" width=\"" + coord(x.to - x.from) +
         "\" height=\"" + coord(y.from - y.to) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  svg += "<g font-size=\"11\" fill=\"#333\">\n";
  for (double t : x.ticks) svg += text(x(t), y.from + 16, " text-anchor=\"middle\"", escape(x.label(t)));
  for (double t : y.ticks) svg += text(x.from - 6, y(t) + 4, " text-anchor=\"end\"", escape(y.label(t)));
  svg += "</g>\n";
  svg += text(x_mid, kHeight - 12, " text-anchor=\"middle\"", escape(c.x_label));
  svg += "<text transform=\"translate(16 " + coord(y_mid) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape(c.y_label) + "</text>\n";

  auto color_of = [&](size_t i) { return kPalette[(c.series[i].color >= 0 ? size_t(c.series[i].color) : i) % kColors]; };
  const std::string dash = " stroke-dasharray=\"6 4\"";

  // Series: one polyline per unbroken run of points; a lone point is a dot so it still shows.
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    std::string lines, dots;
    std::vector<std::pair<double, double>> run;  // pixels
    auto flush = [&] {
      if (run.size() >= 2) {
        lines += "<polyline points=\"";
        for (size_t i = 0; i < run.size(); ++i) lines += (i ? " " : "") + coord(run[i].first) + "," + coord(run[i].second);
        lines += "\"/>\n";
      } else if (run.size() == 1 && !s.markers) {
        dots += circle(run[0].first, run[0].second, 2);
      }
      run.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(c, s.x[i], s.y[i])) {
        flush();
        continue;
      }
      run.emplace_back(x(s.x[i]), y(s.y[i]));
      if (s.markers) dots += circle(run.back().first, run.back().second, 3);
    }
    flush();
    svg += std::string("<g fill=\"none\" stroke=\"") + color_of(si) + "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"" +
           (s.dashed ? dash : "") + ">\n" + lines + "</g>\n";
    if (!dots.empty()) svg += std::string("<g fill=\"") + color_of(si) + "\">\n" + dots + "</g>\n";
  }

  // Legend, right of the plot so it never hides a curve.
  const double lx = x.to + 12;
  svg += "<g>\n";
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    const std::string color = color_of(si);
    const double ly = kTop + 8 + 18 * double(si);
    svg += line(lx, ly, lx + 24, ly, " stroke=\"" + color + "\" stroke-width=\"2\"" + (s.dashed ? dash : ""));
    if (s.markers) svg += circle(lx + 12, ly, 3, " fill=\"" + color + "\"");
    svg += text(lx + 30, ly + 4, "", escape(shorten(s.label)));
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

}  // namespace brigade::io
