// Tests of api/file_transfer against a scripted HTTP server on loopback: what a server says is
// checked before a caller acts on it (a listed path outside the listed directory, a bad hash), a
// download whose bytes do not hash as listed fails naming both hashes, a cancelled transfer
// stops, and a download asks for its chunks ahead and writes them in order. The happy paths run
// against the real server in tests/ (agent_e2e, cli_integration).
#include "api/file_transfer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/http_server.h"
#include "api/signing.h"
#include "os/sha256.h"

namespace gpupool::api {
namespace {

using nlohmann::json;

// Answers every request with `body` (and `status`), JSON unless told otherwise.
class ScriptedServer {
 public:
  ScriptedServer()
      : server_(HttpServerOptions{}, [this](HttpRequest request, Responder respond) {
          HttpResponse r;
          {
            std::lock_guard lock(mu_);
            last_target_ = request.target;
            r = answer_;
          }
          respond(std::move(r));
        }) {
    EXPECT_TRUE(server_.Start());
  }
  void Answer(std::string body, int status = 200, std::string content_type = "application/json") {
    std::lock_guard lock(mu_);
    answer_.status = status;
    answer_.content_type = std::move(content_type);
    answer_.body = std::move(body);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::string last_target() {
    std::lock_guard lock(mu_);
    return last_target_;
  }

 private:
  std::mutex mu_;
  HttpResponse answer_;
  std::string last_target_;
  HttpServer server_;  // last: stopped before what its handler uses goes
};

class FileTransferTest : public ::testing::Test {
 protected:
  FileTransferTest() : client_(server_.endpoint(), "AKTEST", "secret") {}

  ScriptedServer server_;
  Client client_;
};

json Listing(const std::string& type, const json& files) {
  return {{"task", "t-1"}, {"path", "out"}, {"type", type}, {"files", files}};
}

TEST_F(FileTransferTest, AListingNamingAPlaceOutsideTheListedPathIsRefused) {
  const std::string sha(64, 'a');
  const struct {
    json listing;
    std::string message;
  } cases[] = {
      {Listing("dir", {{{"path", "out/../../etc/passwd"}, {"size", 1}, {"sha256", sha}}}),
       "'out/../../etc/passwd' has a '..' component"},
      {Listing("dir", {{{"path", "/etc/passwd"}, {"size", 1}, {"sha256", sha}}}), "is absolute"},
      {Listing("dir", {{{"path", "other/x"}, {"size", 1}, {"sha256", sha}}}),
       "names 'other/x', which is not below it"},
      {Listing("dir", {{{"path", "outside"}, {"size", 1}, {"sha256", sha}}}), "not below it"},
      {Listing("file", {{{"path", "out/x"}, {"size", 1}, {"sha256", sha}}}), "not below it"},
      {Listing("dir", {{{"path", "out/x"}, {"size", -1}, {"sha256", sha}}}), "bad size or sha256"},
      {Listing("dir", {{{"path", "out/x"}, {"size", 1}, {"sha256", "ABC"}}}), "bad size or sha256"},
      {json{{"files", json::array()}}, "has no type"},
  };
  for (const auto& c : cases) {
    server_.Answer(c.listing.dump());
    auto listing = ListTaskFiles(client_, "t-1", "out");
    ASSERT_FALSE(listing) << c.listing.dump();
    EXPECT_EQ(listing.error().code, ErrorCode::kInternal);
    EXPECT_NE(listing.error().message.find("the server's listing of t-1:out"), std::string::npos)
        << listing.error().message;
    EXPECT_NE(listing.error().message.find(c.message), std::string::npos)
        << listing.error().message;
  }
  EXPECT_EQ(server_.last_target(), "/v1/tasks/t-1/files?path=out");

  // An answer that is not a listing at all does not decode; the message names the field.
  server_.Answer(Listing("dir", {{{"path", "out/x"}, {"size", "1"}, {"sha256", sha}}}).dump());
  auto mistyped = ListTaskFiles(client_, "t-1", "out");
  ASSERT_FALSE(mistyped);
  EXPECT_EQ(mistyped.error().code, ErrorCode::kInternal);
  EXPECT_EQ(mistyped.error().message,
            "the server's answer to GET /v1/tasks/{id}/files does not parse: files[0].size must "
            "be an integer, got string");

  server_.Answer(Listing("dir", {{{"path", "out/a b"}, {"size", 3}, {"sha256", sha}}}).dump());
  auto good = ListTaskFiles(client_, "t-1", "out");
  ASSERT_TRUE(good) << good.error().message;
  ASSERT_EQ(good->files.size(), 1u);
  EXPECT_EQ(good->files[0].path, "out/a b");
}

TEST_F(FileTransferTest, ADownloadThatDoesNotHashAsListedFailsNamingBothHashes) {
  char name[] = "/tmp/file-transfer-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  unlink(name);
  server_.Answer("tampered", 200, "application/octet-stream");
  const proto::FileEntry file{"out/x", 8, os::Sha256Hex("original")};
  Status s = DownloadTaskFile(client_, "t-1", file, fd);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "t-1:out/x: the 8 bytes received hash to " + os::Sha256Hex("tampered") +
                ", but the server listed 8 bytes hashing to " + os::Sha256Hex("original"));
  EXPECT_EQ(server_.last_target(), "/v1/tasks/t-1/files/content?path=out%2Fx&offset=0&length=8");

  // A progress callback that says stop ends the transfer after the chunk.
  server_.Answer("original", 200, "application/octet-stream");
  Status cancelled =
      DownloadTaskFile(client_, "t-1", file, fd, [](int64_t, int64_t) { return false; });
  ASSERT_FALSE(cancelled);
  EXPECT_EQ(cancelled.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(cancelled.error().message, "downloading t-1:out/x: cancelled");
  close(fd);
}

// Serves a file's ranges (GET …/files/content?…&offset=O&length=N), holding the answer to the
// first chunk until the next two were asked for, so a download that does not ask ahead would
// wait (the hold ends after 10 s, and the test then fails on `overlapped`).
class RangeServer {
 public:
  explicit RangeServer(std::string content)
      : content_(std::move(content)),
        server_(HttpServerOptions{}, [this](HttpRequest request, Responder respond) {
          const std::string target = request.target;
          const auto number = [&](const std::string& name) {
            const size_t at = target.find("&" + name + "=");
            return std::stoll(target.substr(at + name.size() + 2));
          };
          const int64_t offset = number("offset");
          HttpResponse r;
          r.content_type = "application/octet-stream";
          r.body = content_.substr(static_cast<size_t>(offset),
                                   static_cast<size_t>(number("length")) - (offset == short_at_));
          std::unique_lock lock(mu_);
          asked_.push_back(offset);
          cv_.notify_all();
          if (offset != 0) return respond(std::move(r));
          std::thread([this, r = std::move(r), respond = std::move(respond)]() mutable {
            std::unique_lock held(mu_);
            overlapped_ =
                cv_.wait_for(held, std::chrono::seconds(10), [&] { return asked_.size() >= 3; });
            held.unlock();
            respond(std::move(r));
          }).detach();
        }) {
    EXPECT_TRUE(server_.Start());
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  bool overlapped() {
    std::lock_guard lock(mu_);
    return overlapped_;
  }
  void ShortAt(int64_t offset) { short_at_ = offset; }

 private:
  const std::string content_;
  std::atomic<int64_t> short_at_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> asked_;
  bool overlapped_ = false;
  HttpServer server_;
};

TEST(FileTransferRangesTest, ChunksAreAskedForAheadAndWrittenInOrder) {
  std::string content;
  for (int i = 0; content.size() < 3 * proto::kFileChunkBytes + 1000; ++i) {
    content += std::to_string(i) + "\n";
  }
  RangeServer server(content);
  Client client(server.endpoint(), "AKTEST", "secret");
  char name[] = "/tmp/file-transfer-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  const proto::FileEntry file{"out/x", static_cast<int64_t>(content.size()),
                              os::Sha256Hex(content)};
  Status s = DownloadTaskFile(client, "t-1", file, fd);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(server.overlapped()) << "the next chunks were asked for while the first one waited";
  std::string written(content.size(), '\0');
  ASSERT_EQ(pread(fd, written.data(), written.size(), 0), static_cast<ssize_t>(content.size()));
  EXPECT_TRUE(written == content);

  // A chunk shorter than asked (the file changed under the server) fails, saying where.
  server.ShortAt(proto::kFileChunkBytes);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
  s = DownloadTaskFile(client, "t-1", file, fd);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "t-1:out/x: the server sent " +
                                   std::to_string(proto::kFileChunkBytes - 1) +
                                   " bytes at offset " + std::to_string(proto::kFileChunkBytes) +
                                   " of " + std::to_string(content.size()) + ", not " +
                                   std::to_string(proto::kFileChunkBytes) + " (the file changed?)");
  close(fd);
  unlink(name);
}

TEST_F(FileTransferTest, TheServersRefusalComesBackWithItsCodeAndMessage) {
  server_.Answer(R"({"error":{"code":"failed_precondition","message":"task t-1 is running"}})",
                 409);
  char name[] = "/tmp/file-transfer-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  unlink(name);
  auto up = UploadTaskFile(client_, "t-1", "x", fd);
  close(fd);
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(up.error().message, "task t-1 is running");
}

}  // namespace
}  // namespace gpupool::api
