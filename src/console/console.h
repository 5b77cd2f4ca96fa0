// The web console's files as the server serves them (docs/api.md "The console's files"): the
// table of files built into the binary (generated from the console's dist directory by
// web/embed_console.cmake; empty in a build without a console), and the pure function that
// answers a GET or HEAD outside the API from such a table — index.html for the client's routes,
// the hashed assets with immutable caching, a gzip variant when the client accepts it, and the
// security headers (Content-Security-Policy, …) on every answer.
#pragma once

#include <span>
#include <string_view>

#include "api/http_message.h"

namespace gpupool::console {

struct Asset {
  std::string_view path;   // as requested: "/index.html", "/assets/index-DfSAp4Z1.js"
  std::string_view bytes;  // the file
  std::string_view gzip;   // the file gzip-compressed at build time; empty when not smaller
};

// The files built into this binary (the generated console_assets.cc); empty without a console.
std::span<const Asset> EmbeddedAssets();

// Only this origin's scripts, styles, images, fonts and API; no plugins, no framing, no
// <base>, forms only to this origin.
inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

// The Content-Type of a file by its extension; application/octet-stream when unknown.
std::string_view ContentTypeOf(std::string_view path);

// Whether an Accept-Encoding header allows gzip: "gzip" or "*" listed with a weight above 0
// (and gzip not refused by name), case-insensitively.
bool AcceptsGzip(std::string_view accept_encoding);

// The answer to a GET or HEAD of a path outside the API (the HTTP server leaves out a HEAD's
// body). A file of the table under /assets/ (hashed names): the file, cached for a year as
// immutable; any other path under /assets/: 404. Any other path: the file of that name if the
// table has one, otherwise /index.html (the client's routes: /tasks/t-12), never cached without
// revalidation. The gzip variant goes out when the request accepts it (with Vary:
// Accept-Encoding on every answer of a file that has one). A table without /index.html (a
// build without the console) answers 404 with a page saying how to build it.
api::HttpResponse Serve(std::span<const Asset> assets, const api::HttpRequest& request);

}  // namespace gpupool::console
