// A running task's files end to end: a real `gpupool up` (server and agent in one process, the
// agent's tunnel over loopback) and the real CLI. `gpupool cp` puts a file into a running task's
// workspace (the task reads it at once, as its own) and takes out what it wrote, verified by
// SHA-256, several chunks long; `gpupool ls-files` lists the workspace; an upload resumes and a
// wrong hash is refused; links the task made are never followed; another project's user and an
// anonymous client are refused; once the task ends, what was put in was saved with its
// outputs; and `gpupool sync` sends only the files that differ, either way.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/client.h"
#include "os/sha256.h"
#include "tests/up_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::Eventually;

class LiveFilesTest : public testing::UpTest {
 protected:
  // A task that runs `setup` in its workspace, then waits; once its files are there.
  std::string Running(const std::string& setup = "true") {
    const json task =
        Call("POST", "/v1/tasks",
             {{"command", {"/bin/sh", "-c", setup + "; echo ok > ready; exec sleep 600"}}});
    const std::string id = task["id"];
    EXPECT_TRUE(Eventually(
        [&] {
          return Cli({"ls-files", id, "ready"}).exit_code == 0;
        },
        std::chrono::seconds(30)))
        << id << " runs and wrote its files";
    return id;
  }
  CliRun Exec(const std::string& id, const std::string& script) {
    return Cli({"exec", id, "--", "/bin/sh", "-c", script});
  }
  static std::string ReadLocal(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The raw API's answer (any status).
  api::ClientResponse Raw(const std::string& method, const std::string& target,
                          const std::string& body = "") {
    auto r = client_->Call(method, target, body);
    EXPECT_TRUE(r) << method << " " << target << ": " << r.error().message;
    return r ? *r : api::ClientResponse{};
  }
  static std::string Message(const api::ClientResponse& r) {
    return json::parse(r.body, nullptr, false).value("/error/message"_json_pointer, "");
  }
};

TEST_F(LiveFilesTest, SyncSendsOnlyTheFilesThatDifferEitherWay) {
  const std::string id = Running();
  const std::string local = dir_ + "/sync";
  std::filesystem::create_directories(local + "/sub");
  std::ofstream(local + "/a.txt") << "alpha\n";
  std::ofstream(local + "/sub/b.txt") << "beta\n";
  CliRun r = Cli({"sync", local, id + ":data"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "sent 2 file(s) (11 B) to " + id + ":data; 0 unchanged\n");
  r = Cli({"sync", local, id + ":data"});
  EXPECT_EQ(r.out, "sent 0 file(s) (0 B) to " + id + ":data; 2 unchanged\n") << r;
  // The same size, other bytes: found by their SHA-256.
  std::ofstream(local + "/a.txt") << "ALPHA\n";
  std::ofstream(local + "/sub/c.txt") << "gamma\n";
  r = Cli({"sync", "--dry-run", local, id + ":data"});
  EXPECT_NE(r.out.find("2 of 3 file(s) differ"), std::string::npos) << r;
  r = Cli({"sync", local, id + ":data"});
  EXPECT_EQ(r.out, "sent 2 file(s) (12 B) to " + id + ":data; 1 unchanged\n") << r;
  EXPECT_EQ(Exec(id, "cat data/a.txt data/sub/c.txt").out, "ALPHA\ngamma\n");

  // Back: the task changes one file; only it is fetched.
  const std::string back = dir_ + "/back";
  r = Cli({"sync", id + ":data", back});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "fetched 3 file(s) (17 B) to " + back + "; 0 unchanged\n");
  ASSERT_EQ(Exec(id, "echo changed > data/sub/b.txt").exit_code, 0);
  r = Cli({"sync", id + ":data", back});
  EXPECT_EQ(r.out, "fetched 1 file(s) (8 B) to " + back + "; 2 unchanged\n") << r;
  EXPECT_EQ(ReadLocal(back + "/sub/b.txt"), "changed\n");
  // A file is not a directory to sync.
  r = Cli({"sync", local + "/a.txt", id + ":data"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r;
}

TEST_F(LiveFilesTest, CopiesIntoARunningTaskAndOutOfItAsTheTaskSeesIt) {
  const std::string id = Running();
  std::ofstream(dir_ + "/in.txt") << "hello\n";
  CliRun r = Cli({"cp", dir_ + "/in.txt", id + ":data/in.txt"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("uploaded 1 file(s)"), std::string::npos) << r;
  // The task reads it at once, as its own file.
  r = Exec(id, "cat data/in.txt; [ \"$(stat -c %u data/in.txt)\" = \"$(id -u)\" ] && echo own");
  EXPECT_EQ(r.out, "hello\nown\n") << r;

  // What the task writes comes out while it runs: 10 MB, several chunks, verified.
  r = Exec(id,
           "mkdir out && head -c 10000000 /dev/urandom > out/big.bin && "
           "sha256sum out/big.bin | cut -d' ' -f1");
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string sha = r.out.substr(0, 64);
  r = Cli({"cp", id + ":out", dir_ + "/got"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string got = ReadLocal(dir_ + "/got/big.bin");
  EXPECT_EQ(got.size(), 10'000'000u);
  EXPECT_EQ(os::Sha256Hex(got), sha);

  r = Cli({"ls-files", id});
  ASSERT_EQ(r.exit_code, 0) << r;
  for (const std::string path : {"data/in.txt", "out/big.bin", "ready"}) {
    EXPECT_NE(r.out.find(path), std::string::npos) << path << " in\n" << r.out;
  }
  r = Cli({"ls-files", "--json", id, "/root/out"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const json listing = json::parse(r.out);
  EXPECT_EQ(listing["type"], "dir");
  ASSERT_EQ(listing["files"].size(), 1u);
  EXPECT_EQ(listing["files"][0]["sha256"], sha);

  // Once it ends, what was put in is kept with its outputs: the node saves them after the stop.
  Call("POST", "/v1/tasks/" + id + "/stop");
  ASSERT_TRUE(Eventually([&] { return Call("GET", "/v1/tasks/" + id)["state"] == "stopped"; },
                         std::chrono::seconds(30)));
  ASSERT_TRUE(Eventually(
      [&] {
        return Cli({"cp", id + ":data/in.txt", dir_ + "/after.txt"}).exit_code == 0;
      },
      std::chrono::seconds(30)))
      << "the outputs of the stopped task reach the server";
  EXPECT_EQ(ReadLocal(dir_ + "/after.txt"), "hello\n");
}

TEST_F(LiveFilesTest, AnUploadResumesAndAWrongHashIsRefused) {
  const std::string id = Running();
  const std::string uploads = "/v1/tasks/" + id + "/uploads";
  ASSERT_EQ(Raw("PUT", uploads + "?path=part.bin&offset=0&size=6", "abc").status, 200);
  EXPECT_EQ(json::parse(Raw("GET", uploads + "?path=part.bin").body)["received"], 3);
  api::ClientResponse r = Raw("PUT", uploads + "?path=part.bin&offset=1&size=6", "xyz");
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(Message(r).find("continue with offset=3"), std::string::npos) << r.body;
  ASSERT_EQ(Raw("PUT", uploads + "?path=part.bin&offset=3&size=6", "def").status, 200);
  r = Raw("POST", uploads + "/commit",
          json{{"path", "part.bin"}, {"size", 6}, {"sha256", os::Sha256Hex("abcdeX")}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Message(r).find("the upload was discarded"), std::string::npos) << r.body;
  EXPECT_EQ(Exec(id, "test -e part.bin || echo absent").out, "absent\n");
  ASSERT_EQ(Raw("PUT", uploads + "?path=part.bin&offset=0&size=6", "abcdef").status, 200);
  r = Raw("POST", uploads + "/commit",
          json{{"path", "part.bin"}, {"size", 6}, {"sha256", os::Sha256Hex("abcdef")}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Exec(id, "cat part.bin").out, "abcdef");
}

TEST_F(LiveFilesTest, LinksTheTaskMadeAreNotFollowed) {
  const std::string target = dir_ + "/target";
  std::filesystem::create_directories(target);
  std::filesystem::permissions(target, std::filesystem::perms::all);
  std::ofstream(target + "/secret") << "the host's";
  const std::string id =
      Running("ln -s " + target + " dir-link; ln -s " + target + "/secret file-link");
  api::ClientResponse r = Raw("GET", "/v1/tasks/" + id + "/files/content?path=file-link");
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(Message(r).find("is a symbolic link; links are not followed"), std::string::npos)
      << r.body;
  r = Raw("GET", "/v1/tasks/" + id + "/files?path=dir-link%2Fsecret");
  EXPECT_EQ(r.status, 409) << r.body;
  std::ofstream(dir_ + "/x") << "planted";
  const CliRun cp = Cli({"cp", dir_ + "/x", id + ":dir-link/planted"});
  EXPECT_NE(cp.exit_code, 0) << cp;
  EXPECT_NE(cp.err.find("'dir-link' in the workspace of task " + id + " is a symbolic link"),
            std::string::npos)
      << cp;
  EXPECT_FALSE(std::filesystem::exists(target + "/planted"));
  const CliRun ls = Cli({"ls-files", id});
  EXPECT_EQ(ls.out.find("link"), std::string::npos) << "links are not listed:\n" << ls.out;
}

TEST_F(LiveFilesTest, RefusesAnonymousClientsAndOtherProjectsUsers) {
  const std::string id = Running();
  const testing::Credentials other = OtherProjectsMember();
  api::Client mallory(admin_.endpoint, other.access_key, other.secret_key);
  auto r = mallory.Call("GET", "/v1/tasks/" + id + "/files");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = mallory.Call("PUT", "/v1/tasks/" + id + "/uploads?path=x&offset=0", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  api::Client anonymous(admin_.endpoint, "", "");
  r = anonymous.Call("GET", "/v1/tasks/" + id + "/files");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
}

}  // namespace
}  // namespace gpupool
