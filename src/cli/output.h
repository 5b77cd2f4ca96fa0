// The CLI's own --json documents: what a command did here (login, cp) or two answers shown as one
// (usage). No request or answer of the REST API has these shapes, so they are not wire types of
// proto; they are described the same way (proto/describe.h) so that proto::Encode writes them and
// no JSON key is spelled by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/billing.h"

namespace gpupool::cli {

// What every command prints on stderr instead of "gpupool: <message>" when it has --json and
// fails; the exit code is the same either way.
struct ErrorOutput {
  std::string code;
  std::string message;
  int32_t exit_code = 1;
  static constexpr std::string_view kName = "ErrorOutput";
  static constexpr std::string_view kDoc = "A command that failed, with --json (on stderr).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("code", s.code,
      {.doc = "The server's canonical code (docs/api.md), or usage (the command line is wrong) "
              "or failed (anything else on this side: configuration, network, local files)"});
    v("message", s.message);
    v("exit_code", s.exit_code, {.doc = "2 for usage, else 1"});
  }
};

// `gpupool login --json`: the profile saved (never its secret).
struct LoginOutput {
  std::string profile;
  std::string path;
  std::string endpoint;
  std::string access_key;
  bool verified = false;
  static constexpr std::string_view kName = "LoginOutput";
  static constexpr std::string_view kDoc = "A profile saved by gpupool login.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("profile", s.profile);
    v("path", s.path, {.doc = "The config file"});
    v("endpoint", s.endpoint);
    v("access_key", s.access_key);
    v("verified", s.verified, {.doc = "Checked against the server before it was saved"});
  }
};

struct CopiedFile {
  std::string path;
  std::string local;
  int64_t size = 0;
  std::string sha256;
  std::optional<int64_t> resumed_from;  // uploads only
  static constexpr std::string_view kName = "CopiedFile";
  static constexpr std::string_view kDoc = "One file gpupool cp moved.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.doc = "The task path"});
    v("local", s.local);
    v("size", s.size);
    v("sha256", s.sha256);
    v("resumed_from", s.resumed_from,
      {.doc = "Uploads: bytes the server had from an interrupted upload"});
  }
};

// `gpupool cp --json`.
struct CopyOutput {
  std::string task;
  std::string direction;
  std::vector<CopiedFile> files;
  int64_t bytes = 0;
  std::vector<std::string> skipped;
  static constexpr std::string_view kName = "CopyOutput";
  static constexpr std::string_view kDoc = "What gpupool cp moved.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("direction", s.direction, {.doc = "upload or download"});
    v("files", s.files);
    v("bytes", s.bytes);
    v("skipped", s.skipped, {.doc = "Local entries not sent, with why"});
  }
};

// `gpupool usage --json`: the two answers its view is made of.
struct UsageOutput {
  proto::BalanceView balance;
  proto::StatementView statement;
  static constexpr std::string_view kName = "UsageOutput";
  static constexpr std::string_view kDoc = "A project's balance and its statement.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("balance", s.balance);
    v("statement", s.statement);
  }
};

}  // namespace gpupool::cli
