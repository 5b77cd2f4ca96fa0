// Builds the OpenAPI 3.1 document from the operation list (see openapi.h).
#include "proto/openapi.h"

#include <string_view>
#include <type_traits>

#include "proto/events.h"
#include "proto/operations.h"
#include "proto/schema.h"

namespace gpupool::proto {
namespace {

constexpr std::string_view kSecurity = "gpupoolHmac";
constexpr std::string_view kSessionSecurity = "gpupoolSession";

// Who may call an operation, as OpenAPI security requirements (alternatives).
Json SecurityOf(Auth auth) {
  const Json hmac = {{kSecurity, Json::array()}};
  const Json session = {{kSessionSecurity, Json::array()}};
  switch (auth) {
    case Auth::kPublic:
      return Json::array();
    case Auth::kSigned:
      return Json::array({hmac, session});
    case Auth::kSignedOnly:
      return Json::array({hmac});
    case Auth::kSession:
      return Json::array({session});
  }
  return Json::array();
}

// The content of a body of wire type T: JSON with T's schema, or the raw kinds.
template <typename T>
Json Content(SchemaRegistry& registry) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return {{"application/octet-stream", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}};
  } else if constexpr (std::is_same_v<T, MetricsText>) {
    return {{"text/plain", {{"schema", {{"type", "string"}}}}}};
  } else if constexpr (std::is_same_v<T, JsonDocument>) {
    return {{"application/json", {{"schema", {{"type", "object"}}}}}};
  } else if constexpr (std::is_same_v<T, EventStream>) {
    // OpenAPI 3.1 cannot type the items of a stream: the events and their payloads' schemas
    // are listed in an extension, keyed by the `event:` name.
    Json events = Json::object();
    ForEachEvent([&]<typename E>() {
      events[std::string(E::kInfo.name)] = {{"description", E::kInfo.doc},
                                            {"schema", registry.Ref<typename E::Data>()}};
    });
    return {{"text/event-stream",
             {{"schema",
               {{"type", "string"},
                {"description",
                 "Server-Sent Events: each event is `event: <name>`, `data: <one line of JSON>` "
                 "and a blank line; a `: keep-alive` comment comes every 15 s"}}},
              {"x-gpupool-events", std::move(events)}}}};
  } else {
    return {{"application/json", {{"schema", registry.Ref<T>()}}}};
  }
}

// Collects a query type's fields as OpenAPI parameters.
class ParameterBuilder {
 public:
  explicit ParameterBuilder(SchemaRegistry* registry) : registry_(registry) {}
  void RequireOneOf(std::initializer_list<std::string_view>) {}
  template <typename F>
  void operator()(std::string_view name, const F&, const Spec& spec = {}) {
    Json p = {{"name", name}, {"in", "query"}, {"required", spec.required}};
    Json schema = FieldSchema<F>(spec, *registry_, false);
    if constexpr (std::is_same_v<F, std::vector<std::string>>) {
      p["style"] = "form";
      p["explode"] = false;  // state=running,pending
    }
    p["schema"] = std::move(schema);
    if (!spec.doc.empty()) p["description"] = spec.doc;
    parameters.push_back(std::move(p));
  }
  Json parameters = Json::array();

 private:
  SchemaRegistry* registry_;
};

Json PathParameters(std::string_view path) {
  Json out = Json::array();
  size_t open = path.find('{');
  while (open != std::string_view::npos) {
    const size_t close = path.find('}', open);
    out.push_back({{"name", path.substr(open + 1, close - open - 1)},
                   {"in", "path"},
                   {"required", true},
                   {"schema", {{"type", "string"}, {"pattern", "^[A-Za-z0-9._-]{1,128}$"}}}});
    open = path.find('{', close);
  }
  return out;
}

// The refusals every operation of a kind may meet whatever its own rules (docs/api.md "Limits"):
// shared responses, referred to from each operation.
Json RefusalResponses(const Json& error_ref) {
  const Json body = {{"application/json", {{"schema", error_ref}}}};
  const Json retry_after = {{"Retry-After", {{"$ref", "#/components/headers/RetryAfter"}}}};
  return {
      {"TooManyRequests",
       {{"description",
         "resource_exhausted: the access key is past its request rate (--key-rate, "
         "--key-burst), with Retry-After; or a quota, balance or capacity refused the request, "
         "without it"},
        {"headers", retry_after},
        {"content", body}}},
      {"Unavailable",
       {{"description",
         "unavailable: the server's connection limits or its nonce cache are full (with "
         "Retry-After), or its blocking-work queue is; nothing was done, retry later"},
        {"headers", retry_after},
        {"content", body}}},
      {"InsufficientStorage",
       {{"description",
         "insufficient_storage: the server's disk is past its reserve (--disk-reserve-mib); "
         "nothing changed, retry once space is freed"},
        {"content", body}}}};
}

}  // namespace

Json OpenApiDocument() {
  SchemaRegistry registry;
  const Json error_ref = registry.Ref<ErrorBody>();
  Json paths = Json::object();
  ForEachOperation([&]<typename Op>() {
    const OperationInfo& info = Op::kInfo;
    Json op = {{"operationId", info.id}, {"tags", {info.tag}}, {"summary", info.summary}};
    Json parameters = PathParameters(info.path);
    if constexpr (!std::is_same_v<typename Op::Query, Empty>) {
      ParameterBuilder builder(&registry);
      const typename Op::Query query{};
      Op::Query::Describe(builder, query);
      for (Json& p : builder.parameters) parameters.push_back(std::move(p));
    }
    if (!parameters.empty()) op["parameters"] = std::move(parameters);
    if constexpr (!std::is_same_v<typename Op::Request, Empty>) {
      op["requestBody"] = {{"required", !info.body_optional},
                           {"content", Content<typename Op::Request>(registry)}};
    }
    Json success = {{"description", info.summary}};
    if constexpr (std::is_same_v<typename Op::Response, WebSocketStream>) {
      // 101 Switching Protocols: the connection carries WebSocket messages from here on.
      success["description"] = std::string(info.summary) +
                               " (a WebSocket: send the handshake, Upgrade: websocket; binary "
                               "messages follow)";
    } else if constexpr (std::is_same_v<typename Op::Response, ExecStream>) {
      success["description"] = std::string(info.summary) +
                               " (a WebSocket; its binary messages carry frames: one channel "
                               "byte, the payload's length as 4 bytes big-endian, the payload)";
      success["x-gpupool-exec-channels"] = {
          {"stdin", {{"id", 0}, {"from", "client"}, {"payload", "bytes; empty: end of input"}}},
          {"stdout", {{"id", 1}, {"from", "task"}, {"payload", "bytes"}}},
          {"stderr", {{"id", 2}, {"from", "task"}, {"payload", "bytes (none with a tty)"}}},
          {"exit", {{"id", 3}, {"from", "task"}, {"schema", registry.Ref<ExecExit>()}}},
          {"resize", {{"id", 4}, {"from", "client"}, {"schema", registry.Ref<ExecResize>()}}},
          {"start", {{"id", 5}, {"from", "client"}, {"schema", registry.Ref<ExecStart>()}}}};
    } else {
      success["content"] = Content<typename Op::Response>(registry);
    }
    op["responses"] = {
        {std::to_string(info.status), std::move(success)},
        {"503", {{"$ref", "#/components/responses/Unavailable"}}},
        {"default",
         {{"description", "An error: the code and a message that names the field or value"},
          {"content", {{"application/json", {{"schema", error_ref}}}}}}}};
    if (info.auth == Auth::kSigned || info.auth == Auth::kSignedOnly) {
      op["responses"]["429"] = {{"$ref", "#/components/responses/TooManyRequests"}};
    }
    if (RefusedOnFullDisk(info.method, info.path)) {
      op["responses"]["507"] = {{"$ref", "#/components/responses/InsufficientStorage"}};
    }
    op["security"] = SecurityOf(info.auth);
    std::string method(info.method);
    for (char& c : method) c = static_cast<char>(c - 'A' + 'a');
    paths[std::string(info.path)][method] = std::move(op);
  });
  return {
      {"openapi", "3.1.0"},
      {"info",
       {{"title", "gpupool"},
        {"version", "1"},
        {"description",
         "The REST API of gpupool, a self-hosted GPU compute cloud. Requests are signed with an "
         "access key and its secret (docs/api.md, \"Authentication\"), or carry the web console's "
         "session cookie (\"Console sessions\"); times are milliseconds "
         "since the Unix epoch, money is micros, resources are milli-CPU, MiB and milli-GPU."}}},
      {"paths", std::move(paths)},
      {"components",
       {{"schemas", registry.schemas()},
        {"responses", RefusalResponses(error_ref)},
        {"headers",
         {{"RetryAfter",
           {{"description",
             "Whole seconds after which the same request may be sent again; nothing was done"},
            {"schema", {{"type", "integer"}, {"minimum", 1}}}}}}},
        {"securitySchemes",
         {{kSecurity,
           {{"type", "apiKey"},
            {"in", "header"},
            {"name", "Authorization"},
            {"description",
             "GPUPOOL-HMAC-SHA256 Credential=<access key>, Timestamp=<ms>, Nonce=<nonce>, "
             "Signature=hex(HMAC-SHA256(secret, method \\n path \\n sorted query \\n "
             "SHA-256(body) \\n timestamp \\n nonce))"}}},
          {kSessionSecurity,
           {{"type", "apiKey"},
            {"in", "cookie"},
            {"name", "gpupool_session"},
            {"description",
             "A console session (POST /v1/console/sessions sets the cookie). Every method but "
             "GET and HEAD must also send the session's csrf_token as X-CSRF-Token."}}}}}}}};
}

std::string OpenApiText() { return OpenApiDocument().dump(2) + "\n"; }

}  // namespace gpupool::proto
