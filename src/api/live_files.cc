// A running task's files through its node's tunnel (see live_files.h).
#include "api/live_files.h"

#include <memory>
#include <mutex>
#include <utility>

#include "api/http_message.h"
#include "proto/files.h"
#include "proto/json_codec.h"

namespace gpupool::api {
namespace {

// The most a reply may carry: a listing of a task's files (100,000 at most) or a chunk.
constexpr size_t kMaxReply = size_t{64} << 20;

struct Answer {
  proto::LiveFileReply reply;
  std::string bytes;  // a read's
};

// The reply's bytes as they arrive, answered once.
struct Collect {
  std::mutex mu;
  std::string received;
  std::function<void(Result<Answer>)> done;  // empty once called

  void Finish(Result<Answer> answer) {
    std::function<void(Result<Answer>)> call;
    {
      std::lock_guard lock(mu);
      call = std::move(done);
      done = nullptr;
    }
    if (call) call(std::move(answer));
  }
};

Result<Answer> ParseReply(const std::string& received, const std::string& where) {
  const size_t line_end = received.find('\n');
  if (line_end == std::string::npos) {
    return MakeError(ErrorCode::kInternal, where + ": the agent's answer has no reply line");
  }
  Result<proto::LiveFileReply> reply = proto::DecodeBody<proto::LiveFileReply>(
      std::string_view(received).substr(0, line_end), true, proto::UnknownFields::kIgnore);
  if (!reply) {
    return MakeError(ErrorCode::kInternal,
                     where + ": the agent's answer is malformed: " + reply.error().message);
  }
  if (!reply->code.empty()) {
    return MakeError(ParseErrorCodeName(reply->code).value_or(ErrorCode::kInternal),
                     std::move(reply->message));
  }
  return Answer{std::move(*reply), received.substr(line_end + 1)};
}

// One request on `task`'s files on `node`.
void Call(TunnelHub& tunnels, const std::string& node, const std::string& task,
          const proto::LiveFileRequest& request, std::string body,
          std::function<void(Result<Answer>)> done) {
  const std::string where = "the files of task " + task + " on node " + node;
  std::string message = proto::Dump(proto::Encode(request)) + "\n" + std::move(body);
  tunnels.Open(
      node, proto::TunnelOpen{task, "files", 0, {}},
      [where, message = std::move(message),
       done = std::move(done)](Result<std::shared_ptr<tunnel::Stream>> opened) mutable {
        if (!opened) {
          return done(MakeError(opened.error().code, where + ": " + opened.error().message));
        }
        std::shared_ptr<tunnel::Stream> stream = *opened;
        auto collect = std::make_shared<Collect>();
        collect->done = std::move(done);
        tunnel::StreamHandlers h;
        std::weak_ptr<tunnel::Stream> weak = stream;
        h.on_data = [collect, weak, where](std::string bytes) {
          const auto s = weak.lock();
          bool over = false;
          {
            std::lock_guard lock(collect->mu);
            over = collect->received.size() + bytes.size() > kMaxReply;
            if (!over) collect->received += bytes;
          }
          if (over) {
            if (s) s->Reset("a reply over " + std::to_string(kMaxReply) + " bytes");
            return collect->Finish(MakeError(
                ErrorCode::kInternal,
                where + ": the agent's answer is over " + std::to_string(kMaxReply) + " bytes"));
          }
          if (s) s->Consumed(bytes.size());
        };
        h.on_end = [collect, where] {
          std::string received;
          {
            std::lock_guard lock(collect->mu);
            received = std::move(collect->received);
          }
          collect->Finish(ParseReply(received, where));
        };
        h.on_reset = [collect, where](std::string why) {
          collect->Finish(MakeError(ErrorCode::kUnavailable, where + ": " + why));
        };
        stream->SetHandlers(std::move(h));
        stream->Write(std::move(message));
        stream->End();
      });
}

}  // namespace

void TunnelNodeFiles::List(const std::string& node, const std::string& task_id,
                           const std::string& path, server::Done<server::FileListing> done) {
  Call(tunnels_, node, task_id, {.op = "list", .path = path}, "",
       [done = std::move(done)](Result<Answer> a) {
         if (!a) return done(tl::unexpected(a.error()));
         server::FileListing listing;
         listing.is_dir = a->reply.type == "dir";
         for (proto::FileEntry& f : a->reply.files) {
           listing.files.push_back({std::move(f.path), f.size, std::move(f.sha256)});
         }
         done(std::move(listing));
       });
}

void TunnelNodeFiles::Read(const std::string& node, const std::string& task_id,
                           const std::string& path, int64_t offset, int64_t length,
                           server::Done<server::FileChunk> done) {
  Call(tunnels_, node, task_id, {.op = "read", .path = path, .offset = offset, .length = length},
       "", [done = std::move(done)](Result<Answer> a) {
         if (!a) return done(tl::unexpected(a.error()));
         done(server::FileChunk{std::move(a->bytes), a->reply.size, std::move(a->reply.sha256)});
       });
}

void TunnelNodeFiles::Received(const std::string& node, const std::string& task_id,
                               const std::string& path, server::Done<int64_t> done) {
  Call(tunnels_, node, task_id, {.op = "status", .path = path}, "",
       [done = std::move(done)](Result<Answer> a) {
         if (!a) return done(tl::unexpected(a.error()));
         done(a->reply.received);
       });
}

void TunnelNodeFiles::Append(const std::string& node, const std::string& task_id,
                             const std::string& path, int64_t offset, std::optional<int64_t> size,
                             int64_t max_file_bytes, std::string bytes,
                             server::Done<int64_t> done) {
  Call(tunnels_, node, task_id,
       {.op = "append",
        .path = path,
        .offset = offset,
        .size = size,
        .max_file_bytes = max_file_bytes},
       std::move(bytes), [done = std::move(done)](Result<Answer> a) {
         if (!a) return done(tl::unexpected(a.error()));
         done(a->reply.received);
       });
}

void TunnelNodeFiles::Commit(const std::string& node, const std::string& task_id,
                             const std::string& path, int64_t size, const std::string& sha256,
                             server::Done<server::StoredFile> done) {
  Call(tunnels_, node, task_id, {.op = "commit", .path = path, .size = size, .sha256 = sha256}, "",
       [done = std::move(done), path](Result<Answer> a) {
         if (!a) return done(tl::unexpected(a.error()));
         done(server::StoredFile{path, a->reply.size, std::move(a->reply.sha256)});
       });
}

}  // namespace gpupool::api
