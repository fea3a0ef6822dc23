// Line charts drawn as SVG: lines of y against one shared, ascending x, an
// x axis and a y axis from 0 with ticks at round numbers (1, 2 or 5 times a
// power of ten), each axis labelled with its quantity and unit, a title, and
// a legend. Knows nothing of networks: the caller names the quantities.
//
// The drawing is deterministic (the same chart gives the same bytes) and
// well-formed XML, standalone or inline in an HTML page. For a page that
// moves a cursor along the x axis, the root <svg> carries the plot area's
// horizontal extent and its x domain (data-x0, data-x1 in px; data-t0,
// data-t1 in x units) and a hidden <line class="cursor">.
#pragma once
#include <string>
#include <vector>

namespace rocelab::plot {

struct Line {
  std::string name;       // the legend's text
  std::vector<double> y;  // one per x (extra values are ignored, missing ones end the line)
};

struct Chart {
  std::string title;
  std::string x_label, y_label;  // with their units: "time (µs)", "queue depth (KiB)"
  std::vector<double> x;         // ascending
  std::vector<Line> lines;
  std::string empty_text = "nothing to draw";  // written across a chart without lines
};

struct SvgOptions {
  int width = 760, height = 260;  // px, the legend included
  bool cursor = false;            // the hidden cursor line and the data-* attributes
  std::string id;                 // the root's id attribute (none when empty)
  std::string css_class = "plot"; // the root's class attribute
};

// The chart as one <svg> element (with its xmlns, so it stands alone).
std::string render_svg(const Chart& c, const SvgOptions& o = {});

// Charts one above the other in one SVG document, each o.width wide.
std::string render_svg_stack(const std::vector<Chart>& charts, const SvgOptions& o = {});

// Ticks from 0 covering [0, max]: 0, s, 2s, ... up to the first multiple of s
// at or above max, with s = 1, 2 or 5 times a power of ten chosen so that there
// are at most `most` steps. max <= 0 gives {0, 1}.
std::vector<double> ticks(double max, int most);

// A tick's text: at most 4 significant digits, no trailing zeros ("0.25", "1500", "2e+06").
std::string tick_text(double v);

}  // namespace rocelab::plot
