// The API's OpenAPI 3.1 document, generated from the operations (operations.h) and the wire
// types' descriptions (describe.h); served at GET /v1/openapi.json and checked in as
// docs/openapi.json (a test fails when the two differ).
#pragma once

#include <string>

#include "proto/json_codec.h"

namespace gpupool::proto {

// The document as JSON, and as the text served and checked in (indented, newline-terminated).
Json OpenApiDocument();
std::string OpenApiText();

}  // namespace gpupool::proto
