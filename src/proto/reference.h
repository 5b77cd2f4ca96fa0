// The API reference for people (docs/api-reference.md): every operation and every wire type
// with its fields, rules and doc lines, rendered as Markdown from the OpenAPI document — the same
// one description the codecs walk, so the reference cannot drift from the server.
#pragma once

#include <string>

namespace gpupool::proto {

std::string ApiReferenceMarkdown();

}  // namespace gpupool::proto
