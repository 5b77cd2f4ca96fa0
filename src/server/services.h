// The control plane's services, by topic, and Services: references to all of them, as the API
// takes them (the Controller implements every one). Nothing here knows about HTTP or JSON.
#pragma once

#include "server/account_service.h"
#include "server/agent_service.h"
#include "server/auth_service.h"
#include "server/billing_service.h"
#include "server/caller.h"
#include "server/dataset_service.h"
#include "server/event_service.h"
#include "server/file_service.h"
#include "server/node_service.h"
#include "server/operations_service.h"
#include "server/snapshot_service.h"
#include "server/task_service.h"
#include "server/telemetry_service.h"
#include "server/volume_service.h"

namespace gpupool::server {

struct Services {
  AuthService& auth;
  TaskService& tasks;
  NodeService& nodes;
  AgentService& agents;
  AccountService& accounts;
  BillingService& billing;
  TelemetryService& telemetry;
  FileService& files;
  SnapshotService& snapshots;
  VolumeService& volumes;
  DatasetService& datasets;
  EventService& events;
  OperationsService& operations;

  // Every service from one object that implements them all.
  template <typename All>
  static Services Of(All& all) {
    return {all, all, all, all, all, all, all, all, all, all, all, all, all};
  }
};

}  // namespace gpupool::server
