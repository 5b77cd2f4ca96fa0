// Targets of the typed client's calls (see resources.h).
#include "api/resources.h"

namespace gpupool::api {

std::string OperationTarget(std::string_view pattern, std::initializer_list<std::string_view> args,
                            const proto::QueryPairs& query) {
  std::string target;
  const std::string_view* arg = args.begin();
  size_t at = 0;
  while (at < pattern.size()) {
    const size_t open = pattern.find('{', at);
    if (open == std::string_view::npos) {
      target += pattern.substr(at);
      break;
    }
    target += pattern.substr(at, open - at);
    // A missing argument leaves the parameter empty: the server answers 404.
    if (arg != args.end()) target += PercentEncode(*arg++);
    at = pattern.find('}', open) + 1;
  }
  for (size_t i = 0; i < query.size(); ++i) {
    target += i == 0 ? '?' : '&';
    target += PercentEncode(query[i].first) + "=" + PercentEncode(query[i].second);
  }
  return target;
}

}  // namespace gpupool::api
