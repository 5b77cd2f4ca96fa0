// Controller: a task's own credential (auth_service.h LookupTaskToken). The token names the task
// and the binding it was issued for and carries the server's MAC over both (SecretBox::Mac), so it
// is recognised without being stored, survives a server restart, cannot be made for another task
// or binding, and stops working when that binding ends (the task ends, is preempted or re-queued).
// Form: "gpt1.<task id>.<bound_ms>.<hex HMAC-SHA256>".
#include <charconv>

#include "server/controller.h"

namespace gpupool::server {
namespace {

constexpr std::string_view kTokenPrefix = "gpt1.";
constexpr std::string_view kTokenPurpose = "gpupool task token v1";

tl::unexpected<Error> Refused(const std::string& why) {
  return MakeError(ErrorCode::kUnauthenticated, "task token refused: " + why);
}

// Compares without leaking where they differ.
bool SameText(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string Controller::TaskToken(const Task& task) const {
  const std::string what = task.id + "." + std::to_string(task.bound_ms);
  return std::string(kTokenPrefix) + what + "." + secrets_.Mac(kTokenPurpose, what);
}

Result<Caller> Controller::LookupTaskToken(const std::string& token) {
  std::string_view rest = token;
  if (rest.substr(0, kTokenPrefix.size()) != kTokenPrefix) return Refused("not a task token");
  rest.remove_prefix(kTokenPrefix.size());
  const size_t dot1 = rest.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return Refused("malformed");
  const std::string id(rest.substr(0, dot1));
  const std::string_view bound = rest.substr(dot1 + 1, dot2 - dot1 - 1);
  int64_t bound_ms = 0;
  const auto [end, ec] = std::from_chars(bound.data(), bound.data() + bound.size(), bound_ms);
  if (id.empty() || ec != std::errc() || end != bound.data() + bound.size() || bound_ms <= 0) {
    return Refused("malformed");
  }
  const std::string what = id + "." + std::string(bound);
  if (!SameText(rest.substr(dot2 + 1), secrets_.Mac(kTokenPurpose, what))) {
    return Refused("it was not issued by this server");
  }
  std::lock_guard lock(mu_);
  const Task* t = FindTask(id);
  if (t == nullptr || !HoldsResources(t->state) || t->bound_ms != bound_ms) {
    return Refused("task " + id + " no longer runs the binding it was issued for");
  }
  Caller caller;
  caller.user_id = "task:" + id;
  caller.task_id = id;
  return caller;
}

}  // namespace gpupool::server
