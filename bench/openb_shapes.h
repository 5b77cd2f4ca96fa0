// Realistic synthetic workloads for the benchmarks: request shapes drawn from the openb `default`
// pod distribution, and a synthetic cluster of identical 8-GPU nodes.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/task.h"
#include "sched/policy.h"
#include "sched/schedule.h"

namespace gpupool::bench {

struct Shape {
  int64_t cpu_milli;
  int64_t memory_mib;
  int32_t gpu_milli;  // per GPU; 1000 for whole GPUs, 0 for CPU-only
  int gpu_count;      // num_gpu of the trace
  int weight;         // how many pods of the trace have this shape
};

// Every distinct (cpu_milli, gpu_milli, num_gpu) of data/openb/openb_pod_list_default.csv (8,152
// pods, 91 shapes, none with a gpu_spec) with its pod count, most frequent first; memory_mib is the
// most common memory of the pods of that shape. Computed once from the CSV with a short script
// (group by the three columns, count, take the modal memory_mib).
inline constexpr Shape kOpenbDefaultShapes[] = {
    {3152, 5600, 810, 1, 1047}, {11300, 49152, 1000, 1, 874}, {11400, 48128, 1000, 1, 599},
    {3152, 5600, 1000, 1, 470}, {11908, 47104, 470, 1, 388}, {12500, 57344, 0, 0, 366},
    {8000, 30517, 470, 1, 360}, {12000, 24576, 1000, 1, 326}, {32000, 49152, 0, 0, 290},
    {18708, 64512, 1000, 1, 255}, {11908, 47104, 650, 1, 237}, {4000, 22888, 320, 1, 232},
    {9810, 41560, 1000, 1, 195}, {8000, 30517, 0, 0, 185}, {8000, 16384, 1000, 1, 164},
    {4000, 24576, 1000, 1, 159}, {15700, 58368, 1000, 1, 158}, {11908, 47104, 1000, 1, 153},
    {16000, 32768, 1000, 1, 150}, {4000, 30517, 230, 1, 122}, {6000, 6144, 460, 1, 120},
    {15400, 51200, 0, 0, 120}, {16500, 51200, 0, 0, 95}, {14200, 58368, 1000, 1, 93},
    {24200, 93184, 1000, 1, 84}, {3152, 5600, 590, 1, 75}, {4152, 10600, 550, 1, 72},
    {8000, 30517, 320, 1, 72}, {11900, 77824, 1000, 1, 55}, {4000, 15258, 160, 1, 54},
    {4152, 10600, 370, 1, 45}, {4000, 15258, 220, 1, 43}, {8200, 33792, 1000, 1, 41},
    {15200, 80896, 1000, 1, 36}, {4152, 10600, 810, 1, 31}, {16400, 125952, 1000, 1, 29},
    {1000, 2048, 320, 1, 22}, {6000, 22888, 160, 1, 20}, {8000, 30517, 220, 1, 19},
    {4000, 22888, 110, 1, 18}, {4000, 22888, 480, 1, 18}, {8000, 30517, 230, 1, 18},
    {64200, 263168, 1000, 8, 18}, {88000, 327680, 1000, 8, 18}, {1000, 6144, 1000, 1, 15},
    {16000, 31250, 0, 0, 14}, {8000, 30517, 650, 1, 12}, {7000, 30000, 1000, 1, 11},
    {11400, 57344, 0, 0, 11}, {15400, 90112, 1000, 1, 9}, {32200, 132096, 1000, 4, 9},
    {2000, 16384, 1000, 1, 8}, {6000, 32768, 1000, 1, 8}, {14900, 73728, 1000, 1, 8},
    {4000, 22888, 330, 1, 7}, {16200, 66560, 1000, 2, 7}, {4000, 22888, 350, 1, 6},
    {9400, 52224, 1000, 1, 6}, {12000, 18432, 460, 1, 6}, {4152, 10600, 270, 1, 4},
    {6000, 22888, 50, 1, 4}, {6000, 22888, 110, 1, 4}, {12000, 24576, 0, 0, 4},
    {4000, 15258, 50, 1, 3}, {6000, 65536, 1000, 2, 3}, {30200, 160768, 1000, 2, 3},
    {32000, 131072, 1000, 4, 3}, {60200, 320512, 1000, 4, 3}, {64000, 262144, 1000, 8, 3},
    {120000, 737280, 1000, 8, 3}, {1000, 2048, 650, 1, 2}, {2000, 8192, 370, 1, 2},
    {4000, 15258, 470, 1, 2}, {4000, 15258, 650, 1, 2}, {6000, 30517, 320, 1, 2},
    {8000, 30517, 110, 1, 2}, {8000, 30517, 440, 1, 2}, {8000, 16000, 460, 1, 2},
    {17400, 43008, 1000, 2, 2}, {20000, 65536, 0, 0, 2}, {120200, 640000, 1000, 8, 2},
    {1000, 2048, 140, 1, 1}, {1000, 2048, 290, 1, 1}, {5000, 10240, 1000, 1, 1},
    {8000, 30517, 480, 1, 1}, {8710, 41560, 1000, 1, 1}, {10000, 48828, 0, 0, 1},
    {11800, 78848, 1000, 1, 1}, {14000, 0, 1000, 1, 1}, {14000, 60000, 1000, 2, 1},
    {15900, 90112, 1000, 1, 1},
};

// The request of a shape, converted as sim/trace.cc converts a pod: num_gpu 1 with a share under
// 1000 is a fractional task, anything else asks for num_gpu whole GPUs.
inline TaskRequest ShapeRequest(const Shape& s) {
  TaskRequest r;
  r.cpu_milli = s.cpu_milli;
  r.memory_mib = s.memory_mib;
  if (s.gpu_count == 1 && s.gpu_milli > 0 && s.gpu_milli < kMilliPerGpu) {
    r.gpu_milli = s.gpu_milli;
  } else {
    r.gpu_count = s.gpu_count;
  }
  return r;
}

// The whole trace as requests (each shape `weight` times): what TypicalTasks is computed from, as
// the FGD experiment computes it from the whole pod list.
inline std::vector<TaskRequest> ShapeWorkload() {
  std::vector<TaskRequest> out;
  for (const Shape& s : kOpenbDefaultShapes) {
    for (int i = 0; i < s.weight; ++i) out.push_back(ShapeRequest(s));
  }
  return out;
}

inline std::vector<sched::TypicalTask> ShapeTypicalTasks() {
  const std::vector<TaskRequest> w = ShapeWorkload();
  return sched::TypicalTasks(w);
}

// `count` tasks whose shapes are drawn with replacement, in proportion to their pod counts.
inline std::vector<sched::QueuedTask> DrawTasks(size_t count, uint64_t seed) {
  int total = 0;
  for (const Shape& s : kOpenbDefaultShapes) total += s.weight;
  std::mt19937_64 rng(seed);
  std::vector<sched::QueuedTask> out(count);
  for (size_t i = 0; i < count; ++i) {
    int pick = static_cast<int>(sched::UniformIndex(rng, static_cast<uint64_t>(total)));
    const Shape* s = kOpenbDefaultShapes;
    while (pick >= s->weight) pick -= (s++)->weight;
    out[i].id = "task-" + std::to_string(i);
    out[i].request = ShapeRequest(*s);
  }
  return out;
}

// `count` copies of the trace's 8-GPU G3 node: 128 cores, 768 GiB, 8 GPUs. The workload asks
// for ≈ 14 cores per GPU (openb's cluster has ≈ 17), so the more common 96-core node would run
// out of CPU near 84 % GPU allocated and never reach the benchmark's 90 %.
inline std::vector<Node> SyntheticNodes(int count) {
  std::vector<Node> nodes;
  nodes.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    nodes.push_back(Node::Make("node-" + std::to_string(i), 128000, 786432, 8, "G3"));
  }
  return nodes;
}

}  // namespace gpupool::bench
