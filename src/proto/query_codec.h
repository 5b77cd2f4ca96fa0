// Query strings for the wire types (describe.h): a route's query parameters are a described
// struct too, decoded strictly from the (already percent-decoded) pairs — unknown or repeated
// names and values that do not parse are errors naming the parameter — and encoded back into
// pairs by clients. Strings, integers, booleans, comma-separated string lists and std::optional
// of these.
#pragma once

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "proto/describe.h"

namespace gpupool::proto {

using QueryPairs = std::vector<std::pair<std::string, std::string>>;

class QueryDecoder {
 public:
  explicit QueryDecoder(const QueryPairs& pairs) : pairs_(pairs) {}

  template <Described T>
  void Start() {
    const std::vector<std::string_view> names = FieldNamesOf<T>();
    for (size_t i = 0; i < pairs_.size() && ok(); ++i) {
      const std::string& name = pairs_[i].first;
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        Fail("unknown query parameter '" + name + "'");
      }
      for (size_t j = 0; j < i && ok(); ++j) {
        if (pairs_[j].first == name) Fail("query parameter '" + name + "' is given twice");
      }
    }
  }
  void RequireOneOf(std::initializer_list<std::string_view>) {}

  template <typename F>
  void operator()(std::string_view name, F& field, const Spec& spec = {}) {
    if (!ok()) return;
    const std::string* v = Get(name);
    if (v == nullptr) {
      if (spec.required) Fail(std::string(name) + " is required");
      return;
    }
    if constexpr (IsOptional<F>::value) {
      typename IsOptional<F>::Value value{};
      if (Read(name, *v, value, spec)) field = std::move(value);
    } else {
      Read(name, *v, field, spec);
    }
  }

  bool ok() const { return !failed_; }
  const Error& error() const { return error_; }

 private:
  const std::string* Get(std::string_view name) const {
    for (const auto& [n, v] : pairs_) {
      if (n == name) return &v;
    }
    return nullptr;
  }
  void Fail(std::string message) {
    if (failed_) return;
    failed_ = true;
    error_ = Error{ErrorCode::kInvalidArgument, std::move(message)};
  }
  bool Check(Status s) {
    if (!s) Fail(s.error().message);
    return ok();
  }

  template <typename F>
  bool Read(std::string_view name, const std::string& v, F& out, const Spec& spec) {
    if constexpr (std::is_same_v<F, int32_t> || std::is_same_v<F, int64_t>) {
      int64_t x = 0;
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (v.empty() || ec == std::errc::invalid_argument || ptr != v.data() + v.size()) {
        Fail(std::string(name) + " must be an integer, got '" + v + "'");
        return false;
      }
      const int64_t min = std::max<int64_t>(spec.min, std::numeric_limits<F>::min());
      const int64_t max = std::min<int64_t>(spec.max, std::numeric_limits<F>::max());
      if (ec == std::errc::result_out_of_range || x < min || x > max) {
        Fail(std::string(name) + " must be " + std::to_string(min) + ".." + std::to_string(max) +
             ", got " + v);
        return false;
      }
      out = static_cast<F>(x);
    } else if constexpr (std::is_same_v<F, bool>) {
      if (v != "true" && v != "false") {
        Fail(std::string(name) + " must be true or false, got '" + v + "'");
        return false;
      }
      out = v == "true";
    } else if constexpr (std::is_same_v<F, std::string>) {
      if (!Check(CheckStringValue(std::string(name), v, spec))) return false;
      out = v;
    } else {
      static_assert(std::is_same_v<F, std::vector<std::string>>,
                    "query parameters are scalars, optional scalars or comma-separated lists");
      std::vector<std::string> items;
      std::string_view rest = v;
      while (true) {
        const size_t comma = rest.find(',');
        std::string item(rest.substr(0, comma));
        if (!Check(CheckStringValue(std::string(name), item, spec))) return false;
        items.push_back(std::move(item));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      out = std::move(items);
    }
    return true;
  }

  const QueryPairs& pairs_;
  bool failed_ = false;
  Error error_;
};

template <Described T>
Result<T> DecodeQuery(const QueryPairs& pairs) {
  T value{};
  QueryDecoder d(pairs);
  d.Start<T>();
  T::Describe(d, value);
  if (!d.ok()) return tl::unexpected(d.error());
  return value;
}

// The pairs of a query (unset optionals and empty strings and lists left out), for clients.
class QueryEncoder {
 public:
  void RequireOneOf(std::initializer_list<std::string_view>) {}
  template <typename F>
  void operator()(std::string_view name, const F& field, const Spec& = {}) {
    if constexpr (IsOptional<F>::value) {
      if (field) Add(name, *field);
    } else {
      Add(name, field);
    }
  }
  QueryPairs pairs;

 private:
  template <typename F>
  void Add(std::string_view name, const F& v) {
    if constexpr (std::is_same_v<F, std::string>) {
      if (!v.empty()) pairs.emplace_back(name, v);
    } else if constexpr (std::is_same_v<F, bool>) {
      pairs.emplace_back(name, v ? "true" : "false");
    } else if constexpr (std::is_same_v<F, std::vector<std::string>>) {
      std::string joined;
      for (const std::string& item : v) joined += (joined.empty() ? "" : ",") + item;
      if (!joined.empty()) pairs.emplace_back(name, std::move(joined));
    } else {
      pairs.emplace_back(name, std::to_string(v));
    }
  }
};

template <Described T>
QueryPairs EncodeQuery(const T& value) {
  QueryEncoder e;
  T::Describe(e, value);
  return std::move(e.pairs);
}

}  // namespace gpupool::proto
