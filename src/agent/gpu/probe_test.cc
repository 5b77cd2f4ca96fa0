// Tests for OpenProbe: a simulate spec wins (and its errors are returned), NVML is used when it
// loads, and without either the node offers CPU only with a banner saying so.
#include "agent/gpu/probe.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace gpupool::agent {
namespace {

TEST(OpenProbe, SimulateSpecGivesSimulatedGpus) {
  std::string banner;
  Result<std::unique_ptr<GpuProbe>> p =
      OpenProbe("A100-80GB:4,T4:2,A100-80GB:1:mig", "node1", &banner, "/nonexistent/nvml.so");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ((*p)->Kind(), "simulated");
  EXPECT_EQ(banner, "simulated GPUs: 5× A100-80GB (1 in MIG mode), 2× T4");
  EXPECT_EQ((*p)->Discover()->at(0).uuid, "GPU-sim-node1-0");
}

TEST(OpenProbe, BadSimulateSpecIsAnError) {
  std::string banner;
  Result<std::unique_ptr<GpuProbe>> p = OpenProbe("X100:2", "node1", &banner);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("'X100:2': unknown GPU model X100"), std::string::npos);
}

TEST(OpenProbe, WithoutNvmlTheNodeOffersCpuOnly) {
  std::string banner;
  Result<std::unique_ptr<GpuProbe>> p =
      OpenProbe("", "node1", &banner, "/nonexistent/libnvidia-ml.so.1");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ((*p)->Kind(), "none");
  EXPECT_TRUE((*p)->Discover()->empty());
  EXPECT_TRUE((*p)->Sample()->empty());
  EXPECT_EQ((*p)->MigInstanceUuid(0, 0).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE((*p)->ApplyMigLayout(0, true, {}).has_value());
  EXPECT_TRUE(banner.starts_with("no NVIDIA GPUs found (/nonexistent/libnvidia-ml.so.1: "))
      << banner;
  EXPECT_TRUE(
      banner.ends_with("); this node offers CPU only — pass --simulate-gpus to simulate some"))
      << banner;
}

TEST(OpenProbe, UsesNvmlWhenItLoads) {
  std::string banner;
  Result<std::unique_ptr<GpuProbe>> p = OpenProbe("", "node1", &banner, FAKE_NVML_LIBRARY);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ((*p)->Kind(), "nvml");
  EXPECT_EQ(banner, "NVIDIA GPUs: 1× A100-80GB (1 in MIG mode), 1× T4 (driver 550.54.15)");
}

TEST(OpenProbe, SummarizeGpus) {
  EXPECT_EQ(SummarizeGpus({}), "no GPUs");
  Gpu a;
  a.model = "T4";
  Gpu b;
  b.model = "G2";
  EXPECT_EQ(SummarizeGpus({a, b, a}), "2× T4, 1× G2");
}

}  // namespace
}  // namespace gpupool::agent
