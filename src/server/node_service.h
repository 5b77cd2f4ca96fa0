// NodeService: the nodes as users see them — admins see and change them (cordon, drain);
// members see them without their tasks. What agents call is AgentService.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "server/caller.h"

namespace gpupool::server {

struct NodeView {
  NodeInfo info;
  std::vector<std::string> tasks;  // ids of the tasks bound to it
  int64_t cpu_free_milli = 0;
  int64_t memory_free_mib = 0;
  int64_t gpu_milli_free = 0;
};

class NodeService {
 public:
  virtual ~NodeService() = default;

  virtual std::vector<NodeView> ListNodes(const Caller& caller) = 0;
  virtual Result<NodeView> GetNode(const Caller& caller, const std::string& name) = 0;
  virtual void SetCordon(const Caller& caller, const std::string& name, bool cordoned,
                         Done<NodeView> done) = 0;
  // Cordons the node and stops (preempts, when restartable) the tasks on it.
  virtual void DrainNode(const Caller& caller, const std::string& name, Done<NodeView> done) = 0;
};

}  // namespace gpupool::server
