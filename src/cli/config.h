// Where the CLI finds its endpoint, keys and CA file: GPUPOOL_ENDPOINT / GPUPOOL_ACCESS_KEY /
// GPUPOOL_SECRET_KEY / GPUPOOL_CA_FILE, or a named profile in ~/.config/gpupool/config (INI
// sections, written by `gpupool login` atomically with mode 0600). The environment is a parameter,
// for tests.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpupool::cli {

inline constexpr const char* kEndpointEnv = "GPUPOOL_ENDPOINT";
inline constexpr const char* kAccessKeyEnv = "GPUPOOL_ACCESS_KEY";
inline constexpr const char* kSecretKeyEnv = "GPUPOOL_SECRET_KEY";
inline constexpr const char* kCaFileEnv = "GPUPOOL_CA_FILE";
inline constexpr const char* kProfileEnv = "GPUPOOL_PROFILE";
inline constexpr const char* kConfigEnv = "GPUPOOL_CONFIG";  // the file's path, for scripts
inline constexpr const char* kDefaultProfile = "default";

struct Profile {
  std::string endpoint;  // "http://host:port" or "https://host:port"
  std::string access_key;
  std::string secret_key;
  std::string ca_file{};  // https: the CA the server is verified against; empty: the system's

  friend bool operator==(const Profile&, const Profile&) = default;
};

// The profiles of a config file, in file order.
struct ConfigFile {
  std::vector<std::pair<std::string, Profile>> profiles;

  const Profile* Find(std::string_view name) const;
  // Replaces the named profile, or appends it.
  void Set(const std::string& name, Profile profile);
  std::vector<std::string> Names() const;
};

// Looks up an environment variable; nullopt when unset (an empty value counts as unset).
using Getenv = std::function<std::optional<std::string>(const std::string&)>;
Getenv SystemEnv();

// $GPUPOOL_CONFIG, else $XDG_CONFIG_HOME/gpupool/config, else $HOME/.config/gpupool/config.
Result<std::string> ConfigPath(const Getenv& env);

// INI text: "[name]" sections with endpoint, access_key, secret_key and (optional) ca_file; '#'
// and ';' comments.
// Errors name the file (`path`) and line.
Result<ConfigFile> ParseConfig(std::string_view text, const std::string& path);
std::string RenderConfig(const ConfigFile& config);

// Reads `path`; nullopt when the file does not exist.
Result<std::optional<ConfigFile>> ReadConfig(const std::string& path);
// Writes `path` with mode 0600, atomically and durably (os::WriteFileAtomically); creates
// missing parent directories with mode 0700.
Status WriteConfig(const std::string& path, const ConfigFile& config);
// The same for any of the CLI's own files beside the config (known_hosts: gpupool ssh-config).
Status WritePrivateFile(const std::string& path, std::string_view text);

// The credentials a command uses. The profile is `profile_flag`, else $GPUPOOL_PROFILE, else
// "default". Values come from that profile in the config file; GPUPOOL_ENDPOINT (with
// GPUPOOL_CA_FILE, the CA that goes with it) and the key pair GPUPOOL_ACCESS_KEY +
// GPUPOOL_SECRET_KEY override it, except when --profile was given (`profile_flag` not empty),
// which makes the profile authoritative. A missing configuration is an error that says how to
// set one.
Result<Profile> ResolveProfile(const Getenv& env, const std::string& profile_flag);

// The profile name `login` writes: `profile_flag`, else $GPUPOOL_PROFILE, else "default".
std::string ProfileName(const Getenv& env, const std::string& profile_flag);

// Whether `name` may name a profile: 1..64 of A-Z a-z 0-9 - _ .
bool ValidProfileName(std::string_view name);

}  // namespace gpupool::cli
