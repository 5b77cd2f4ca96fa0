// Hand-written SVG line charts (see plot.h). Everything is placed in pixel coordinates computed
// here, so the file renders the same in browsers, rsvg and Inkscape without scripts or CSS.
#include "sim/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

namespace gpupool::sim {
namespace {

constexpr const char* kFont = "Helvetica, Arial, sans-serif";
constexpr const char* kGridColor = "#e3e3e3";
constexpr const char* kAxisColor = "#333333";
constexpr const char* kDash = "7 4";

struct Rect {
  double x0, y0, x1, y1;  // pixels; y grows downwards as in SVG
  double w() const { return x1 - x0; }
  double h() const { return y1 - y0; }
};

// A fully resolved data range: both axes known and non-degenerate.
struct Frame {
  double x_min, x_max, y_min, y_max;
  std::vector<double> x_ticks, y_ticks;
};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double NiceStep(double span, int target) {
  const double raw = span / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw * 0.999) return m * mag;
  }
  return 10.0 * mag;
}

// Tick labels with just enough decimals for the step (10 -> "10", 0.5 -> "0.5").
std::string TickLabel(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < step * 1e-6 ? 0.0 : v);
  return buf;
}

// Fits unset y bounds to the data inside the x range, widened to whole tick steps so that the
// curves never touch the frame.
Frame Resolve(const PlotRange& r, const std::vector<PlotSeries>& series, int x_target,
              int y_target) {
  Frame f;
  f.x_min = r.x_min;
  f.x_max = r.x_max > r.x_min ? r.x_max : r.x_min + 1;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      if (!p.y || p.x < f.x_min || p.x > f.x_max) continue;
      lo = std::min(lo, *p.y);
      hi = std::max(hi, *p.y);
    }
  }
  if (!(lo <= hi)) {  // no data in range
    lo = 0;
    hi = 1;
  }
  if (hi - lo < 1e-9) {  // flat data: centre it in a unit band
    lo -= 0.5;
    hi += 0.5;
  }
  const double step = NiceStep(hi - lo, y_target);
  f.y_min = r.y_min.value_or(std::floor(lo / step) * step);
  f.y_max = r.y_max.value_or(std::ceil(hi / step) * step);
  if (!r.y_min && f.y_min == lo) f.y_min -= step;
  if (!r.y_max && f.y_max == hi) f.y_max += step;
  if (f.y_max <= f.y_min) f.y_max = f.y_min + 1;
  f.x_ticks = NiceTicks(f.x_min, f.x_max, x_target);
  f.y_ticks = NiceTicks(f.y_min, f.y_max, y_target);
  return f;
}

class Canvas {
 public:
  Canvas(const Rect& rect, const Frame& frame) : r_(rect), f_(frame) {}
  double X(double x) const { return r_.x0 + (x - f_.x_min) / (f_.x_max - f_.x_min) * r_.w(); }
  double Y(double y) const { return r_.y1 - (y - f_.y_min) / (f_.y_max - f_.y_min) * r_.h(); }

 private:
  Rect r_;
  Frame f_;
};

void Text(std::string& out, double x, double y, const std::string& s, int size, const char* anchor,
          const std::string& extra = "") {
  out += "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + Escape(s) + "</text>\n";
}

void Line(std::string& out, double x0, double y0, double x1, double y1, const std::string& color,
          double width, bool dashed = false) {
  out += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(y0) + "\" x2=\"" + Num(x1) + "\" y2=\"" +
         Num(y1) + "\" stroke=\"" + color + "\" stroke-width=\"" + Num(width) + "\"" +
         (dashed ? std::string(" stroke-dasharray=\"") + kDash + "\"" : "") + "/>\n";
}

// One set of axes with grid, tick labels and the series clipped to the frame. `font` scales the
// tick labels (the inset uses smaller ones).
void DrawPanel(std::string& out, const std::vector<PlotSeries>& series, const Rect& r,
               const Frame& f, const std::string& clip_id, int font, double line_width) {
  const Canvas c(r, f);
  out += "<rect x=\"" + Num(r.x0) + "\" y=\"" + Num(r.y0) + "\" width=\"" + Num(r.w()) +
         "\" height=\"" + Num(r.h()) + "\" fill=\"white\"/>\n";
  for (double t : f.x_ticks) Line(out, c.X(t), r.y0, c.X(t), r.y1, kGridColor, 1);
  for (double t : f.y_ticks) Line(out, r.x0, c.Y(t), r.x1, c.Y(t), kGridColor, 1);
  const double x_step = f.x_ticks.size() > 1 ? f.x_ticks[1] - f.x_ticks[0] : 1;
  const double y_step = f.y_ticks.size() > 1 ? f.y_ticks[1] - f.y_ticks[0] : 1;
  for (double t : f.x_ticks) {
    Line(out, c.X(t), r.y1, c.X(t), r.y1 + 5, kAxisColor, 1);
    Text(out, c.X(t), r.y1 + 7 + font, TickLabel(t, x_step), font, "middle");
  }
  for (double t : f.y_ticks) {
    Line(out, r.x0 - 5, c.Y(t), r.x0, c.Y(t), kAxisColor, 1);
    Text(out, r.x0 - 8, c.Y(t) + font * 0.35, TickLabel(t, y_step), font, "end");
  }

  out += "<clipPath id=\"" + clip_id + "\"><rect x=\"" + Num(r.x0) + "\" y=\"" + Num(r.y0) +
         "\" width=\"" + Num(r.w()) + "\" height=\"" + Num(r.h()) + "\"/></clipPath>\n";
  out += "<g clip-path=\"url(#" + clip_id + ")\" fill=\"none\" stroke-linejoin=\"round\">\n";
  for (const PlotSeries& s : series) {
    const std::string style = "stroke=\"" + s.color + "\" stroke-width=\"" + Num(line_width) +
                              "\"" +
                              (s.dashed ? std::string(" stroke-dasharray=\"") + kDash + "\"" : "");
    // Consecutive points with data form one polyline; a gap (nullopt) starts a new one.
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() == 1) {
        out += "<circle cx=\"" + Num(run[0].first) + "\" cy=\"" + Num(run[0].second) + "\" r=\"" +
               Num(line_width) + "\" fill=\"" + s.color + "\"/>\n";
      } else if (run.size() > 1) {
        out += "<polyline " + style + " points=\"";
        for (size_t i = 0; i < run.size(); ++i) {
          out += (i ? " " : "") + Num(run[i].first) + "," + Num(run[i].second);
        }
        out += "\"/>\n";
      }
      run.clear();
    };
    for (const PlotPoint& p : s.points) {
      if (p.y) {
        run.emplace_back(c.X(p.x), c.Y(*p.y));
      } else {
        flush();
      }
    }
    flush();
  }
  out += "</g>\n";
  out += "<rect x=\"" + Num(r.x0) + "\" y=\"" + Num(r.y0) + "\" width=\"" + Num(r.w()) +
         "\" height=\"" + Num(r.h()) + "\" fill=\"none\" stroke=\"" + kAxisColor +
         "\" stroke-width=\"1\"/>\n";
}

// Places a w × h box in `corner` of `area`, `pad` pixels from its edges.
Rect InCorner(const Rect& area, Corner corner, double w, double h, double pad_x, double pad_y) {
  const bool left = corner == Corner::kTopLeft || corner == Corner::kBottomLeft;
  const bool top = corner == Corner::kTopLeft || corner == Corner::kTopRight;
  const double x0 = left ? area.x0 + pad_x : area.x1 - pad_x - w;
  const double y0 = top ? area.y0 + pad_y : area.y1 - pad_y - h;
  return {x0, y0, x0 + w, y0 + h};
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double step = NiceStep(hi - lo, target);
  // Multiples of the step, computed from integers so that 0.1 + 0.2 drift never adds a tick.
  const auto first = static_cast<int64_t>(std::ceil(lo / step - 1e-9));
  const auto last = static_cast<int64_t>(std::floor(hi / step + 1e-9));
  for (int64_t i = first; i <= last; ++i) ticks.push_back(static_cast<double>(i) * step);
  return ticks;
}

std::string RenderSvg(const LinePlot& plot) {
  const double w = plot.width_px;
  const double h = plot.height_px;
  const double top = plot.subtitle.empty() ? 56 : 74;
  const Rect main{84, top, w - 28, h - 66};
  const Frame frame = Resolve(plot.range, plot.series, 13, 10);

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(w) + "\" height=\"" + Num(h) +
         "\" viewBox=\"0 0 " + Num(w) + " " + Num(h) + "\" font-family=\"" + kFont +
         "\" fill=\"#222222\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  Text(out, w / 2, 30, plot.title, 19, "middle", " font-weight=\"bold\"");
  if (!plot.subtitle.empty()) Text(out, w / 2, 52, plot.subtitle, 13, "middle", " fill=\"#555\"");
  DrawPanel(out, plot.series, main, frame, "clip-main", 13, 2.2);
  Text(out, (main.x0 + main.x1) / 2, h - 20, plot.x_label, 15, "middle");
  const double ylx = 26;
  const double yly = (main.y0 + main.y1) / 2;
  Text(out, ylx, yly, plot.y_label, 15, "middle",
       " transform=\"rotate(-90 " + Num(ylx) + " " + Num(yly) + ")\"");

  if (plot.inset) {
    const Frame inset = Resolve(*plot.inset, plot.series, 4, 5);
    // Room for the inset's own tick labels (left and below) inside the main frame.
    const Rect box = InCorner(main, plot.inset_corner, main.w() * 0.40, main.h() * 0.42, 56, 34);
    const Canvas c(main, frame);
    // Mark on the main plot which region the inset magnifies.
    const double zx0 = c.X(std::max(inset.x_min, frame.x_min));
    const double zx1 = c.X(std::min(inset.x_max, frame.x_max));
    const double zy0 = c.Y(std::min(inset.y_max, frame.y_max));
    const double zy1 = c.Y(std::max(inset.y_min, frame.y_min));
    out += "<rect x=\"" + Num(zx0) + "\" y=\"" + Num(zy0) + "\" width=\"" + Num(zx1 - zx0) +
           "\" height=\"" + Num(zy1 - zy0) +
           "\" fill=\"none\" stroke=\"#888\" stroke-width=\"1\" stroke-dasharray=\"3 3\"/>\n";
    const Rect framed{box.x0 - 50, box.y0 - 10, box.x1 + 10, box.y1 + 30};
    out += "<rect x=\"" + Num(framed.x0) + "\" y=\"" + Num(framed.y0) + "\" width=\"" +
           Num(framed.w()) + "\" height=\"" + Num(framed.h()) +
           "\" fill=\"white\" fill-opacity=\"0.92\" stroke=\"#bbbbbb\" stroke-width=\"1\"/>\n";
    DrawPanel(out, plot.series, box, inset, "clip-inset", 11, 1.8);
  }

  if (!plot.legend.empty()) {
    size_t chars = 0;
    for (const LegendEntry& e : plot.legend) chars = std::max(chars, e.label.size());
    const double row = 21;
    const double lw = 54 + 7.4 * static_cast<double>(chars);
    const double lh = 12 + row * static_cast<double>(plot.legend.size());
    const Rect box = InCorner(main, plot.legend_corner, lw, lh, 14, 14);
    out += "<rect x=\"" + Num(box.x0) + "\" y=\"" + Num(box.y0) + "\" width=\"" + Num(lw) +
           "\" height=\"" + Num(lh) +
           "\" fill=\"white\" fill-opacity=\"0.92\" stroke=\"#bbbbbb\" stroke-width=\"1\"/>\n";
    for (size_t i = 0; i < plot.legend.size(); ++i) {
      const LegendEntry& e = plot.legend[i];
      const double y = box.y0 + 6 + row * (static_cast<double>(i) + 0.5);
      Line(out, box.x0 + 10, y, box.x0 + 42, y, e.color, 2.4, e.dashed);
      Text(out, box.x0 + 50, y + 4.5, e.label, 13, "start");
    }
  }
  out += "</svg>\n";
  return out;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgument("cannot write " + path);
  out << text;
  out.close();
  if (!out) return InvalidArgument("cannot write " + path);
  return {};
}

}  // namespace gpupool::sim
