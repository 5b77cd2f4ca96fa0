// The console's serving rules (see console.h).
#include "console/console.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/text.h"

namespace gpupool::console {
namespace {

constexpr std::string_view kAssetsPrefix = "/assets/";
constexpr std::string_view kIndex = "/index.html";
constexpr std::string_view kImmutable = "public, max-age=31536000, immutable";
constexpr std::string_view kRevalidate = "no-cache";

constexpr std::string_view kNoConsolePage =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpupool</title>"
    "</head><body><p>This gpupool was built without its web console. Install node and npm "
    "(<code>scripts/install-deps.sh</code>), then build again (<code>cmake -S . -B build -G "
    "Ninja &amp;&amp; ninja -C build gpupool</code>). The API is at <code>/v1/</code>.</p>"
    "</body></html>\n";

// The weight of one Accept-Encoding item's parameters ("q=0.5"): 0 only for q=0, 0.0, 0.00 or
// 0.000; a missing or unreadable q counts as 1.
bool PositiveWeight(std::string_view params) {
  while (!params.empty()) {
    const size_t semi = params.find(';');
    const std::string_view param = TrimBlanks(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') continue;
    const std::string_view value = TrimBlanks(param.substr(2));
    return value.empty() || value[0] != '0' ||
           value.find_first_not_of("0.") != std::string_view::npos;
  }
  return true;
}

const Asset* Find(std::span<const Asset> assets, std::string_view path) {
  for (const Asset& a : assets) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

api::HttpResponse WithSecurityHeaders(api::HttpResponse r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  return r;
}

api::HttpResponse NotFound(std::string_view content_type, std::string body) {
  api::HttpResponse r;
  r.status = 404;
  r.content_type = std::string(content_type);
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", std::string(kRevalidate));
  return WithSecurityHeaders(std::move(r));
}

api::HttpResponse File(const Asset& asset, std::string_view cache_control,
                       const api::HttpRequest& request) {
  api::HttpResponse r;
  r.content_type = std::string(ContentTypeOf(asset.path));
  r.headers.emplace_back("Cache-Control", std::string(cache_control));
  if (!asset.gzip.empty()) {
    r.headers.emplace_back("Vary", "Accept-Encoding");
    if (AcceptsGzip(request.accept_encoding)) {
      r.headers.emplace_back("Content-Encoding", "gzip");
      r.body = std::string(asset.gzip);
      return WithSecurityHeaders(std::move(r));
    }
  }
  r.body = std::string(asset.bytes);
  return WithSecurityHeaders(std::move(r));
}

}  // namespace

std::string_view ContentTypeOf(std::string_view path) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"},
  };
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return "application/octet-stream";
  }
  const std::string_view ext = path.substr(dot);
  for (const auto& [suffix, type] : kTypes) {
    if (EqualsIgnoringCase(ext, suffix)) return type;
  }
  return "application/octet-stream";
}

bool AcceptsGzip(std::string_view accept_encoding) {
  bool star = false;
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    const std::string_view item = accept_encoding.substr(0, comma);
    accept_encoding =
        comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = TrimBlanks(item.substr(0, semi));
    const std::string_view params =
        semi == std::string_view::npos ? std::string_view() : item.substr(semi + 1);
    if (EqualsIgnoringCase(coding, "gzip") || EqualsIgnoringCase(coding, "x-gzip")) {
      return PositiveWeight(params);  // named: its own weight decides
    }
    if (coding == "*") star = PositiveWeight(params);
  }
  return star;
}

api::HttpResponse Serve(std::span<const Asset> assets, const api::HttpRequest& request) {
  const std::string_view path = request.Path();
  const Asset* file = Find(assets, path);
  if (path.starts_with(kAssetsPrefix)) {
    if (file == nullptr) {
      return NotFound("text/plain; charset=utf-8", "no console file " + std::string(path) +
                                                       " (a page of an older build? reload it)\n");
    }
    return File(*file, kImmutable, request);
  }
  if (file == nullptr) file = Find(assets, kIndex);
  if (file == nullptr) return NotFound("text/html; charset=utf-8", std::string(kNoConsolePage));
  return File(*file, kRevalidate, request);
}

}  // namespace gpupool::console
