// Line charts as self-contained SVG, written by hand (no plotting library), for simulator reports:
// axes with nice ticks, one polyline per series, a legend and an optional zoomed inset.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpupool::sim {

struct PlotPoint {
  double x = 0;
  std::optional<double> y;  // nullopt breaks the line (no data there)
};

struct PlotSeries {
  std::string color;  // any SVG colour, e.g. "#1f77b4"
  bool dashed = false;
  std::vector<PlotPoint> points;
};

struct LegendEntry {
  std::string label;
  std::string color;
  bool dashed = false;
};

// A data range; when y_min/y_max are unset they are fitted to the data inside [x_min, x_max].
struct PlotRange {
  double x_min = 0;
  double x_max = 1;
  std::optional<double> y_min;
  std::optional<double> y_max;
};

enum class Corner { kTopLeft, kTopRight, kBottomLeft, kBottomRight };

struct LinePlot {
  std::string title;
  std::string subtitle;  // smaller line under the title; may be empty
  std::string x_label;
  std::string y_label;
  PlotRange range;
  std::vector<PlotSeries> series;
  std::vector<LegendEntry> legend;
  Corner legend_corner = Corner::kBottomLeft;
  // A second, magnified view of part of the data (where the curves separate), drawn inside the
  // main plot so that small differences stay visible beside the full picture.
  std::optional<PlotRange> inset;
  Corner inset_corner = Corner::kTopRight;
  int width_px = 960;
  int height_px = 640;
};

// Ticks at 1, 2 or 5 × 10^k covering [lo, hi] with about `target` intervals.
std::vector<double> NiceTicks(double lo, double hi, int target);

// The whole SVG document.
std::string RenderSvg(const LinePlot& plot);

// Writes `text` to `path` (replacing it); the error names the path.
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace gpupool::sim
