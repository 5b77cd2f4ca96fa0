// Tests for console/console.h over a table of test files (not the real build's): index.html for
// the client's routes, immutable caching of the hashed assets, 404 for unknown assets and for a
// build without a console, gzip only when the request accepts it (with Vary), content types,
// the security headers on every answer, HEAD answered as GET.
#include "console/console.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace gpupool::console {
namespace {

constexpr std::string_view kIndexHtml = "<!doctype html><script src=\"/assets/app-1a2b.js\">";
constexpr std::string_view kAppJs = "console.log('hi')";
constexpr std::string_view kAppJsGzip = "\x1f\x8b(pretend gzip of app.js)";
constexpr std::string_view kLogoPng = "\x89PNG";

const Asset kTable[] = {
    {"/index.html", kIndexHtml, ""},
    {"/assets/app-1a2b.js", kAppJs, kAppJsGzip},
    {"/assets/logo-3c4d.png", kLogoPng, ""},
    {"/favicon.ico", "ico", ""},
};

api::HttpResponse Get(std::string target, std::string accept_encoding = "",
                      std::string method = "GET") {
  api::HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.accept_encoding = std::move(accept_encoding);
  return Serve(kTable, r);
}

std::optional<std::string> Header(const api::HttpResponse& r, std::string_view name) {
  std::optional<std::string> found;
  for (const auto& [n, v] : r.headers) {
    if (n == name) {
      EXPECT_FALSE(found) << name << " given twice";
      found = v;
    }
  }
  return found;
}

void ExpectSecurityHeaders(const api::HttpResponse& r, const std::string& what) {
  EXPECT_EQ(Header(r, "Content-Security-Policy"),
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
            "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'")
      << what;
  EXPECT_EQ(Header(r, "X-Content-Type-Options"), "nosniff") << what;
  EXPECT_EQ(Header(r, "Referrer-Policy"), "no-referrer") << what;
  EXPECT_EQ(Header(r, "X-Frame-Options"), "DENY") << what;
}

TEST(Serve, ClientRoutesGetIndexHtmlRevalidatedEveryTime) {
  for (const char* path : {"/", "/index.html", "/tasks", "/tasks/t-12", "/login?next=%2Fnodes",
                           "/v2/not-the-api", "/healthzz"}) {
    const api::HttpResponse r = Get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, kIndexHtml) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << path;
    EXPECT_EQ(Header(r, "Cache-Control"), "no-cache") << path;
    EXPECT_EQ(Header(r, "Content-Encoding"), std::nullopt) << path;
    ExpectSecurityHeaders(r, path);
  }
}

TEST(Serve, AFileOutsideAssetsIsServedAsItselfRevalidated) {
  const api::HttpResponse r = Get("/favicon.ico");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ico");
  EXPECT_EQ(r.content_type, "image/x-icon");
  EXPECT_EQ(Header(r, "Cache-Control"), "no-cache");
}

TEST(Serve, HashedAssetsAreImmutableForAYear) {
  const api::HttpResponse r = Get("/assets/logo-3c4d.png", "gzip");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kLogoPng) << "no gzip variant: the bytes as they are";
  EXPECT_EQ(r.content_type, "image/png");
  EXPECT_EQ(Header(r, "Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(Header(r, "Content-Encoding"), std::nullopt);
  EXPECT_EQ(Header(r, "Vary"), std::nullopt) << "one representation only";
  ExpectSecurityHeaders(r, "png");
}

TEST(Serve, UnknownAssetIs404NotTheIndex) {
  for (const char* path : {"/assets/app-0000.js", "/assets/", "/assets/app-1a2b.js/x"}) {
    const api::HttpResponse r = Get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_NE(r.body.find(std::string("no console file ") + path), std::string::npos) << r.body;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
    ExpectSecurityHeaders(r, path);
  }
}

TEST(Serve, GzipVariantOnlyWhenAccepted) {
  struct Row {
    const char* accept_encoding;
    bool gzip;
  };
  for (const Row& row :
       {Row{"", false}, Row{"gzip", true}, Row{"deflate, gzip, br", true}, Row{"GZIP;q=0.5", true},
        Row{"gzip;q=0", false}, Row{"gzip; q=0.000", false}, Row{"br", false}, Row{"*", true},
        Row{"*;q=0", false}, Row{"gzip;q=0, *", false}, Row{"identity, x-gzip", true}}) {
    const api::HttpResponse r = Get("/assets/app-1a2b.js", row.accept_encoding);
    EXPECT_EQ(r.status, 200) << row.accept_encoding;
    EXPECT_EQ(r.body, row.gzip ? kAppJsGzip : kAppJs) << row.accept_encoding;
    EXPECT_EQ(Header(r, "Content-Encoding"),
              row.gzip ? std::optional<std::string>("gzip") : std::nullopt)
        << row.accept_encoding;
    EXPECT_EQ(Header(r, "Vary"), "Accept-Encoding") << row.accept_encoding;
    EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8") << "of the file, not the gzip";
  }
}

TEST(Serve, HeadIsAnsweredAsGet) {
  for (const char* path : {"/", "/tasks/t-1", "/assets/app-1a2b.js", "/assets/nope.js"}) {
    const api::HttpResponse get = Get(path, "gzip");
    const api::HttpResponse head = Get(path, "gzip", "HEAD");
    EXPECT_EQ(head.status, get.status) << path;
    EXPECT_EQ(head.content_type, get.content_type) << path;
    EXPECT_EQ(head.headers, get.headers) << path;
    EXPECT_EQ(head.body, get.body) << path << ": the HTTP server leaves a HEAD's body out";
  }
}

TEST(Serve, WithoutAConsoleEveryPageSaysHowToBuildIt) {
  api::HttpRequest request;
  request.method = "GET";
  for (const char* path : {"/", "/tasks"}) {
    request.target = path;
    const api::HttpResponse r = Serve({}, request);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_NE(r.body.find("built without its web console"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("scripts/install-deps.sh"), std::string::npos) << r.body;
    ExpectSecurityHeaders(r, path);
  }
}

TEST(ContentTypeOf, ByExtensionCaseInsensitively) {
  EXPECT_EQ(ContentTypeOf("/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.CSS"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.woff2"), "font/woff2");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.map"), "application/json");
  EXPECT_EQ(ContentTypeOf("/assets/a-1.bin"), "application/octet-stream");
  EXPECT_EQ(ContentTypeOf("/assets.d/README"), "application/octet-stream");
}

}  // namespace
}  // namespace gpupool::console
