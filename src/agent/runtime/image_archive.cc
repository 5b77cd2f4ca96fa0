#include "agent/runtime/image_archive.h"

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "core/tar.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::agent::docker {
namespace {

using nlohmann::json;

constexpr size_t kSmallEntry = 4 << 20;  // manifest.json and the configuration, read whole
constexpr size_t kCopyBytes = 1 << 20;

tl::unexpected<Error> Malformed(const std::string& what) {
  return MakeError(ErrorCode::kInternal, "the saved image's archive: " + what);
}

// Reads exactly what is asked of `read`, or fails (a short archive).
class Input {
 public:
  explicit Input(const std::function<Result<size_t>(char*, size_t)>& read) : read_(read) {}
  // false at the end of the stream before any byte of it.
  Result<bool> Exact(char* into, size_t n) {
    size_t got = 0;
    while (got < n) {
      Result<size_t> r = read_(into + got, n - got);
      if (!r) return tl::unexpected(r.error());
      if (*r == 0) {
        if (got == 0) return false;
        return Malformed("it ends inside an entry");
      }
      got += *r;
    }
    return true;
  }
  // Passes `n` bytes to `sink` (nullptr: dropped) in pieces.
  Status Copy(int64_t n, const std::function<Status(std::string_view)>& sink) {
    std::string buffer(static_cast<size_t>(std::min<int64_t>(n, kCopyBytes)), '\0');
    while (n > 0) {
      const size_t piece = static_cast<size_t>(std::min<int64_t>(n, kCopyBytes));
      Result<bool> ok = Exact(buffer.data(), piece);
      if (!ok) return tl::unexpected(ok.error());
      if (!*ok) return Malformed("it ends inside an entry");
      if (sink) {
        if (Status s = sink(std::string_view(buffer.data(), piece)); !s) return s;
      }
      n -= static_cast<int64_t>(piece);
    }
    return {};
  }
  Result<std::string> Whole(int64_t n) {
    std::string out;
    if (Status s = Copy(n,
                        [&](std::string_view piece) -> Status {
                          out.append(piece);
                          return {};
                        });
        !s) {
      return tl::unexpected(s.error());
    }
    return out;
  }

 private:
  const std::function<Result<size_t>(char*, size_t)>& read_;
};

// Appends to the output file, which can be cut back to an earlier length.
class Output {
 public:
  explicit Output(int fd) : fd_(fd) {}
  Status Write(std::string_view data) {
    if (int err = os::WriteAll(fd_, data, at_); err != 0) {
      return MakeError(ErrorCode::kInternal,
                       "cannot write the image's archive: " + std::string(std::strerror(err)));
    }
    at_ += static_cast<int64_t>(data.size());
    return {};
  }
  Status Entry(const TarEntry& e, std::string_view data) {
    Result<std::string> header = TarHeader(e);
    if (!header) return tl::unexpected(header.error());
    if (Status s = Write(*header); !s) return s;
    if (Status s = Write(data); !s) return s;
    return Write(std::string(TarPadding(e.size), '\0'));
  }
  Status CutTo(int64_t length) {
    if (::ftruncate(fd_, length) != 0) {
      return MakeError(ErrorCode::kInternal,
                       "cannot write the image's archive: " + std::string(std::strerror(errno)));
    }
    at_ = length;
    return {};
  }
  int64_t at() const { return at_; }

 private:
  int fd_;
  int64_t at_ = 0;
};

bool IsTopLevelConfig(const std::string& name) {
  constexpr size_t kHex = 64;
  return name.size() == kHex + 5 && name.ends_with(".json") && name.find('/') == std::string::npos;
}

// A symbolic link's target from the directory of `name`, as a name in the archive
// ("a/layer.tar" -> "../b/layer.tar" is "b/layer.tar").
std::string Resolve(const std::string& name, const std::string& link) {
  std::string dir = name.substr(0, name.rfind('/') == std::string::npos ? 0 : name.rfind('/'));
  std::string_view rest = link;
  while (rest.starts_with("../")) {
    rest.remove_prefix(3);
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "" : dir.substr(0, slash);
  }
  return dir.empty() ? std::string(rest) : dir + "/" + std::string(rest);
}

}  // namespace

Result<std::string> ImageConfigFor(std::string_view committed, const json& base_config,
                                   const std::string& created_by) {
  json j = json::parse(committed, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("rootfs")) {
    return Malformed("its configuration is not an image configuration");
  }
  j["config"] = base_config.is_object() ? base_config : json::object();
  j.erase("container");
  j.erase("container_config");
  if (auto h = j.find("history"); h != j.end() && h->is_array() && !h->empty()) {
    h->back()["created_by"] = created_by;
  }
  return j.dump();
}

Result<LoadArchive> WriteLoadArchive(
    const std::function<Result<size_t>(char* into, size_t n)>& read,
    const std::set<std::string>& base_layers,
    const std::function<Result<std::string>(std::string_view saved)>& config, int out) {
  Input in(read);
  Output o(out);
  std::optional<std::string> manifest_text;
  std::string config_name, config_text;
  std::map<std::string, bool> layers;  // layer file -> kept (false: the base has it)
  std::optional<TarEntry> pax;         // a PAX header's fields, for the next entry
  std::string block(kTarBlock, '\0');
  while (true) {
    Result<bool> more = in.Exact(block.data(), kTarBlock);
    if (!more) return tl::unexpected(more.error());
    if (!*more) break;
    Result<std::optional<TarEntry>> parsed = ParseTarHeader(block);
    if (!parsed) return Malformed(parsed.error().message);
    if (!parsed->has_value()) break;  // the end blocks
    TarEntry e = std::move(**parsed);
    const int64_t padded = e.size + static_cast<int64_t>(TarPadding(e.size));
    if (e.type == 'x' || e.type == 'g') {
      Result<std::string> data = in.Whole(padded);
      if (!data) return tl::unexpected(data.error());
      if (e.type == 'x') {
        TarEntry next;
        next.size = -1;
        if (Status s = ApplyPaxRecords(std::string_view(*data).substr(0, e.size), next); !s) {
          return Malformed(s.error().message);
        }
        pax = std::move(next);
      }
      continue;
    }
    if (pax) {
      if (!pax->name.empty()) e.name = pax->name;
      if (pax->size >= 0) e.size = pax->size;
      pax.reset();
    }
    while (e.name.starts_with("./")) e.name.erase(0, 2);
    const int64_t data_padded = e.size + static_cast<int64_t>(TarPadding(e.size));
    const bool regular = e.type == '0' || e.type == '7';
    if (regular && (e.name == "manifest.json" || IsTopLevelConfig(e.name))) {
      if (e.size > static_cast<int64_t>(kSmallEntry)) return Malformed(e.name + " is too large");
      Result<std::string> data = in.Whole(data_padded);
      if (!data) return tl::unexpected(data.error());
      data->resize(static_cast<size_t>(e.size));
      if (e.name == "manifest.json") {
        manifest_text = std::move(*data);
      } else {
        config_name = e.name;
        config_text = std::move(*data);
      }
      continue;
    }
    if (e.name.ends_with("/layer.tar") && e.type == '2') {  // the same layer as another
      const auto target = layers.find(Resolve(e.name, e.link));
      if (target == layers.end()) return Malformed(e.name + " links to a layer not seen before");
      layers[e.name] = target->second;
      if (target->second) {
        if (Status s = o.Entry(e, ""); !s) return tl::unexpected(s.error());
      }
      if (Status s = in.Copy(data_padded, nullptr); !s) return tl::unexpected(s.error());
      continue;
    }
    if (!regular || !e.name.ends_with("/layer.tar")) {  // directories, legacy json, VERSION, …
      if (Status s = in.Copy(data_padded, nullptr); !s) return tl::unexpected(s.error());
      continue;
    }
    // A layer: written while hashed, and cut off again when the base has it.
    const int64_t start = o.at();
    Result<std::string> header = TarHeader(e);
    if (!header) return tl::unexpected(header.error());
    if (Status s = o.Write(*header); !s) return tl::unexpected(s.error());
    os::Sha256 sha;
    if (Status s = in.Copy(e.size,
                           [&](std::string_view piece) {
                             sha.Update(piece);
                             return o.Write(piece);
                           });
        !s) {
      return tl::unexpected(s.error());
    }
    if (Status s = in.Copy(data_padded - e.size, nullptr); !s) return tl::unexpected(s.error());
    const bool kept = !base_layers.contains("sha256:" + sha.HexDigest());
    layers[e.name] = kept;
    if (Status s = kept ? o.Write(std::string(TarPadding(e.size), '\0')) : o.CutTo(start); !s) {
      return tl::unexpected(s.error());
    }
  }
  if (!manifest_text) return Malformed("it has no manifest.json");
  json manifest = json::parse(*manifest_text, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_array() || manifest.size() != 1 || !manifest[0].is_object()) {
    return Malformed("its manifest.json does not describe one image");
  }
  json& image = manifest[0];
  if (image.value("Config", "") != config_name || config_name.empty()) {
    return Malformed("its manifest.json names a configuration it does not hold");
  }
  if (!image.contains("Layers") || !image["Layers"].is_array()) {
    return Malformed("its manifest.json lists no layers");
  }
  for (const json& layer : image["Layers"]) {
    if (!layer.is_string() || !layers.contains(layer.get<std::string>())) {
      return Malformed("it lacks the layer " + layer.dump() + " its manifest.json lists");
    }
  }
  Result<std::string> made = config(config_text);
  if (!made) return tl::unexpected(made.error());
  const std::string hex = os::Sha256Hex(*made);
  image["Config"] = hex + ".json";
  image["RepoTags"] = nullptr;
  const std::string manifest_out = manifest.dump();
  if (Status s = o.Entry(
          TarEntry{hex + ".json", '0', 0644, static_cast<int64_t>(made->size()), 0, ""}, *made);
      !s) {
    return tl::unexpected(s.error());
  }
  if (Status s = o.Entry(
          TarEntry{"manifest.json", '0', 0644, static_cast<int64_t>(manifest_out.size()), 0, ""},
          manifest_out);
      !s) {
    return tl::unexpected(s.error());
  }
  if (Status s = o.Write(TarEnd()); !s) return tl::unexpected(s.error());
  return LoadArchive{"sha256:" + hex, o.at()};
}

}  // namespace gpupool::agent::docker
