// JSON Schema (2020-12, as OpenAPI 3.1 uses it) of the wire types, from the same description the
// codecs walk (describe.h). Each wire type becomes one named schema under
// #/components/schemas; fields refer to nested types by $ref.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "proto/describe.h"
#include "proto/json_codec.h"

namespace gpupool::proto {

// The named schemas met so far ("components/schemas" of an OpenAPI document).
class SchemaRegistry {
 public:
  // {"$ref": "#/components/schemas/<kName>"}, registering T (and what it refers to) once.
  template <Described T>
  Json Ref();

  const Json& schemas() const { return schemas_; }

 private:
  Json schemas_ = Json::object();
};

// The schema of one field (or array item) of C++ type F with `spec`. `limits`: state the input
// limits (lengths, item counts) — for what a server reads, not for what it answers.
template <typename F>
Json FieldSchema(const Spec& spec, SchemaRegistry& registry, bool with_doc = true,
                 bool limits = true);

// Builds the object schema of a wire type.
class SchemaBuilder {
 public:
  SchemaBuilder(SchemaRegistry* registry, bool response)
      : registry_(registry), response_(response) {}

  void RequireOneOf(std::initializer_list<std::string_view> names) {
    Json any = Json::array();
    for (std::string_view n : names) any.push_back({{"required", {n}}});
    any_of_ = std::move(any);
  }

  template <typename F>
  void operator()(std::string_view name, const F&, const Spec& spec = {}) {
    properties_[name] = FieldSchema<F>(spec, *registry_, true, !response_);
    const bool present = response_ ? (!IsOptional<F>::value || spec.nullable) : spec.required;
    if (present) required_.push_back(name);
  }

  Json Finish(std::string_view doc) && {
    Json schema = {{"type", "object"}, {"properties", std::move(properties_)}};
    if (!doc.empty()) schema["description"] = doc;
    if (!required_.empty()) schema["required"] = std::move(required_);
    if (!any_of_.is_null()) schema["anyOf"] = std::move(any_of_);
    // Requests are read strictly: a member the schema does not name is refused.
    if (!response_) schema["additionalProperties"] = false;
    return schema;
  }

 private:
  SchemaRegistry* registry_;
  bool response_;
  Json properties_ = Json::object();
  Json required_ = Json::array();
  Json any_of_;
};

template <Described T>
Json SchemaRegistry::Ref() {
  const std::string name(T::kName);
  Json ref = {{"$ref", "#/components/schemas/" + name}};
  if (schemas_.contains(name)) return ref;
  schemas_[name] = Json::object();  // placeholder: a type that refers to itself stops here
  SchemaBuilder builder(this, IsResponse<T>());
  const T value{};
  T::Describe(builder, value);
  schemas_[name] = std::move(builder).Finish(T::kDoc);
  return ref;
}

template <typename F>
Json FieldSchema(const Spec& spec, SchemaRegistry& registry, bool with_doc, bool limits) {
  Json s;
  if constexpr (IsOptional<F>::value) {
    s = FieldSchema<typename IsOptional<F>::Value>(spec, registry, false, limits);
    if (spec.nullable) {
      if (s.contains("$ref")) {
        s = {{"anyOf", {std::move(s), {{"type", "null"}}}}};
      } else {
        s["type"] = {s["type"], "null"};
      }
    }
  } else if constexpr (std::is_same_v<F, bool>) {
    s = {{"type", "boolean"}};
  } else if constexpr (std::is_same_v<F, int32_t> || std::is_same_v<F, int64_t>) {
    s = {{"type", "integer"}, {"format", sizeof(F) == 4 ? "int32" : "int64"}};
    if (spec.min > std::numeric_limits<F>::min()) s["minimum"] = spec.min;
    if (spec.max < std::numeric_limits<F>::max()) s["maximum"] = spec.max;
  } else if constexpr (std::is_same_v<F, double>) {
    s = {{"type", "number"}, {"format", "double"}};
  } else if constexpr (std::is_same_v<F, std::string>) {
    s = {{"type", "string"}};
    switch (spec.format) {
      case Format::kNone:
        if (spec.one_of.empty() && limits) s["maxLength"] = spec.max_bytes;
        break;
      case Format::kIdentifier:
        s["pattern"] = "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$";
        break;
      case Format::kBase64:
        s["contentEncoding"] = "base64";
        break;
      case Format::kText:
        if (spec.one_of.empty() && limits) s["maxLength"] = spec.max_bytes;
        s["pattern"] = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
        break;
    }
    if (!spec.one_of.empty()) {
      Json values = Json::array();
      for (std::string_view v : spec.one_of) values.push_back(v);
      s["enum"] = std::move(values);
    }
  } else if constexpr (IsVector<F>::value) {
    s = {{"type", "array"},
         {"items", FieldSchema<typename IsVector<F>::Item>(spec, registry, false, limits)}};
    if (limits) s["maxItems"] = spec.max_items;
  } else if constexpr (IsStringMap<F>::value) {
    s = {{"type", "object"},
         {"additionalProperties",
          FieldSchema<typename IsStringMap<F>::Value>(spec, registry, false, limits)}};
    if (limits) s["maxProperties"] = spec.max_items;
  } else {
    static_assert(Described<F>, "a field must be a scalar, a container or a wire type");
    s = registry.Ref<F>();
  }
  if (with_doc && !spec.doc.empty()) {
    s["description"] = spec.doc;
  }
  return s;
}

}  // namespace gpupool::proto
