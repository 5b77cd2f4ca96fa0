// Join tokens, for admins: join-token create (the token is printed once), list, revoke. A node's
// agent joins with a token once and keeps its own credentials; revoking the token revokes them.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"

namespace gpupool::cli {
namespace {

struct CreateState {
  std::string description;
  std::optional<std::string> expires_in;
  CommonFlags common;
};

struct RevokeState {
  std::string id;
  CommonFlags common;
};

std::string Nodes(const proto::JoinTokenView& token) {
  return token.nodes.empty() ? "-" : JoinList(token.nodes);
}

std::string Expires(const proto::JoinTokenView& token) {
  return token.expires_ms == 0 ? "never" : FormatTime(token.expires_ms);
}

}  // namespace

void AddJoinTokenCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand(
      "join-token",
      "Join tokens, with which nodes' agents join the pool: create, list, revoke "
      "(admin)");
  group->alias("join-tokens");
  group->require_subcommand(1);

  auto create = std::make_shared<CreateState>();
  CLI::App* c =
      group->add_subcommand("create", "Create a join token; the token is printed once, only now");
  c->add_option("--description", create->description, "What the token is for")->type_name("TEXT");
  AddOptional(c, "--expires-in", &create->expires_in, "DURATION",
              "Refuse joins with it after this long (24h, 7d; default: never)");
  AddCommonFlags(c, &create->common);
  OnRun(c, exit_code, [f = create] {
    proto::JoinTokenCreate body{.description = f->description};
    if (f->expires_in) {
      Result<int64_t> ms = ParseDurationMs(*f->expires_in);
      if (!ms) return UsageError("--expires-in: " + ms.error().message);
      if (*ms <= 0) return UsageError("--expires-in must be longer than 0, got " + *f->expires_in);
      body.expires_in_ms = *ms;
    }
    return WithSession(f->common, [&](Session& s) {
      const std::string endpoint = s.profile().endpoint;
      const std::string ca_file = s.profile().ca_file;
      return PrintAnswer(s.client().Accounts().CreateJoinToken(body), f->common.json,
                         [&](const proto::NewJoinToken& t) {
                           std::cout << "join token: " << t.token << "\n"
                                     << "id:         " << t.id << "\n"
                                     << "expires:    " << Expires(t) << "\n";
                           std::cerr << "Save the token now: it is not shown again. On each "
                                        "node run:\n  gpupool agent --server "
                                     << endpoint << (ca_file.empty() ? "" : " --ca-file " + ca_file)
                                     << " --join-token " << t.token << "\n";
                           if (!ca_file.empty()) {
                             std::cerr << "(--ca-file: a copy of " << ca_file
                                       << " on the node, which verifies the server with it)\n";
                           }
                         });
    });
  });

  auto list = std::make_shared<CommonFlags>();
  CLI::App* l = group->add_subcommand("list", "Join tokens (never their secrets) and who joined");
  l->alias("ls");
  AddCommonFlags(l, list.get());
  OnRun(l, exit_code, [f = list] {
    return WithSession(*f, [&](Session& s) {
      return PrintAnswer(
          s.client().Accounts().ListJoinTokens(), f->json, [](const proto::JoinTokenList& answer) {
            Table table({"ID", "STATE", "NODES", "EXPIRES", "CREATED", "DESCRIPTION"});
            for (const proto::JoinTokenView& t : answer.join_tokens) {
              table.AddRow(
                  {t.id, t.state, Nodes(t), Expires(t), FormatTime(t.created_ms), t.description});
            }
            std::cout << table.Render();
          });
    });
  });

  auto revoke = std::make_shared<RevokeState>();
  CLI::App* r = group->add_subcommand(
      "revoke", "Revoke a join token and the credentials of the nodes that joined with it");
  r->add_option("id", revoke->id, "The token's id (JT...)")->required()->type_name("ID");
  AddCommonFlags(r, &revoke->common);
  OnRun(r, exit_code, [f = revoke] {
    if (Status ok = CheckIdentifier("join token id", f->id); !ok) {
      return UsageError(ok.error().message);
    }
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Accounts().RevokeJoinToken(f->id), f->common.json,
                         [](const proto::JoinTokenView& t) {
                           std::cout << "revoked join token " << t.id
                                     << "; nodes that joined with it: " << Nodes(t) << "\n";
                         });
    });
  });
}

}  // namespace gpupool::cli
