// Renders the OpenAPI document as the Markdown API reference (see reference.h).
#include "proto/reference.h"

#include <cctype>
#include <map>
#include <string_view>
#include <vector>

#include "proto/openapi.h"
#include "proto/operations.h"

namespace gpupool::proto {
namespace {

// Who may call an operation, in words.
std::string AuthLine(Auth auth) {
  switch (auth) {
    case Auth::kPublic:
      return "Public (unsigned). ";
    case Auth::kSigned:
      return "Signed, or a console session. ";
    case Auth::kSignedOnly:
      return "Signed (a console session may not). ";
    case Auth::kSession:
      return "A console session (its cookie). ";
  }
  return "";
}

constexpr std::string_view kRefPrefix = "#/components/schemas/";

std::string Anchor(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\";
    out += c;
  }
  return out;
}

// "integer (int64)", "[Task](#task)", "array of string", "one of: a, b", "… or null".
std::string TypeOf(const Json& s) {
  if (s.contains("$ref")) {
    const std::string name = s["$ref"].get<std::string>().substr(kRefPrefix.size());
    return "[" + name + "](#" + Anchor(name) + ")";
  }
  if (s.contains("anyOf")) {
    std::string out;
    for (const Json& alt : s["anyOf"]) {
      if (!out.empty()) out += " or ";
      out += alt.contains("type") && alt["type"] == "null" ? "null" : TypeOf(alt);
    }
    return out;
  }
  if (s.contains("enum")) {
    std::string out = "one of:";
    for (const Json& v : s["enum"]) out += " `" + v.get<std::string>() + "`";
    return out;
  }
  std::string type;
  bool nullable = false;
  if (s.contains("type") && s["type"].is_array()) {
    type = s["type"][0].get<std::string>();
    nullable = true;
  } else if (s.contains("type")) {
    type = s["type"].get<std::string>();
  }
  std::string out = type;
  if (type == "array") out = "array of " + TypeOf(s["items"]);
  if (type == "object" && s.contains("additionalProperties")) {
    out = "map of " + TypeOf(s["additionalProperties"]);
  }
  if (s.contains("format") && type != "array") out += " (" + s["format"].get<std::string>() + ")";
  if (nullable) out += " or null";
  return out;
}

// The rules a value must keep: ranges, lengths, formats.
std::string RulesOf(const Json& s) {
  std::vector<std::string> rules;
  if (s.contains("minimum") && s.contains("maximum")) {
    rules.push_back(std::to_string(s["minimum"].get<int64_t>()) + ".." +
                    std::to_string(s["maximum"].get<int64_t>()));
  } else if (s.contains("minimum")) {
    rules.push_back(">= " + std::to_string(s["minimum"].get<int64_t>()));
  } else if (s.contains("maximum")) {
    rules.push_back("<= " + std::to_string(s["maximum"].get<int64_t>()));
  }
  if (s.contains("pattern")) rules.push_back("identifier: 1..128 of `A-Z a-z 0-9 - _ .`");
  if (s.contains("maxLength")) {
    rules.push_back("at most " + std::to_string(s["maxLength"].get<int64_t>()) + " bytes");
  }
  if (s.contains("contentEncoding")) rules.push_back("base64");
  if (s.contains("maxItems")) {
    rules.push_back("at most " + std::to_string(s["maxItems"].get<int64_t>()) + " items");
  }
  if (s.contains("maxProperties")) {
    rules.push_back("at most " + std::to_string(s["maxProperties"].get<int64_t>()) + " entries");
  }
  std::string out;
  for (const std::string& r : rules) out += (out.empty() ? "" : "; ") + r;
  return out;
}

std::string Description(const Json& s) {
  return s.contains("description") ? Escape(s["description"].get<std::string>()) : "";
}

std::string BodyType(const Json& content) {
  for (const auto& [type, media] : content.items()) {
    if (type == "application/json" && media["schema"].contains("$ref")) {
      return TypeOf(media["schema"]);
    }
    return "`" + type + "`";
  }
  return "";
}

// The events of a text/event-stream answer (its x-gpupool-events), as a table; "" otherwise.
std::string EventTable(const Json& content) {
  if (!content.contains("text/event-stream")) return "";
  std::string out = "\n| event | data | description |\n|---|---|---|\n";
  for (const auto& [name, event] : content["text/event-stream"]["x-gpupool-events"].items()) {
    out += "| `" + name + "` | " + TypeOf(event["schema"]) + " | " + Description(event) + " |\n";
  }
  return out;
}

}  // namespace

std::string ApiReferenceMarkdown() {
  const Json doc = OpenApiDocument();
  std::string out =
      "# gpupool REST API reference\n\n"
      "Generated from the wire types of `src/proto` (`gpupool openapi --markdown`); do not edit:\n"
      "a test fails when this file differs from what the code generates. The same description\n"
      "gives docs/openapi.json (OpenAPI 3.1). docs/api.md explains the conventions, signing and\n"
      "behaviour. Every error answers with [Error](#error); the refusals of the server's limits\n"
      "(429 for a key past its rate, 503, 507 for a full disk; docs/api.md \"Limits\") are\n"
      "listed with each operation, as shared responses in docs/openapi.json.\n";
  // Operations grouped by tag, in the order of proto/operations.h.
  std::vector<std::string> tags;
  std::map<std::string, std::string> sections;
  ForEachOperation([&]<typename Op>() {
    const std::string path(Op::kInfo.path);
    std::string method(Op::kInfo.method);
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const Json& op = doc["paths"][path][method];
    const std::string tag = op["tags"][0].get<std::string>();
    if (!sections.count(tag)) tags.push_back(tag);
    std::string& s = sections[tag];
    std::string upper = method;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    s += "\n### `" + upper + " " + path + "`\n\n" + op["summary"].get<std::string>() + ". ";
    s += AuthLine(Op::kInfo.auth);
    std::string refusals;
    for (const auto& [status, response] : op["responses"].items()) {
      if (status == "default") continue;
      if (response.contains("$ref")) {  // a shared refusal, listed after the answers
        refusals += (refusals.empty() ? "" : ", ") + status;
        continue;
      }
      if (!response.contains("content")) {  // 101: a WebSocket follows
        s += "Answers " + status + " and switches to a WebSocket of binary messages.\n";
        continue;
      }
      s += "Answers " + status + " with " + BodyType(response["content"]) + ".\n";
      s += EventTable(response["content"]);
    }
    if (!refusals.empty()) s += "May be refused with " + refusals + " (see the limits).\n";
    if (op.contains("requestBody")) {
      s += "\nBody" + std::string(op["requestBody"]["required"].get<bool>() ? "" : " (optional)") +
           ": " + BodyType(op["requestBody"]["content"]) + ".\n";
    }
    if (op.contains("parameters")) {
      s += "\n| parameter | in | type | required | rules | description "
           "|\n|---|---|---|---|---|---|\n";
      for (const Json& p : op["parameters"]) {
        s += "| `" + p["name"].get<std::string>() + "` | " + p["in"].get<std::string>() + " | " +
             TypeOf(p["schema"]) + " | " + (p["required"].get<bool>() ? "yes" : "") + " | " +
             RulesOf(p["schema"]) + " | " + Description(p) + " |\n";
      }
    }
  });
  for (const std::string& tag : tags) out += "\n## " + tag + "\n" + sections[tag];
  out += "\n## Types\n";
  for (const auto& [name, schema] : doc["components"]["schemas"].items()) {
    out += "\n### " + name + "\n\n" + Description(schema) + "\n";
    if (schema.contains("anyOf")) {
      out += "\nAt least one of:";
      for (const Json& alt : schema["anyOf"])
        out += " `" + alt["required"][0].get<std::string>() + "`";
      out += ".\n";
    }
    if (schema["properties"].empty()) continue;
    std::map<std::string, bool> required;
    if (schema.contains("required")) {
      for (const Json& r : schema["required"]) required[r.get<std::string>()] = true;
    }
    out += "\n| field | type | " +
           std::string(schema.contains("additionalProperties") ? "required" : "always present") +
           " | rules | description |\n|---|---|---|---|---|\n";
    for (const auto& [field, s] : schema["properties"].items()) {
      out += "| `" + field + "` | " + TypeOf(s) + " | " + (required.count(field) ? "yes" : "") +
             " | " + RulesOf(s) + " | " + Description(s) + " |\n";
    }
  }
  return out;
}

}  // namespace gpupool::proto
