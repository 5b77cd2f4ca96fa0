// Fuzzes the wire contract's decoders: the input's first byte picks an operation of
// proto/operations.h and what to decode (its request body strictly, as the server does; its
// answer leniently, as clients do; its query string), the rest is the text. Besides not crashing
// (ASan, UBSan), a value that decodes must survive a round trip: its encoding decodes again, to
// the same encoding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "api/url.h"
#include "fuzz/fuzz_check.h"
#include "proto/json_codec.h"
#include "proto/operations.h"
#include "proto/query_codec.h"

namespace {

using namespace gpupool;

template <typename T>
void Body(std::string_view text, bool required, proto::UnknownFields unknown) {
  if constexpr (proto::Described<T>) {
    Result<T> value = proto::DecodeBody<T>(text, required, unknown);
    if (!value) return;
    const std::string once = proto::Dump(proto::Encode(*value));
    Result<T> again = proto::DecodeBody<T>(once, true, unknown);
    FUZZ_CHECK(again.has_value(), std::string(T::kName) + ": " + once + " -> " +
                                      (again ? "" : again.error().message));
    FUZZ_CHECK(proto::Dump(proto::Encode(*again)) == once, std::string(T::kName) + ": " + once);
  }
}

template <typename T>
void Query(std::string_view raw) {
  if constexpr (proto::Described<T>) {
    auto pairs = api::ParseQueryString(raw);
    if (!pairs) return;
    Result<T> value = proto::DecodeQuery<T>(*pairs);
    if (!value) return;
    const proto::QueryPairs once = proto::EncodeQuery(*value);
    Result<T> again = proto::DecodeQuery<T>(once);
    FUZZ_CHECK(again.has_value(), std::string(T::kName) + ": " + std::string(raw) + " -> " +
                                      (again ? "" : again.error().message));
    FUZZ_CHECK(proto::EncodeQuery(*again) == once, std::string(T::kName) + ": " + std::string(raw));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr size_t kOps = std::tuple_size_v<proto::ops::All>;
  const size_t pick = data[0] % kOps;
  const int what = data[0] / kOps % 3;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t i = 0;
  proto::ForEachOperation([&]<typename Op>() {
    if (i++ != pick) return;
    switch (what) {
      case 0:
        Body<typename Op::Request>(text, !Op::kInfo.body_optional, proto::UnknownFields::kRefuse);
        break;
      case 1:
        Body<typename Op::Response>(text, true, proto::UnknownFields::kIgnore);
        break;
      default:
        Query<typename Op::Query>(text);
    }
  });
  return 0;
}
