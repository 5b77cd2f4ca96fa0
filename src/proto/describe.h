// How a wire type describes its fields, once, for everything that reads or writes it: the strict
// JSON decoder, the encoder, the query-string decoder and the JSON Schema / OpenAPI generator all
// walk the same description (see json_codec.h, query_codec.h, schema.h).
//
// A wire type is a plain struct with a name, a doc line and a static Describe:
//
//   struct CreditRequest {
//     int64_t amount_micros = 0;
//     std::string note;
//     static constexpr std::string_view kName = "CreditRequest";
//     static constexpr std::string_view kDoc = "Credit added to a project's balance.";
//     template <typename V, typename Self> static void Describe(V& v, Self& s) {
//       v("amount_micros", s.amount_micros, {.required = true, .min = 1, .doc = "micros"});
//       v("note", s.note, {.max_bytes = 1024, .doc = "Shown in the ledger"});
//     }
//   };
//
// Field C++ types: bool, int32_t, int64_t, double, std::string, std::vector of any of these or of
// a wire type, a wire type (a nested object), std::optional of any of these (absent — or null
// where the field is `nullable` — means nullopt), std::map<std::string, std::string | double>.
// Types marked kResponse are what the server sends: every field is always present (optional ones
// as null when `nullable`), which their schema states. Request types name what is required.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/result.h"

namespace gpupool::proto {

// What a string must look like beyond its length; checked by the decoder, stated in the schema.
enum class Format {
  kNone,
  kIdentifier,  // 1..128 characters of A-Z a-z 0-9 - _ ., not "." or ".." (ids, node and
                // project names)
  kBase64,      // standard alphabet with padding (bytes on the wire)
  kText,        // text for people (names, notes): no control characters (C0 incl. NUL and
                // line breaks, DEL, C1), so nothing stored can drive a terminal it is printed on
};

// One field's rules and documentation. Designated initialisers keep descriptions short:
// {.required = true, .min = 1, .doc = "…"}.
struct Spec {
  bool required = false;  // a request is refused without it
  bool nullable = false;  // null is a value (std::optional fields): "unknown" / "none"
  int64_t min = std::numeric_limits<int64_t>::min();  // integers: inclusive range
  int64_t max = std::numeric_limits<int64_t>::max();
  size_t max_bytes = 4096;  // strings (each item of a string array, each value of a map)
  size_t max_items = 1024;  // arrays and maps
  Format format = Format::kNone;
  std::span<const std::string_view> one_of{};  // strings: the closed set of values (an enum)
  std::string_view doc{};
};

// Checks a string against the spec's length, format and closed set; the message names `name`.
// The one check both the JSON and the query decoders apply.
Status CheckStringValue(const std::string& name, const std::string& value, const Spec& spec);

// A wire type: something with a name and a field description.
template <typename T>
concept Described = requires {
  { T::kName } -> std::convertible_to<std::string_view>;
  { T::kDoc } -> std::convertible_to<std::string_view>;
};

// Response types (sent by the server) say so; the schema then lists every field as present.
template <typename T>
constexpr bool IsResponse() {
  if constexpr (requires { T::kResponse; }) {
    return T::kResponse;
  } else {
    return false;
  }
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {
  using Item = T;
};

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Value = T;
};

template <typename T>
struct IsStringMap : std::false_type {};
template <typename T>
struct IsStringMap<std::map<std::string, T>> : std::true_type {
  using Value = T;
};

// Walks the names of T's fields (and the groups of which one is required), for the checks that
// need the whole set before any field is read (unknown fields).
struct FieldNames {
  std::vector<std::string_view> names;
  template <typename F>
  void operator()(std::string_view name, const F&, const Spec& = {}) {
    names.push_back(name);
  }
  void RequireOneOf(std::initializer_list<std::string_view>) {}
};

template <Described T>
std::vector<std::string_view> FieldNamesOf() {
  static const std::vector<std::string_view> names = [] {
    FieldNames v;
    const T value{};
    T::Describe(v, value);
    return v.names;
  }();
  return names;
}

// A body that carries nothing: routes without a request body, or answers without content.
struct Empty {
  static constexpr std::string_view kName = "Empty";
  static constexpr std::string_view kDoc = "An empty object (or no body at all).";
  template <typename V, typename Self>
  static void Describe(V&, Self&) {}
};

}  // namespace gpupool::proto
