// The CLI's configuration: environment variables and the profile file (see config.h).
#include "cli/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "os/files.h"

namespace gpupool::cli {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

const Profile* ConfigFile::Find(std::string_view name) const {
  for (const auto& [n, p] : profiles) {
    if (n == name) return &p;
  }
  return nullptr;
}

void ConfigFile::Set(const std::string& name, Profile profile) {
  for (auto& [n, p] : profiles) {
    if (n == name) {
      p = std::move(profile);
      return;
    }
  }
  profiles.emplace_back(name, std::move(profile));
}

std::vector<std::string> ConfigFile::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, p] : profiles) out.push_back(n);
  return out;
}

Getenv SystemEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

bool ValidProfileName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

Result<std::string> ConfigPath(const Getenv& env) {
  if (auto path = env(kConfigEnv)) return *path;
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && xdg->front() == '/') {
    return *xdg + "/gpupool/config";
  }
  if (auto home = env("HOME")) return *home + "/.config/gpupool/config";
  return MakeError(ErrorCode::kFailedPrecondition,
                   "cannot locate the gpupool config file: HOME is not set (set HOME or " +
                       std::string(kConfigEnv) + ")");
}

Result<ConfigFile> ParseConfig(std::string_view text, const std::string& path) {
  ConfigFile config;
  std::string section;
  std::vector<std::string> seen_keys;
  int line_number = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = Trim(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_number;
    const std::string at = path + ":" + std::to_string(line_number) + ": ";
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') return InvalidArgument(at + "a section must look like [name]");
      section = std::string(Trim(line.substr(1, line.size() - 2)));
      if (!ValidProfileName(section)) {
        return InvalidArgument(at + "profile name '" + section +
                               "' must be 1..64 characters of A-Z a-z 0-9 - _ .");
      }
      if (config.Find(section) != nullptr) {
        return InvalidArgument(at + "profile [" + section + "] appears twice");
      }
      config.profiles.emplace_back(section, Profile{});
      seen_keys.clear();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(at + "expected 'key = value' or '[profile]', got '" +
                             std::string(line) + "'");
    }
    const std::string key(Trim(line.substr(0, eq)));
    const std::string value(Trim(line.substr(eq + 1)));
    if (section.empty()) {
      return InvalidArgument(at + "'" + key + "' is outside a [profile] section");
    }
    if (std::find(seen_keys.begin(), seen_keys.end(), key) != seen_keys.end()) {
      return InvalidArgument(at + "'" + key + "' is given twice in [" + section + "]");
    }
    seen_keys.push_back(key);
    Profile& p = config.profiles.back().second;
    if (key == "endpoint") {
      p.endpoint = value;
    } else if (key == "access_key") {
      p.access_key = value;
    } else if (key == "secret_key") {
      p.secret_key = value;
    } else if (key == "ca_file") {
      p.ca_file = value;
    } else {
      return InvalidArgument(at + "unknown key '" + key +
                             "' (a profile has endpoint, access_key, secret_key and ca_file)");
    }
  }
  return config;
}

std::string RenderConfig(const ConfigFile& config) {
  std::string out =
      "# gpupool CLI profiles, written by `gpupool login`. Keep this file private (mode 0600).\n";
  for (const auto& [name, p] : config.profiles) {
    out += "\n[" + name + "]\n";
    out += "endpoint = " + p.endpoint + "\n";
    out += "access_key = " + p.access_key + "\n";
    out += "secret_key = " + p.secret_key + "\n";
    if (!p.ca_file.empty()) out += "ca_file = " + p.ca_file + "\n";
  }
  return out;
}

Result<std::optional<ConfigFile>> ReadConfig(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return std::optional<ConfigFile>();
    return MakeError(ErrorCode::kFailedPrecondition, "cannot read " + path + ": " + Errno());
  }
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return MakeError(ErrorCode::kFailedPrecondition, "cannot read " + path);
  Result<ConfigFile> parsed = ParseConfig(text, path);
  if (!parsed) return tl::unexpected(parsed.error());
  return std::optional<ConfigFile>(std::move(*parsed));
}

Status WriteConfig(const std::string& path, const ConfigFile& config) {
  return WritePrivateFile(path, RenderConfig(config));
}

Status WritePrivateFile(const std::string& path, std::string_view text) {
  const auto fail = [&](const std::string& what) {
    return MakeError(ErrorCode::kFailedPrecondition, "cannot write " + path + ": " + what);
  };
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) return fail("cannot create " + dir.string() + ": " + ec.message());
      ::chmod(dir.c_str(), 0700);
    }
  }
  return os::WriteFileAtomically(path, text, {.mode = 0600});
}

std::string ProfileName(const Getenv& env, const std::string& profile_flag) {
  if (!profile_flag.empty()) return profile_flag;
  if (auto p = env(kProfileEnv)) return *p;
  return kDefaultProfile;
}

Result<Profile> ResolveProfile(const Getenv& env, const std::string& profile_flag) {
  const std::string name = ProfileName(env, profile_flag);
  const std::string origin = profile_flag.empty() ? " (from " + std::string(kProfileEnv) + ")" : "";
  if (!ValidProfileName(name)) {
    return InvalidArgument("profile name '" + name + "'" + origin +
                           " must be 1..64 characters of A-Z a-z 0-9 - _ .");
  }
  Result<std::string> path = ConfigPath(env);
  std::optional<ConfigFile> file;
  if (path) {
    Result<std::optional<ConfigFile>> read = ReadConfig(*path);
    if (!read) return tl::unexpected(read.error());
    file = std::move(*read);
  } else if (!profile_flag.empty()) {
    return tl::unexpected(path.error());
  }
  const std::string where = path ? *path : std::string("the config file");
  const Profile* stored = file ? file->Find(name) : nullptr;
  const bool named = !profile_flag.empty() || env(kProfileEnv).has_value();
  const auto no_such_profile = [&] {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "profile '" + name + "'" + origin + " is not in " + where + " (profiles: " +
                         JoinNames(file ? file->Names() : std::vector<std::string>{}) +
                         "); create it with `gpupool login --profile " + name + "`");
  };
  if (stored == nullptr && !profile_flag.empty()) return no_such_profile();

  Profile p = stored != nullptr ? *stored : Profile{};
  if (profile_flag.empty()) {
    // A CA belongs to its endpoint: GPUPOOL_CA_FILE goes with GPUPOOL_ENDPOINT (none: the
    // system's store), never with the profile's endpoint; the SDK resolves it the same way.
    if (auto endpoint = env(kEndpointEnv)) {
      p.endpoint = *endpoint;
      p.ca_file = env(kCaFileEnv).value_or("");
    }
    const std::optional<std::string> ak = env(kAccessKeyEnv);
    const std::optional<std::string> sk = env(kSecretKeyEnv);
    if (ak && sk) {
      p.access_key = *ak;
      p.secret_key = *sk;
    } else if (ak || sk) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       std::string(ak ? kAccessKeyEnv : kSecretKeyEnv) + " is set but " +
                           (ak ? kSecretKeyEnv : kAccessKeyEnv) +
                           " is not: set both, or neither to use the profile in " + where);
    }
  }
  std::vector<std::string> missing;
  if (p.endpoint.empty()) missing.push_back("endpoint");
  if (p.access_key.empty()) missing.push_back("access key");
  if (p.secret_key.empty()) missing.push_back("secret key");
  if (missing.empty()) return p;
  if (stored == nullptr && named) return no_such_profile();
  if (stored != nullptr) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "profile '" + name + "' in " + where + " has no " + JoinNames(missing) +
                         "; run `gpupool login --profile " + name + "` again");
  }
  return MakeError(ErrorCode::kFailedPrecondition,
                   "gpupool is not configured (no " + JoinNames(missing) + "): set " +
                       kEndpointEnv + ", " + kAccessKeyEnv + " and " + kSecretKeyEnv +
                       ", or run `gpupool login` to save a profile in " + where +
                       " (a new server writes its admin credentials to "
                       "<data dir>/credentials.env)");
}

}  // namespace gpupool::cli
