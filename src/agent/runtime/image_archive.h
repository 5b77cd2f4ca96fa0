// A task's container saved as an image that any node can load (docs/snapshots.md "Saving a
// container as an image"): from the `docker save` stream of the committed container, the
// `docker load` archive of only the layers its base image lacks, with the base's configuration
// rather than the container's (whose variables hold the task's token). A node that has the base
// loads it: Docker reads a layer's file only when it does not have the layer already. No I/O but
// the descriptors handed in, so that all of it is unit-tested.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::agent::docker {

// The configuration of a committed container made that of an image to run tasks in: the
// "config" of its base (`base_config`, GET /images/{base}/json's Config: its Env, Cmd,
// Entrypoint, WorkingDir, User, Labels, …) in place of the container's, without "container" and
// "container_config", and its last history entry's created_by set to `created_by`. kInternal
// when `committed` is not an image configuration.
Result<std::string> ImageConfigFor(std::string_view committed, const nlohmann::json& base_config,
                                   const std::string& created_by);

struct LoadArchive {
  std::string id;     // "sha256:<hex>": the configuration's digest, the id Docker gives it
  int64_t bytes = 0;  // of the archive written
};

// Reads the `docker save` archive of one image through `read` (up to n bytes into the buffer;
// 0 at its end) and writes into `out` (an empty file, from its start) the archive `docker load`
// reads on a node that has its base: manifest.json (no tags, its configuration renamed), the
// configuration `config` makes of the saved one (ImageConfigFor), and the layer.tar of each layer
// whose SHA-256 (its diff id) is not in `base_layers` ("sha256:<hex>", the base's RootFS.Layers).
// The legacy per-layer json files (which repeat the container's configuration) and the tags are
// left out. kInternal for an archive that is not one image's, or a layer it lists but lacks.
Result<LoadArchive> WriteLoadArchive(
    const std::function<Result<size_t>(char* into, size_t n)>& read,
    const std::set<std::string>& base_layers,
    const std::function<Result<std::string>(std::string_view saved)>& config, int out);

}  // namespace gpupool::agent::docker
