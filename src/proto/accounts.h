// Wire types of accounts (docs/api.md "Projects, users and keys", "Join tokens"): projects with
// their quotas, users, access keys, the caller's identity, join tokens and the credentials an
// agent gets when its node joins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/records.h"
#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

// POST /v1/projects.
struct ProjectCreate {
  std::string id;
  std::optional<std::string> name;
  int64_t max_gpu_milli = Project{}.max_gpu_milli;
  int64_t max_tasks = Project{}.max_tasks;
  int64_t stop_grace_ms = Project{}.stop_grace_ms;
  int64_t max_storage_bytes = Project{}.max_storage_bytes;
  static constexpr std::string_view kName = "ProjectCreate";
  static constexpr std::string_view kDoc = "A new project and its quotas.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.required = true, .format = Format::kIdentifier});
    v("name", s.name, {.max_bytes = 256, .format = Format::kText, .doc = "Default: the id"});
    v("max_gpu_milli", s.max_gpu_milli, {.min = -1, .doc = "GPU milli it may hold; -1: any"});
    v("max_tasks", s.max_tasks, {.min = -1, .doc = "Unfinished tasks it may have; -1: any"});
    v("stop_grace_ms", s.stop_grace_ms,
      {.min = 0, .doc = "How long tasks keep running once the balance is gone"});
    v("max_storage_bytes", s.max_storage_bytes,
      {.min = -1, .doc = "Bytes of task files (inputs, outputs, unfinished uploads) it may keep; "
                         "-1: any"});
  }
};

// PATCH /v1/projects/{id}: what is given replaces what is there.
struct ProjectPatch {
  std::optional<std::string> name;
  std::optional<int64_t> max_gpu_milli;
  std::optional<int64_t> max_tasks;
  std::optional<int64_t> stop_grace_ms;
  std::optional<int64_t> max_storage_bytes;
  static constexpr std::string_view kName = "ProjectPatch";
  static constexpr std::string_view kDoc = "New values for some of a project's fields.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v.RequireOneOf({"name", "max_gpu_milli", "max_tasks", "stop_grace_ms", "max_storage_bytes"});
    v("name", s.name, {.max_bytes = 256, .format = Format::kText});
    v("max_gpu_milli", s.max_gpu_milli, {.min = -1});
    v("max_tasks", s.max_tasks, {.min = -1});
    v("stop_grace_ms", s.stop_grace_ms, {.min = 0});
    v("max_storage_bytes", s.max_storage_bytes, {.min = -1});
  }
};

struct ProjectView {
  std::string id;
  std::string name;
  int64_t max_gpu_milli = -1;
  int64_t max_tasks = -1;
  int64_t stop_grace_ms = 0;
  int64_t max_storage_bytes = -1;
  int64_t created_ms = 0;
  static constexpr std::string_view kName = "Project";
  static constexpr std::string_view kDoc = "A project: who pays, and its quotas.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("name", s.name);
    v("max_gpu_milli", s.max_gpu_milli, {.doc = "-1: unlimited"});
    v("max_tasks", s.max_tasks, {.doc = "-1: unlimited"});
    v("stop_grace_ms", s.stop_grace_ms);
    v("max_storage_bytes", s.max_storage_bytes,
      {.doc = "Bytes of task files it may keep; -1: unlimited"});
    v("created_ms", s.created_ms);
  }
};

struct ProjectList {
  std::vector<ProjectView> projects;
  static constexpr std::string_view kName = "ProjectList";
  static constexpr std::string_view kDoc = "The projects the caller sees.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("projects", s.projects);
  }
};

// POST /v1/users.
struct UserCreate {
  std::string id;
  std::optional<std::string> name;
  std::string role = "member";
  std::vector<std::string> projects;
  static constexpr std::string_view kName = "UserCreate";
  static constexpr std::string_view kDoc = "A new user.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.required = true, .format = Format::kIdentifier});
    v("name", s.name, {.max_bytes = 256, .format = Format::kText, .doc = "Default: the id"});
    v("role", s.role, {.one_of = kRoles});
    v("projects", s.projects, {.format = Format::kIdentifier, .doc = "Project ids"});
  }
};

// PATCH /v1/users/{id}.
struct UserPatch {
  std::optional<std::string> role;
  std::optional<std::vector<std::string>> projects;
  static constexpr std::string_view kName = "UserPatch";
  static constexpr std::string_view kDoc = "A user's new role or project membership.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v.RequireOneOf({"role", "projects"});
    v("role", s.role, {.one_of = kRoles});
    v("projects", s.projects, {.format = Format::kIdentifier, .doc = "Replaces the list"});
  }
};

struct UserView {
  std::string id;
  std::string name;
  std::string role;
  std::vector<std::string> projects;
  int64_t created_ms = 0;
  static constexpr std::string_view kName = "User";
  static constexpr std::string_view kDoc = "A person with access keys.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("name", s.name);
    v("role", s.role, {.one_of = kRoles});
    v("projects", s.projects);
    v("created_ms", s.created_ms);
  }
};

struct UserList {
  std::vector<UserView> users;
  static constexpr std::string_view kName = "UserList";
  static constexpr std::string_view kDoc = "The users the caller sees.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("users", s.users);
  }
};

// POST /v1/users/{id}/keys.
struct KeyCreate {
  std::string description;
  static constexpr std::string_view kName = "KeyCreate";
  static constexpr std::string_view kDoc = "A new access key for a user.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("description", s.description, {.max_bytes = 1024, .format = Format::kText});
  }
};

struct AccessKeyView {
  std::string access_key;
  std::string user;
  std::string description;
  int64_t created_ms = 0;
  int64_t revoked_ms = 0;
  bool active = true;
  static constexpr std::string_view kName = "AccessKey";
  static constexpr std::string_view kDoc = "An access key (never its secret).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("access_key", s.access_key);
    v("user", s.user);
    v("description", s.description);
    v("created_ms", s.created_ms);
    v("revoked_ms", s.revoked_ms, {.doc = "0: active"});
    v("active", s.active);
  }
};

struct NewAccessKey : AccessKeyView {
  std::string secret_key;
  static constexpr std::string_view kName = "NewAccessKey";
  static constexpr std::string_view kDoc = "A key just created, with its secret (shown once).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    AccessKeyView::Describe(v, static_cast<Like<Self, AccessKeyView>&>(s));
    v("secret_key", s.secret_key, {.doc = "Shown once"});
  }
};

struct AccessKeyList {
  std::vector<AccessKeyView> keys;
  static constexpr std::string_view kName = "AccessKeyList";
  static constexpr std::string_view kDoc = "A user's access keys.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("keys", s.keys);
  }
};

// POST /v1/users/{id}/ssh-keys.
struct SshKeyCreate {
  std::string name;
  std::string public_key;
  static constexpr std::string_view kName = "SshKeyCreate";
  static constexpr std::string_view kDoc =
      "An SSH public key for logging into the tasks of the user's projects (gpupool ssh-key add).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name,
      {.max_bytes = 64,
       .doc = "Unique among the user's keys: 1..64 of A-Z a-z 0-9 - _ . (default: the key's "
              "comment, other characters made '-': alice@laptop is alice-laptop; else key-N)"});
    v("public_key", s.public_key,
      {.required = true,
       .max_bytes = 16 * 1024,
       .format = Format::kText,
       .doc = "One line of a public key file (~/.ssh/id_ed25519.pub): TYPE BASE64 [COMMENT]"});
  }
};

struct SshKeyView {
  std::string user;
  std::string name;
  std::string public_key;
  std::string fingerprint;
  int64_t created_ms = 0;
  static constexpr std::string_view kName = "SshKey";
  static constexpr std::string_view kDoc = "An SSH public key of a user.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("user", s.user);
    v("name", s.name);
    v("public_key", s.public_key, {.doc = "TYPE BASE64, without the comment"});
    v("fingerprint", s.fingerprint, {.doc = "SHA256:…, as ssh-keygen -l prints it"});
    v("created_ms", s.created_ms);
  }
};

struct SshKeyList {
  std::vector<SshKeyView> keys;
  static constexpr std::string_view kName = "SshKeyList";
  static constexpr std::string_view kDoc = "A user's SSH public keys, in the order added.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("keys", s.keys);
  }
};

struct WhoAmI {
  std::string user;
  std::string access_key;
  std::string role;
  std::vector<std::string> projects;
  static constexpr std::string_view kName = "WhoAmI";
  static constexpr std::string_view kDoc = "The caller, as its access key resolves.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("user", s.user);
    v("access_key", s.access_key);
    v("role", s.role, {.one_of = kRoles});
    v("projects", s.projects);
  }
};

// Longest join token text accepted ("JT" + 16 + "." + 40 characters as minted; room to spare).
inline constexpr size_t kMaxJoinTokenBytes = 256;
// The longest expiry a token may have: ten years.
inline constexpr int64_t kMaxJoinTokenExpiryMs = int64_t{10} * 365 * 24 * 3600 * 1000;

// POST /v1/join-tokens.
struct JoinTokenCreate {
  std::string description;
  int64_t expires_in_ms = 0;
  static constexpr std::string_view kName = "JoinTokenCreate";
  static constexpr std::string_view kDoc = "A new join token for agents.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("description", s.description, {.max_bytes = 1024, .format = Format::kText});
    v("expires_in_ms", s.expires_in_ms,
      {.min = 0, .max = kMaxJoinTokenExpiryMs, .doc = "0: never expires"});
  }
};

inline constexpr std::string_view kJoinTokenStates[] = {"active", "expired", "revoked"};

struct JoinTokenView {
  std::string id;
  std::string description;
  std::string created_by;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;
  int64_t revoked_ms = 0;
  std::string state;
  std::vector<std::string> nodes;
  static constexpr std::string_view kName = "JoinToken";
  static constexpr std::string_view kDoc = "A join token (never its secret).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("description", s.description);
    v("created_by", s.created_by);
    v("created_ms", s.created_ms);
    v("expires_ms", s.expires_ms, {.doc = "0: never"});
    v("revoked_ms", s.revoked_ms, {.doc = "0: not revoked"});
    v("state", s.state, {.one_of = kJoinTokenStates});
    v("nodes", s.nodes, {.doc = "The nodes that joined with it"});
  }
};

struct NewJoinToken : JoinTokenView {
  std::string token;
  static constexpr std::string_view kName = "NewJoinToken";
  static constexpr std::string_view kDoc = "A token just created, with the text agents join with.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    JoinTokenView::Describe(v, static_cast<Like<Self, JoinTokenView>&>(s));
    v("token", s.token, {.doc = "<id>.<secret>: shown once"});
  }
};

struct JoinTokenList {
  std::vector<JoinTokenView> join_tokens;
  static constexpr std::string_view kName = "JoinTokenList";
  static constexpr std::string_view kDoc = "Every join token.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("join_tokens", s.join_tokens);
  }
};

// GET /v1/audit: the audit log of administrative changes (admins).
struct AuditQuery {
  int64_t after = 0;
  int64_t limit = 100;
  std::string actor;
  std::string target;
  static constexpr std::string_view kName = "AuditQuery";
  static constexpr std::string_view kDoc = "A page of the audit log.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("after", s.after, {.min = 0, .doc = "Entries after this seq (a page's next_after)"});
    v("limit", s.limit, {.min = 1, .max = 1000, .doc = "Page size"});
    v("actor", s.actor, {.format = Format::kIdentifier, .doc = "Only this user's changes"});
    v("target", s.target, {.max_bytes = 256, .doc = "Only changes of this entity (its id)"});
  }
};

struct AuditEntryView {
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string actor;
  std::string access_key;
  std::string action;
  std::string target;
  std::string detail;
  static constexpr std::string_view kName = "AuditEntry";
  static constexpr std::string_view kDoc = "One administrative change: who, when, what.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("seq", s.seq, {.doc = "1, 2, …: the log's order"});
    v("time_ms", s.time_ms);
    v("actor", s.actor, {.doc = "The user who made it"});
    v("access_key", s.access_key, {.doc = "The key the request was signed with"});
    v("action", s.action,
      {.doc = "user.create, user.update, key.create, key.revoke, project.create, "
              "project.update, credit.add, price.set, node.cordon, node.uncordon, node.drain, "
              "join_token.create, join_token.revoke"});
    v("target", s.target, {.doc = "The entity's id (a user, key, project, resource, node, token)"});
    v("detail", s.detail, {.doc = "The values set"});
  }
};

struct AuditPage {
  std::vector<AuditEntryView> entries;
  std::optional<int64_t> next_after;
  static constexpr std::string_view kName = "AuditPage";
  static constexpr std::string_view kDoc = "Audit entries, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("entries", s.entries);
    v("next_after", s.next_after, {.nullable = true, .doc = "The next page's after; null: no more"});
  }
};

// POST /v1/agent/join (unsigned: the token is the credential).
struct JoinRequest {
  std::string token;
  std::string node;
  static constexpr std::string_view kName = "JoinRequest";
  static constexpr std::string_view kDoc = "A node joining with a join token.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("token", s.token, {.required = true, .max_bytes = kMaxJoinTokenBytes});
    v("node", s.node, {.required = true, .format = Format::kIdentifier});
  }
};

struct AgentCredentials {
  std::string node;
  std::string access_key;
  std::string secret_key;
  std::string join_token;
  int64_t created_ms = 0;
  static constexpr std::string_view kName = "AgentCredentials";
  static constexpr std::string_view kDoc = "A node's own access key and secret (shown once).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node);
    v("access_key", s.access_key);
    v("secret_key", s.secret_key);
    v("join_token", s.join_token, {.doc = "The id of the token it joined with"});
    v("created_ms", s.created_ms);
  }
};

}  // namespace gpupool::proto
