// JSON for the wire types (describe.h): strict parsing of a body into a JSON object, the strict
// decoder (unknown fields, wrong types, values out of range and bad formats refused with the
// field's name), and the encoder. nlohmann::json exceptions are caught in json_codec.cc and never
// leave it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "proto/describe.h"

namespace gpupool::proto {

using Json = nlohmann::json;

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body (or any text, `what` naming it in messages) that must be a JSON object.
// An empty body is an error when `required` and `{}` otherwise. Errors: invalid JSON (with line
// and column), a number beyond double's range, a key given twice in one object, nesting deeper
// than kMaxJsonDepth, a body that is not an object.
Result<Json> ParseJsonObject(std::string_view body, bool required,
                             std::string_view what = "request body");

// Renders a JSON value for a body (invalid UTF-8 replaced, never throws).
std::string Dump(const Json& value);

// What the decoder does with a member the type does not describe: a server refuses it (a typo is
// an error, not a silently ignored setting); a client reading a newer server's answer ignores it,
// and takes values outside a closed set (a state a newer server added) as they are.
enum class UnknownFields { kRefuse, kIgnore };

// Reads the fields of one JSON object strictly. The first problem is kept and later reads do
// nothing, so a reader reads every field and checks error() once.
class FieldReader {
 public:
  // `where` prefixes field names in messages ("gpus[1]."); empty at the top level.
  FieldReader(const Json& object, std::string where = "");

  // Fails on the first member not in `allowed` ("unknown field 'gpu_cnt'").
  void Allow(std::span<const std::string_view> allowed);
  // Fails unless at least one of `names` is present ("command or image is required").
  void RequireOneOf(std::initializer_list<std::string_view> names);

  bool Has(std::string_view name) const;
  bool ok() const { return !failed_; }
  const Error& error() const { return error_; }
  void Fail(std::string message);
  // The name of a field as messages show it (with the prefix).
  std::string Name(std::string_view field) const { return where_ + std::string(field); }

  // The member, whatever its type, or nullptr when missing (fails when `required`).
  const Json* Find(std::string_view name, bool required);

  // An integer value (an array item) as T within [min, max].
  template <typename T>
  bool IntValue(const std::string& name, const Json& v, int64_t min, int64_t max, T* out);

 private:
  // v as an integer of [type_min, type_max] ("out of range for a 32-bit integer") and then of
  // [min, max] (">= 0", "1..1000").
  bool Int64Of(const std::string& name, const Json& v, int64_t type_min, int64_t type_max,
               int64_t min, int64_t max, int64_t* out);

  const Json& object_;
  std::string where_;
  bool failed_ = false;
  Error error_;
};

template <typename T>
bool FieldReader::IntValue(const std::string& name, const Json& v, int64_t min, int64_t max,
                           T* out) {
  constexpr int64_t kTypeMin = std::numeric_limits<T>::min();
  constexpr int64_t kTypeMax = std::numeric_limits<T>::max();
  int64_t x = 0;
  if (!Int64Of(name, v, kTypeMin, kTypeMax, std::max(min, kTypeMin), std::min(max, kTypeMax), &x)) {
    return false;
  }
  *out = static_cast<T>(x);
  return true;
}

// Decodes one object of a wire type (the visitor its Describe is called with).
class Decoder {
 public:
  Decoder(const Json& object, std::string where, UnknownFields unknown)
      : r_(object, std::move(where)), unknown_(unknown) {}

  template <Described T>
  void Start() {
    if (unknown_ == UnknownFields::kRefuse) {
      const std::vector<std::string_view> names = FieldNamesOf<T>();
      r_.Allow(names);
    }
  }
  void RequireOneOf(std::initializer_list<std::string_view> names) { r_.RequireOneOf(names); }

  // An absent field keeps its default (nullopt for std::optional); Item reads a present one.
  template <typename F>
  void operator()(std::string_view name, F& field, const Spec& spec = {}) {
    if (!r_.ok()) return;
    Read(name, field, spec);
  }

  bool ok() const { return r_.ok(); }
  const Error& error() const { return r_.error(); }

 private:
  template <typename F>
  void Read(std::string_view name, F& field, const Spec& spec);
  template <typename F>
  bool Item(const std::string& at, const Json& v, F& out, const Spec& spec);

  FieldReader r_;
  UnknownFields unknown_;
};

// Decodes `object` as a T; `where` prefixes field names in messages.
template <Described T>
Result<T> Decode(const Json& object, UnknownFields unknown = UnknownFields::kRefuse,
                 std::string where = "") {
  T value{};
  Decoder d(object, std::move(where), unknown);
  d.Start<T>();
  T::Describe(d, value);
  if (!d.ok()) return tl::unexpected(d.error());
  return value;
}

// Parses and decodes a body: empty is {} unless `required`.
template <Described T>
Result<T> DecodeBody(std::string_view body, bool required,
                     UnknownFields unknown = UnknownFields::kRefuse) {
  Result<Json> json = ParseJsonObject(body, required);
  if (!json) return tl::unexpected(json.error());
  return Decode<T>(*json, unknown);
}

template <typename F>
void Decoder::Read(std::string_view name, F& field, const Spec& spec) {
  const Json* v = r_.Find(name, spec.required);
  if (v == nullptr) return;
  Item(r_.Name(name), *v, field, spec);
}

// One value `v` (a field's, or an array item's) named `at` in messages.
template <typename F>
bool Decoder::Item(const std::string& at, const Json& v, F& out, const Spec& spec) {
  if constexpr (std::is_same_v<F, bool>) {
    if (!v.is_boolean()) {
      r_.Fail(at + " must be a boolean, got " + v.type_name());
      return false;
    }
    out = v.get<bool>();
  } else if constexpr (std::is_same_v<F, int32_t> || std::is_same_v<F, int64_t>) {
    return r_.IntValue(at, v, spec.min, spec.max, &out);
  } else if constexpr (std::is_same_v<F, double>) {
    if (!v.is_number()) {
      r_.Fail(at + " must be a number, got " + v.type_name());
      return false;
    }
    out = v.get<double>();
  } else if constexpr (std::is_same_v<F, std::string>) {
    if (!v.is_string()) {
      r_.Fail(at + " must be a string, got " + v.type_name());
      return false;
    }
    const std::string& s = v.get_ref<const std::string&>();
    // A client reading answers takes a value a newer server added to a closed set as it is.
    Spec checked = spec;
    // and stored text as it is (a name stored before control characters were refused): the
    // CLI escapes what it prints.
    if (unknown_ == UnknownFields::kIgnore) {
      checked.one_of = {};
      if (checked.format == Format::kText) checked.format = Format::kNone;
    }
    if (Status valid = CheckStringValue(at, s, checked); !valid) {
      r_.Fail(valid.error().message);
      return false;
    }
    out = s;
  } else if constexpr (IsVector<F>::value) {
    using Elem = typename IsVector<F>::Item;
    if (!v.is_array()) {
      if constexpr (std::is_same_v<Elem, std::string>) {
        r_.Fail(at + " must be an array of strings, got " + v.type_name());
      } else {
        r_.Fail(at + " must be an array, got " + v.type_name());
      }
      return false;
    }
    if (v.size() > spec.max_items) {
      r_.Fail(at + " has more than " + std::to_string(spec.max_items) + " items (" +
              std::to_string(v.size()) + ")");
      return false;
    }
    F items(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (!Item(at + "[" + std::to_string(i) + "]", v[i], items[i], spec)) return false;
    }
    out = std::move(items);
  } else if constexpr (IsStringMap<F>::value) {
    using Value = typename IsStringMap<F>::Value;
    if (!v.is_object()) {
      r_.Fail(at + " must be an object, got " + v.type_name());
      return false;
    }
    if (v.size() > spec.max_items) {
      r_.Fail(at + " has more than " + std::to_string(spec.max_items) + " entries");
      return false;
    }
    F map;
    for (const auto& item : v.items()) {
      const std::string key_at = at + "." + item.key();
      if (item.key().empty() || item.key().size() > 256) {
        r_.Fail(key_at + ": keys are 1..256 bytes");
        return false;
      }
      Value value{};
      if (!Item(key_at, item.value(), value, spec)) return false;
      map.emplace(item.key(), std::move(value));
    }
    out = std::move(map);
  } else if constexpr (IsOptional<F>::value) {
    if (v.is_null() && spec.nullable) {
      out.reset();
      return true;
    }
    typename IsOptional<F>::Value value{};
    if (!Item(at, v, value, spec)) return false;
    out = std::move(value);
  } else {
    static_assert(Described<F>, "a field must be a scalar, a container or a wire type");
    if (!v.is_object()) {
      r_.Fail(at + " must be an object, got " + v.type_name());
      return false;
    }
    Result<F> nested = Decode<F>(v, unknown_, at + ".");
    if (!nested) {
      r_.Fail(nested.error().message);
      return false;
    }
    out = std::move(*nested);
  }
  return true;
}

// Encodes one object of a wire type: every field, except an unset std::optional that is not
// `nullable` (left out, so that the reader's default applies); a nullable one is null.
class Encoder {
 public:
  explicit Encoder(Json* out) : out_(out) {}

  void RequireOneOf(std::initializer_list<std::string_view>) {}

  template <typename F>
  void operator()(std::string_view name, const F& field, const Spec& spec = {}) {
    if constexpr (IsOptional<F>::value) {
      if (!field && !spec.nullable) return;
    }
    (*out_)[name] = Value(field);
  }

  template <typename F>
  static Json Value(const F& field) {
    if constexpr (IsOptional<F>::value) {
      return field ? Value(*field) : Json(nullptr);
    } else if constexpr (IsVector<F>::value) {
      Json list = Json::array();
      for (const auto& item : field) list.push_back(Value(item));
      return list;
    } else if constexpr (IsStringMap<F>::value) {
      Json map = Json::object();
      for (const auto& [key, value] : field) map[key] = Value(value);
      return map;
    } else if constexpr (Described<F>) {
      Json object = Json::object();
      Encoder e(&object);
      F::Describe(e, field);
      return object;
    } else {
      return Json(field);
    }
  }

 private:
  Json* out_;
};

// A wire value as JSON.
template <Described T>
Json Encode(const T& value) {
  return Encoder::Value(value);
}

}  // namespace gpupool::proto
