// The Prometheus text exposition of MetricsRegistry: HELP and TYPE for every declared family,
// labels in their declared order with escaped values, histograms' cumulative buckets with `le`
// last, gauge snapshots that replace the families they include (and only those), counters that
// add up.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool::server {
namespace {

constexpr MetricFamily<2> kGauge{
    "test_things", MetricType::kGauge, "Things by b and a.", {"b", "a"}};
constexpr MetricFamily<0> kCounter{"test_events_total", MetricType::kCounter, "Events.", {}};
constexpr MetricFamily<1> kHistogram{
    "test_seconds", MetricType::kHistogram, "Durations.", {"route"}};

TEST(MetricsRegistry, DeclaredFamiliesHaveHelpAndTypeWithoutSamples) {
  MetricsRegistry r;
  r.Declare(kGauge);
  EXPECT_EQ(r.Render(), "# HELP test_things Things by b and a.\n# TYPE test_things gauge\n");
}

TEST(MetricsRegistry, LabelsComeInTheirDeclaredOrderEscaped) {
  MetricsRegistry r;
  GaugeSnapshot g;
  g.Set(kGauge, {"x\"y", "back\\slash\nline"}, 2.5);
  r.Publish(std::move(g));
  EXPECT_EQ(r.Render(),
            "# HELP test_things Things by b and a.\n# TYPE test_things gauge\n"
            "test_things{b=\"x\\\"y\",a=\"back\\\\slash\\nline\"} 2.5\n");
}

TEST(MetricsRegistry, ASnapshotReplacesTheFamiliesItIncludes) {
  constexpr MetricFamily<0> kOther{"test_other", MetricType::kGauge, "Another.", {}};
  MetricsRegistry r;
  GaugeSnapshot first;
  first.Set(kGauge, {"1", "2"}, 1);
  first.Set(kGauge, {"5", "6"}, 3);
  first.Set(kOther, {}, 9);
  r.Publish(std::move(first));
  GaugeSnapshot second;
  second.Set(kGauge, {"3", "4"}, 7);
  r.Publish(std::move(second));
  std::string text = r.Render();
  EXPECT_EQ(text.find("b=\"1\""), std::string::npos) << text;
  EXPECT_EQ(text.find("b=\"5\""), std::string::npos) << text;
  EXPECT_NE(text.find("test_things{b=\"3\",a=\"4\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ntest_other 9\n"), std::string::npos) << "not in the second snapshot";
  GaugeSnapshot third;
  third.Include(kOther);  // now without series
  r.Publish(std::move(third));
  text = r.Render();
  EXPECT_EQ(text.find("\ntest_other 9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE test_other gauge\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, CountersAddUp) {
  MetricsRegistry r;
  r.Add(kCounter, {}, 0);
  EXPECT_NE(r.Render().find("\ntest_events_total 0\n"), std::string::npos);
  r.Add(kCounter, {}, 2);
  r.Add(kCounter, {}, 3);
  EXPECT_NE(r.Render().find("# TYPE test_events_total counter\ntest_events_total 5\n"),
            std::string::npos);
}

TEST(MetricsRegistry, HistogramsAreCumulativeWithLeLast) {
  MetricsRegistry r;
  const std::vector<double> bounds = {0.1, 1};
  r.Observe(kHistogram, {"/v1/tasks"}, 0.05, bounds);
  r.Observe(kHistogram, {"/v1/tasks"}, 0.5, bounds);
  r.Observe(kHistogram, {"/v1/tasks"}, 5, bounds);
  EXPECT_EQ(r.Render(),
            "# HELP test_seconds Durations.\n# TYPE test_seconds histogram\n"
            "test_seconds_bucket{route=\"/v1/tasks\",le=\"0.1\"} 1\n"
            "test_seconds_bucket{route=\"/v1/tasks\",le=\"1\"} 2\n"
            "test_seconds_bucket{route=\"/v1/tasks\",le=\"+Inf\"} 3\n"
            "test_seconds_sum{route=\"/v1/tasks\"} 5.55\n"
            "test_seconds_count{route=\"/v1/tasks\"} 3\n");
}

}  // namespace
}  // namespace gpupool::server
