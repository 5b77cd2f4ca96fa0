// The archive of a saved container: from a `docker save` archive built here as Docker 20.10
// writes one, only the layers the base lacks are kept (a layer linked to a kept one too), the
// configuration is the base's and its digest the id, the tags and legacy files are gone; an
// archive lacking a layer its manifest lists is refused.
#include "agent/runtime/image_archive.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <map>
#include <string>

#include "core/tar.h"
#include "os/sha256.h"

namespace gpupool::agent::docker {
namespace {

using nlohmann::json;

struct Saved {
  std::string base_layer = std::string(3000, 'b');
  std::string top_layer = "the container's changes";
  std::string tar;
};

std::string Entry(const std::string& name, const std::string& data, char type = '0',
                  const std::string& link = "") {
  TarEntry e{name, type, 0644, static_cast<int64_t>(data.size()), 0, link};
  return *TarHeader(e) + data + std::string(TarPadding(e.size), '\0');
}

const json kCommitted = {
    {"architecture", "amd64"},
    {"config", {{"Env", {"GPUPOOL_TASK_TOKEN=secret", "PATH=/bin"}}, {"Cmd", {"task"}}}},
    {"container", "abc"},
    {"container_config", {{"Env", {"GPUPOOL_TASK_TOKEN=secret"}}}},
    {"history", {{{"created_by", "COPY rootfs /"}}, {{"created_by", "sh -c task"}}}},
    {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:x", "sha256:y"}}}}};

// Lexical order, as Docker 20.10 tars its save directory; `link_dup`: a third layer that is the
// top one again, saved as a link to it.
Saved DockerSave(bool link_dup = false, bool drop_top = false) {
  Saved s;
  const std::string config_name = std::string(64, 'c') + ".json";
  const std::string a(64, 'a'), d(64, 'd'), e(64, 'e');
  json layers = {a + "/layer.tar", d + "/layer.tar"};
  if (link_dup) layers.push_back(e + "/layer.tar");
  const json manifest =
      json::array({{{"Config", config_name}, {"RepoTags", {"snap:1"}}, {"Layers", layers}}});
  s.tar += Entry(a + "/", "", '5') + Entry(a + "/VERSION", "1.0") +
           Entry(a + "/json", kCommitted.dump()) + Entry(a + "/layer.tar", s.base_layer);
  s.tar += Entry(config_name, kCommitted.dump());
  s.tar += Entry(d + "/", "", '5') + Entry(d + "/json", kCommitted.dump());
  if (!drop_top) s.tar += Entry(d + "/layer.tar", s.top_layer);
  if (link_dup) s.tar += Entry(e + "/layer.tar", "", '2', "../" + d + "/layer.tar");
  s.tar += Entry("manifest.json", manifest.dump()) + Entry("repositories", "{\"snap\":{}}");
  s.tar += TarEnd();
  return s;
}

// The entries of an archive: name -> data.
std::map<std::string, std::string> Entries(const std::string& tar,
                                           std::map<std::string, char>* types) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at + kTarBlock <= tar.size()) {
    auto e = ParseTarHeader(std::string_view(tar).substr(at, kTarBlock));
    EXPECT_TRUE(e);
    if (!e || !e->has_value()) break;
    at += kTarBlock;
    out[(*e)->name] = tar.substr(at, static_cast<size_t>((*e)->size));
    if (types) (*types)[(*e)->name] = (*e)->type;
    at += static_cast<size_t>((*e)->size) + TarPadding((*e)->size);
  }
  return out;
}

class ImageArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = tmpfile();
    ASSERT_NE(file_, nullptr);
  }
  void TearDown() override { fclose(file_); }

  Result<LoadArchive> Write(const std::string& saved, const std::set<std::string>& base) {
    size_t at = 0;
    auto read = [&](char* into, size_t n) -> Result<size_t> {
      n = std::min(n, std::min<size_t>(700, saved.size() - at));  // in odd pieces
      std::copy_n(saved.data() + at, n, into);
      at += n;
      return n;
    };
    const json base_config = {{"Env", {"PATH=/bin"}}, {"Cmd", {"/bin/sh"}}};
    return WriteLoadArchive(
        read, base,
        [&](std::string_view c) {
          return ImageConfigFor(c, base_config, "gpupool snapshot of t-1");
        },
        fileno(file_));
  }
  std::string Written() {
    std::string out;
    char buffer[4096];
    ssize_t n;
    off_t at = 0;
    while ((n = pread(fileno(file_), buffer, sizeof buffer, at)) > 0) {
      out.append(buffer, static_cast<size_t>(n));
      at += n;
    }
    return out;
  }

  FILE* file_ = nullptr;
};

TEST_F(ImageArchiveTest, KeepsOnlyTheLayersTheBaseLacksWithTheBasesConfiguration) {
  const Saved s = DockerSave();
  auto archive = Write(s.tar, {"sha256:" + os::Sha256Hex(s.base_layer)});
  ASSERT_TRUE(archive) << archive.error().message;
  const std::string out = Written();
  EXPECT_EQ(archive->bytes, static_cast<int64_t>(out.size()));
  const auto entries = Entries(out, nullptr);
  ASSERT_EQ(entries.size(), 3u);  // the top layer, the configuration, manifest.json
  EXPECT_EQ(entries.at(std::string(64, 'd') + "/layer.tar"), s.top_layer);
  const std::string hex = archive->id.substr(7);
  ASSERT_TRUE(entries.contains(hex + ".json"));
  const std::string config_text = entries.at(hex + ".json");
  EXPECT_EQ(os::Sha256Hex(config_text), hex) << "the id is the configuration's digest";
  EXPECT_EQ(config_text.find("GPUPOOL_TASK_TOKEN"), std::string::npos);
  const json config = json::parse(config_text);
  EXPECT_EQ(config["config"]["Cmd"], json({"/bin/sh"}));
  EXPECT_FALSE(config.contains("container_config"));
  EXPECT_EQ(config["history"].back()["created_by"], "gpupool snapshot of t-1");
  EXPECT_EQ(config["rootfs"], kCommitted["rootfs"]);
  const json manifest = json::parse(entries.at("manifest.json"));
  EXPECT_EQ(manifest[0]["Config"], hex + ".json");
  EXPECT_TRUE(manifest[0]["RepoTags"].is_null());
  EXPECT_EQ(manifest[0]["Layers"].size(), 2u)
      << "every layer listed: the base's are loaded already";
}

TEST_F(ImageArchiveTest, ALayerLinkedToAKeptOneIsKeptAsALink) {
  const Saved s = DockerSave(/*link_dup=*/true);
  auto archive = Write(s.tar, {"sha256:" + os::Sha256Hex(s.base_layer)});
  ASSERT_TRUE(archive) << archive.error().message;
  std::map<std::string, char> types;
  const auto entries = Entries(Written(), &types);
  EXPECT_EQ(types.at(std::string(64, 'e') + "/layer.tar"), '2');
  EXPECT_EQ(entries.size(), 4u);
}

TEST_F(ImageArchiveTest, WithoutABaseEveryLayerIsKept) {
  const Saved s = DockerSave();
  auto archive = Write(s.tar, {});
  ASSERT_TRUE(archive) << archive.error().message;
  EXPECT_EQ(Entries(Written(), nullptr).size(), 4u);
}

TEST_F(ImageArchiveTest, AnArchiveLackingALayerItListsIsRefused) {
  auto archive = Write(DockerSave(false, /*drop_top=*/true).tar, {});
  ASSERT_FALSE(archive);
  EXPECT_NE(archive.error().message.find("lacks the layer"), std::string::npos)
      << archive.error().message;
  auto truncated = Write(DockerSave().tar.substr(0, 1500), {});
  ASSERT_FALSE(truncated);
}

}  // namespace
}  // namespace gpupool::agent::docker
