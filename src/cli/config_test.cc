// Unit tests of the CLI configuration: profile file parsing and writing (0600, atomic), and
// resolution of environment variables against profiles (config.h).
#include "cli/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace gpupool::cli {
namespace {

namespace fs = std::filesystem;

Getenv FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

std::string TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "gpupool-config-test-XXXXXX").string();
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

void WriteText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

constexpr const char* kTwoProfiles =
    "# comment\n"
    "[default]\n"
    "endpoint = http://file:1\n"
    "access_key = AKFILE\n"
    "secret_key = SKFILE\n"
    "\n"
    "; another comment\n"
    "[prod]\n"
    "endpoint=http://prod:2\n"
    "access_key=AKPROD\n"
    "secret_key=SKPROD\n";

TEST(ParseConfigTest, ReadsProfilesInOrder) {
  Result<ConfigFile> config = ParseConfig(kTwoProfiles, "cfg");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->Names(), (std::vector<std::string>{"default", "prod"}));
  EXPECT_EQ(*config->Find("prod"), (Profile{"http://prod:2", "AKPROD", "SKPROD"}));
  EXPECT_EQ(config->Find("nope"), nullptr);
}

TEST(ParseConfigTest, ErrorsNameFileAndLine) {
  const struct {
    const char* text;
    const char* expected;
  } cases[] = {
      {"endpoint = x\n", "cfg:1: 'endpoint' is outside a [profile] section"},
      {"[a]\nacess_key = x\n", "cfg:2: unknown key 'acess_key'"},
      {"[a]\n[a]\n", "cfg:2: profile [a] appears twice"},
      {"[a]\njust words\n", "cfg:2: expected 'key = value'"},
      {"[a b]\n", "cfg:1: profile name 'a b'"},
      {"[a\n", "cfg:1: a section must look like [name]"},
      {"[a]\nendpoint = x\nendpoint = y\n", "cfg:3: 'endpoint' is given twice in [a]"},
  };
  for (const auto& c : cases) {
    Result<ConfigFile> config = ParseConfig(c.text, "cfg");
    ASSERT_FALSE(config) << c.text;
    EXPECT_EQ(config.error().message.rfind(c.expected, 0), 0u) << config.error().message;
  }
}

TEST(ParseConfigTest, RenderRoundTrips) {
  ConfigFile config;
  config.Set("default", {"http://a:1", "AK1", "SK1"});
  config.Set("b", {"http://b:2", "AK2", "SK2"});
  config.Set("default", {"http://a:3", "AK3", "SK3"});  // replaces in place
  Result<ConfigFile> parsed = ParseConfig(RenderConfig(config), "cfg");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->profiles, config.profiles);
  EXPECT_EQ(parsed->Names(), (std::vector<std::string>{"default", "b"}));
}

TEST(ConfigPathTest, Precedence) {
  EXPECT_EQ(*ConfigPath(FakeEnv({{"GPUPOOL_CONFIG", "/x/cfg"}, {"HOME", "/h"}})), "/x/cfg");
  EXPECT_EQ(*ConfigPath(FakeEnv({{"XDG_CONFIG_HOME", "/xdg"}, {"HOME", "/h"}})),
            "/xdg/gpupool/config");
  EXPECT_EQ(*ConfigPath(FakeEnv({{"XDG_CONFIG_HOME", "relative"}, {"HOME", "/h"}})),
            "/h/.config/gpupool/config");
  EXPECT_EQ(*ConfigPath(FakeEnv({{"HOME", "/h"}})), "/h/.config/gpupool/config");
  Result<std::string> none = ConfigPath(FakeEnv({}));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("HOME"), std::string::npos);
}

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = TempDir();
    path_ = home_ + "/.config/gpupool/config";
  }
  void TearDown() override { fs::remove_all(home_); }

  Getenv Env(std::map<std::string, std::string> vars) {
    vars["HOME"] = home_;
    return FakeEnv(std::move(vars));
  }

  std::string home_;
  std::string path_;
};

TEST_F(ResolveTest, EnvironmentAloneIsEnough) {
  Result<Profile> p = ResolveProfile(Env({{"GPUPOOL_ENDPOINT", "http://env:9"},
                                          {"GPUPOOL_ACCESS_KEY", "AKENV"},
                                          {"GPUPOOL_SECRET_KEY", "SKENV"}}),
                                     "");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, (Profile{"http://env:9", "AKENV", "SKENV"}));
}

TEST_F(ResolveTest, DefaultProfileFromTheFile) {
  WriteText(path_, kTwoProfiles);
  Result<Profile> p = ResolveProfile(Env({}), "");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, (Profile{"http://file:1", "AKFILE", "SKFILE"}));
}

TEST_F(ResolveTest, EnvironmentOverridesTheProfile) {
  WriteText(path_, kTwoProfiles);
  Result<Profile> endpoint_only = ResolveProfile(Env({{"GPUPOOL_ENDPOINT", "http://env:9"}}), "");
  ASSERT_TRUE(endpoint_only);
  EXPECT_EQ(*endpoint_only, (Profile{"http://env:9", "AKFILE", "SKFILE"}));
  Result<Profile> keys =
      ResolveProfile(Env({{"GPUPOOL_ACCESS_KEY", "AKENV"}, {"GPUPOOL_SECRET_KEY", "SKENV"}}), "");
  ASSERT_TRUE(keys);
  EXPECT_EQ(*keys, (Profile{"http://file:1", "AKENV", "SKENV"}));
}

TEST_F(ResolveTest, TheCaFileGoesWithItsEndpoint) {
  WriteText(path_,
            "[default]\nendpoint = https://file:1\naccess_key = AK\nsecret_key = SK\n"
            "ca_file = /etc/file-ca.pem\n");
  Result<Profile> p = ResolveProfile(Env({}), "");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->ca_file, "/etc/file-ca.pem");
  // GPUPOOL_CA_FILE alone does not re-point the profile's endpoint at another CA...
  p = ResolveProfile(Env({{"GPUPOOL_CA_FILE", "/tmp/env-ca.pem"}}), "");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ca_file, "/etc/file-ca.pem");
  // ...and an endpoint from the environment never uses the profile's CA.
  p = ResolveProfile(Env({{"GPUPOOL_ENDPOINT", "https://env:9"}}), "");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->endpoint, "https://env:9");
  EXPECT_EQ(p->ca_file, "");
  p = ResolveProfile(
      Env({{"GPUPOOL_ENDPOINT", "https://env:9"}, {"GPUPOOL_CA_FILE", "/tmp/env-ca.pem"}}), "");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ca_file, "/tmp/env-ca.pem");
}

TEST_F(ResolveTest, GpupoolProfileSelectsAndEnvironmentStillOverrides) {
  WriteText(path_, kTwoProfiles);
  Result<Profile> p = ResolveProfile(Env({{"GPUPOOL_PROFILE", "prod"}}), "");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (Profile{"http://prod:2", "AKPROD", "SKPROD"}));
  p = ResolveProfile(Env({{"GPUPOOL_PROFILE", "prod"}, {"GPUPOOL_ENDPOINT", "http://env:9"}}), "");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->endpoint, "http://env:9");
}

TEST_F(ResolveTest, ProfileFlagIsAuthoritative) {
  WriteText(path_, kTwoProfiles);
  Result<Profile> p = ResolveProfile(Env({{"GPUPOOL_ENDPOINT", "http://env:9"},
                                          {"GPUPOOL_ACCESS_KEY", "AKENV"},
                                          {"GPUPOOL_SECRET_KEY", "SKENV"}}),
                                     "prod");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, (Profile{"http://prod:2", "AKPROD", "SKPROD"}));
}

TEST_F(ResolveTest, UnknownProfileListsTheKnownOnes) {
  WriteText(path_, kTwoProfiles);
  Result<Profile> p = ResolveProfile(Env({}), "staging");
  ASSERT_FALSE(p);
  const std::string& m = p.error().message;
  EXPECT_NE(m.find("profile 'staging' is not in " + path_), std::string::npos) << m;
  EXPECT_NE(m.find("default, prod"), std::string::npos) << m;
  EXPECT_NE(m.find("gpupool login --profile staging"), std::string::npos) << m;
  p = ResolveProfile(Env({{"GPUPOOL_PROFILE", "staging"}}), "");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("from GPUPOOL_PROFILE"), std::string::npos);
}

TEST_F(ResolveTest, HalfAKeyPairIsAnError) {
  Result<Profile> p = ResolveProfile(
      Env({{"GPUPOOL_ENDPOINT", "http://env:9"}, {"GPUPOOL_ACCESS_KEY", "AKENV"}}), "");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("GPUPOOL_ACCESS_KEY is set but GPUPOOL_SECRET_KEY is not"),
            std::string::npos)
      << p.error().message;
}

TEST_F(ResolveTest, MissingConfigurationSaysHowToSetIt) {
  Result<Profile> p = ResolveProfile(Env({}), "");
  ASSERT_FALSE(p);
  const std::string& m = p.error().message;
  for (const char* needle :
       {"not configured", "GPUPOOL_ENDPOINT", "GPUPOOL_ACCESS_KEY", "GPUPOOL_SECRET_KEY",
        "gpupool login", path_.c_str(), "credentials.env"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " in: " << m;
  }
  // Only the endpoint missing: the message says which.
  p = ResolveProfile(Env({{"GPUPOOL_ACCESS_KEY", "A"}, {"GPUPOOL_SECRET_KEY", "S"}}), "");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("(no endpoint)"), std::string::npos) << p.error().message;
}

TEST_F(ResolveTest, IncompleteProfileAsksForLoginAgain) {
  WriteText(path_, "[default]\nendpoint = http://x:1\naccess_key = AK\n");
  Result<Profile> p = ResolveProfile(Env({}), "");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("has no secret key"), std::string::npos);
}

TEST_F(ResolveTest, MalformedFileIsReported) {
  WriteText(path_, "[default]\nbogus\n");
  Result<Profile> p = ResolveProfile(Env({}), "");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find(path_ + ":2:"), std::string::npos) << p.error().message;
}

TEST_F(ResolveTest, WriteIsPrivateAtomicAndReadable) {
  EXPECT_FALSE(ReadConfig(path_)->has_value());  // missing: no error
  ConfigFile config;
  config.Set("default", {"http://a:1", "AK1", "SK1"});
  ASSERT_TRUE(WriteConfig(path_, config));
  EXPECT_EQ(ModeOf(path_), 0600u);
  EXPECT_EQ(ModeOf(fs::path(path_).parent_path().string()), 0700u);
  // Rewriting a file someone made world-readable makes it private again.
  ::chmod(path_.c_str(), 0644);
  config.Set("second", {"http://b:2", "AK2", "SK2"});
  ASSERT_TRUE(WriteConfig(path_, config));
  EXPECT_EQ(ModeOf(path_), 0600u);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(path_).parent_path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
  Result<std::optional<ConfigFile>> read = ReadConfig(path_);
  ASSERT_TRUE(read && read->has_value());
  EXPECT_EQ((*read)->profiles, config.profiles);
  Result<Profile> p = ResolveProfile(Env({}), "second");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->access_key, "AK2");
}

TEST_F(ResolveTest, WriteFailsWithThePath) {
  WriteText(home_ + "/blocker", "a file, not a directory");
  Status s = WriteConfig(home_ + "/blocker/config", ConfigFile{});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("cannot write " + home_ + "/blocker/config"), std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace gpupool::cli
