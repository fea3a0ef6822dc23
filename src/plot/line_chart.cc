#include "plot/line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "plot/xml.h"

namespace rocelab::plot {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kLeft = 64, kTop = 30, kBottom = 44, kLegend = 190, kLegendRow = 14;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

double top_of(const Chart& c) {
  double m = 0;
  for (const Line& l : c.lines)
    for (size_t i = 0; i < l.y.size() && i < c.x.size(); ++i)
      if (std::isfinite(l.y[i])) m = std::max(m, l.y[i]);
  return m;
}

}  // namespace

std::vector<double> ticks(double max, int most) {
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  most = std::max(most, 1);
  const double raw = max / most;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw * (1 - 1e-9)) {
      step = m * p;
      break;
    }
  }
  std::vector<double> v;
  for (int k = 0;; ++k) {
    v.push_back(k * step);
    if (k * step >= max * (1 - 1e-9)) break;
  }
  return v;
}

std::string tick_text(double v) {
  if (std::fabs(v) < 1e-12) return "0";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string render_svg(const Chart& c, const SvgOptions& o) {
  const int legend = kLegend;  // also without lines: stacked charts keep one x axis
  const double x0 = kLeft, x1 = o.width - legend - 16.0, y0 = kTop, y1 = o.height - double(kBottom);
  const std::vector<double> xt = ticks(c.x.empty() ? 0 : c.x.back(), 8);
  const std::vector<double> yt = ticks(top_of(c), 5);
  const double xmax = xt.back(), ymax = yt.back();
  auto px = [&](double x) { return x0 + (x1 - x0) * x / xmax; };
  auto py = [&](double y) { return y1 - (y1 - y0) * y / ymax; };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) + "\" height=\"" +
                  std::to_string(o.height) + "\" viewBox=\"0 0 " + std::to_string(o.width) + " " +
                  std::to_string(o.height) + "\" font-family=\"sans-serif\" font-size=\"11\"";
  if (!o.css_class.empty()) s += " class=\"" + xml_escape(o.css_class) + "\"";
  if (!o.id.empty()) s += " id=\"" + xml_escape(o.id) + "\"";
  if (o.cursor)
    s += " data-x0=\"" + num(x0) + "\" data-x1=\"" + num(x1) + "\" data-t0=\"0\" data-t1=\"" + tick_text(xmax) + "\"";
  s += ">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text class=\"title\" x=\"" + num(x0) + "\" y=\"18\" font-size=\"13\" font-weight=\"bold\">" + xml_escape(c.title) +
       "</text>\n";
  // Grid and y ticks.
  for (double v : yt) {
    const std::string y = num(py(v));
    s += "<line x1=\"" + num(x0) + "\" y1=\"" + y + "\" x2=\"" + num(x1) + "\" y2=\"" + y +
         "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"" + num(x0 - 6) + "\" y=\"" + num(py(v) + 4) +
         "\" text-anchor=\"end\">" + tick_text(v) + "</text>\n";
  }
  for (double v : xt) {
    const std::string x = num(px(v));
    s += "<line x1=\"" + x + "\" y1=\"" + num(y1) + "\" x2=\"" + x + "\" y2=\"" + num(y1 + 4) +
         "\" stroke=\"#444\"/>\n<text class=\"xtick\" x=\"" + x + "\" y=\"" + num(y1 + 16) +
         "\" text-anchor=\"middle\">" + tick_text(v) + "</text>\n";
  }
  // Axes and their labels.
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y1) +
       "\" stroke=\"#444\"/>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x0) + "\" y2=\"" + num(y1) +
       "\" stroke=\"#444\"/>\n";
  s += "<text class=\"xlabel\" x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num(y1 + 34) + "\" text-anchor=\"middle\">" +
       xml_escape(c.x_label) + "</text>\n";
  s += "<text class=\"ylabel\" transform=\"translate(14 " + num((y0 + y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + xml_escape(c.y_label) + "</text>\n";
  if (c.lines.empty()) {
    s += "<text class=\"empty\" x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num((y0 + y1) / 2) +
         "\" text-anchor=\"middle\" fill=\"#888\">" + xml_escape(c.empty_text) + "</text>\n";
  }
  // The lines, then the legend.
  const size_t rows = static_cast<size_t>(std::max(1.0, (y1 - y0) / kLegendRow));
  for (size_t k = 0; k < c.lines.size(); ++k) {
    const Line& l = c.lines[k];
    const char* colour = kPalette[k % std::size(kPalette)];
    s += "<polyline class=\"line\" data-name=\"" + xml_escape(l.name) + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < l.y.size() && i < c.x.size(); ++i) {
      if (i) s += ' ';
      s += num(px(c.x[i])) + "," + num(py(std::isfinite(l.y[i]) ? l.y[i] : 0));
    }
    s += "\"/>\n";
    if (k + 1 > rows) continue;
    const double ly = y0 + 4 + double(k) * kLegendRow;
    const double lx = x1 + 16;
    if (k + 1 == rows && c.lines.size() > rows) {
      s += "<text class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly + 4) + "\">… " +
           std::to_string(c.lines.size() - rows + 1) + " more</text>\n";
      continue;
    }
    s += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 16) + "\" y2=\"" + num(ly) +
         "\" stroke=\"" + colour + "\" stroke-width=\"2\"/>\n<text class=\"legend\" x=\"" + num(lx + 22) +
         "\" y=\"" + num(ly + 4) + "\">" + xml_escape(l.name) + "</text>\n";
  }
  if (o.cursor) {
    s += "<line class=\"cursor\" x1=\"" + num(x0) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x0) + "\" y2=\"" +
         num(y1) + "\" stroke=\"#c00\" stroke-width=\"1\" visibility=\"hidden\"/>\n";
  }
  s += "</svg>\n";
  return s;
}

std::string render_svg_stack(const std::vector<Chart>& charts, const SvgOptions& o) {
  const int h = o.height * static_cast<int>(std::max<size_t>(charts.size(), 1));
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) + "\" height=\"" +
                  std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(o.width) + " " + std::to_string(h) +
                  "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  SvgOptions each = o;
  each.cursor = false;
  each.id.clear();
  for (size_t i = 0; i < charts.size(); ++i) {
    std::string one = render_svg(charts[i], each);
    // Placed by its y offset: a nested <svg> takes x and y.
    one.insert(4, " x=\"0\" y=\"" + std::to_string(o.height * static_cast<int>(i)) + "\"");
    s += one;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace rocelab::plot
