// AccountService: projects, users, access keys, SSH keys and join tokens (admins change them;
// members may read their own, and create and revoke their own keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "server/caller.h"

namespace gpupool::server {

struct NewAccessKey {
  AccessKey key;
  std::string secret;  // shown once, at creation
};

// A join token as admins see it: never its secret, nor the secret's digest.
struct JoinTokenView {
  JoinToken token;                 // secret_digest empty
  bool expired = false;            // its expiry has passed (joins are refused)
  std::vector<std::string> nodes;  // the nodes that joined with it, sorted
};

struct NewJoinToken {
  JoinTokenView view;
  std::string token;  // "<id>.<secret>": what agents join with; shown once, at creation
};

// A page of the audit log: entries after `after_seq`, of `actor` and about `target` when given.
struct AuditFilter {
  int64_t after_seq = 0;
  int64_t limit = 100;  // 1..1000
  std::string actor;
  std::string target;
};

class AccountService {
 public:
  virtual ~AccountService() = default;

  virtual void CreateProject(const Caller& caller, Project project, Done<Project> done) = 0;
  // Replaces the quota fields (max_gpu_milli, max_tasks, stop_grace_ms) and the name.
  virtual void UpdateProject(const Caller& caller, Project project, Done<Project> done) = 0;
  virtual Result<std::vector<Project>> ListProjects(const Caller& caller) = 0;
  virtual Result<Project> GetProject(const Caller& caller, const std::string& id) = 0;
  virtual void CreateUser(const Caller& caller, User user, Done<User> done) = 0;
  // Replaces role and project membership.
  virtual void UpdateUser(const Caller& caller, User user, Done<User> done) = 0;
  virtual Result<std::vector<User>> ListUsers(const Caller& caller) = 0;
  // Members may create and revoke their own keys; admins anyone's.
  virtual void CreateAccessKey(const Caller& caller, const std::string& user_id,
                               std::string description, Done<NewAccessKey> done) = 0;
  virtual Result<std::vector<AccessKey>> ListAccessKeys(const Caller& caller,
                                                        const std::string& user_id) = 0;
  virtual void RevokeAccessKey(const Caller& caller, const std::string& access_key,
                               Done<AccessKey> done) = 0;
  // A user's SSH public keys (gpupool ssh-key; core/ssh_key.h), managed like access keys.
  // `public_key` is a line of a .pub file (kInvalidArgument says what is wrong with it); `name`
  // empty: the key's comment when that makes a name, else "key-N". The same key twice, or a
  // name taken, is kAlreadyExists; more than kMaxSshKeysPerUser kResourceExhausted.
  virtual void AddSshKey(const Caller& caller, const std::string& user_id, std::string name,
                         const std::string& public_key, Done<SshKey> done) = 0;
  virtual Result<std::vector<SshKey>> ListSshKeys(const Caller& caller,
                                                  const std::string& user_id) = 0;
  virtual void RemoveSshKey(const Caller& caller, const std::string& user_id,
                            const std::string& name, Done<SshKey> done) = 0;
  // The keys ("TYPE BASE64", sorted, each once) that log into a task of `project_id` over SSH:
  // those of the project's members, and the caller's own (an admin reaches any task).
  virtual std::vector<std::string> SshKeysOfProject(const Caller& caller,
                                                    const std::string& project_id) = 0;
  // Admin only. `expires_in_ms` > 0: joins are refused from creation + expires_in_ms on; 0: the
  // token does not expire.
  virtual void CreateJoinToken(const Caller& caller, std::string description, int64_t expires_in_ms,
                               Done<NewJoinToken> done) = 0;
  virtual Result<std::vector<JoinTokenView>> ListJoinTokens(const Caller& caller) = 0;
  // Admin only. Refuses further joins with the token and revokes the credentials minted with it:
  // their agents' requests are refused from now on, so their nodes go lost.
  virtual void RevokeJoinToken(const Caller& caller, const std::string& id,
                               Done<JoinTokenView> done) = 0;
  // Admin only: the audit log of administrative changes (users, keys, projects and their quotas,
  // prices, credits, cordons and drains, join tokens), oldest first, read from the store after
  // the writes queued before the read.
  virtual void ListAudit(const Caller& caller, const AuditFilter& filter,
                         Done<std::vector<AuditEntry>> done) = 0;
};

}  // namespace gpupool::server
