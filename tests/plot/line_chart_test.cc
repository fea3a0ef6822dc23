// Line charts (src/plot/line_chart.h): ticks are 0 and multiples of 1, 2 or
// 5 times a power of ten covering the data; a value is drawn where the axes
// say it is; text is escaped; the page's cursor gets the plot area and domain.
#include "plot/line_chart.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace rocelab::plot {
namespace {

TEST(LineChart, TicksAreRoundNumbersFromZeroCoveringTheData) {
  EXPECT_EQ(ticks(130, 5), (std::vector<double>{0, 50, 100, 150}));
  EXPECT_EQ(ticks(100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(ticks(7, 8), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  const std::vector<double> small = ticks(0.84, 5);
  ASSERT_EQ(small.size(), 6u);
  EXPECT_NEAR(small[1], 0.2, 1e-12);
  EXPECT_NEAR(small.back(), 1.0, 1e-12);
  EXPECT_EQ(ticks(0, 5), (std::vector<double>{0, 1}));  // nothing to show: still an axis
  EXPECT_EQ(ticks(-3, 5), (std::vector<double>{0, 1}));
  for (double max : {0.003, 1.0, 2.5, 17.0, 999.0, 123456.0}) {
    const std::vector<double> t = ticks(max, 6);
    EXPECT_LE(t.size(), 7u) << max;
    EXPECT_GE(t.back(), max) << max;
    EXPECT_LT(t[t.size() - 2], max) << max;
  }
}

TEST(LineChart, TickTextIsShort) {
  EXPECT_EQ(tick_text(0), "0");
  EXPECT_EQ(tick_text(0.25), "0.25");
  EXPECT_EQ(tick_text(1500), "1500");
  EXPECT_EQ(tick_text(0.1 + 0.2), "0.3");
  EXPECT_EQ(tick_text(2e6), "2e+06");
}

// The points of the chart's first polyline.
std::vector<std::pair<double, double>> points(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("points=\"([^\"]*)\"")));
  std::vector<std::pair<double, double>> v;
  const std::string s = m[1];
  std::regex pt("([0-9.]+),([0-9.]+)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), pt); it != std::sregex_iterator(); ++it)
    v.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  return v;
}

double attr(const std::string& svg, const std::string& name) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex(" " + name + "=\"([0-9.]+)\""))) << name;
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(LineChart, ValuesAreDrawnWhereTheAxesSay) {
  Chart c;
  c.title = "queue";
  c.x_label = "time (µs)";
  c.y_label = "queue (KiB)";
  c.x = {0, 10, 20, 30, 40};
  c.lines = {{"tor->sink", {0, 50, 100, 75, 25}}, {"s0->tor", {1, 1, 1, 1, 1}}};
  SvgOptions o;
  o.cursor = true;
  const std::string svg = render_svg(c, o);
  // The x domain is [0, 40] (a tick), the y domain [0, 100].
  const double x0 = attr(svg, "data-x0"), x1 = attr(svg, "data-x1");
  EXPECT_EQ(attr(svg, "data-t1"), 40);
  EXPECT_LT(x0, x1);
  const auto p = points(svg);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_NEAR(p[0].first, x0, 0.06);
  EXPECT_NEAR(p[4].first, x1, 0.06);
  EXPECT_NEAR(p[2].first, (x0 + x1) / 2, 0.06);
  const double bottom = p[0].second, top = p[2].second;  // 0 and 100
  EXPECT_GT(bottom, top);
  EXPECT_NEAR(p[3].second, bottom - 0.75 * (bottom - top), 0.1);
  EXPECT_NEAR(p[1].second, bottom - 0.5 * (bottom - top), 0.1);
  // A polyline and a legend entry per line; the axes say their units.
  const std::regex polyline("<polyline");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), polyline), std::sregex_iterator()), 2);
  EXPECT_NE(svg.find(">tor-&gt;sink</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (µs)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">queue (KiB)</text>"), std::string::npos);
  EXPECT_NE(svg.find("<line class=\"cursor\""), std::string::npos);
}

TEST(LineChart, AChartWithoutLinesSaysSoAndHasNoCursorUnlessAsked) {
  Chart c;
  c.title = "CNPs <per> host & more";
  c.x = {10, 20};
  c.empty_text = "no CNP in this run";
  const std::string svg = render_svg(c);
  EXPECT_NE(svg.find(">no CNP in this run</text>"), std::string::npos);
  EXPECT_NE(svg.find("CNPs &lt;per&gt; host &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("cursor"), std::string::npos);
  EXPECT_EQ(svg.find("data-x0"), std::string::npos);
}

TEST(LineChart, AStackPlacesEachChartBelowThePrevious) {
  Chart a, b;
  a.x = b.x = {1, 2};
  a.lines = {{"a", {1, 2}}};
  b.lines = {{"b", {2, 1}}};
  SvgOptions o;
  o.height = 200;
  const std::string svg = render_svg_stack({a, b}, o);
  EXPECT_NE(svg.find("height=\"400\""), std::string::npos);
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"0\""), std::string::npos);
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"200\""), std::string::npos);
}

}  // namespace
}  // namespace rocelab::plot
