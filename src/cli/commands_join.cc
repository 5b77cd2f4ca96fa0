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

std::string Nodes(const Json& token) {
  std::string out;
  for (const Json& n : Array(token, "nodes")) {
    if (n.is_string()) out += (out.empty() ? "" : ",") + n.get<std::string>();
  }
  return out.empty() ? "-" : out;
}

std::string Expires(const Json& token) {
  const int64_t ms = Int(token, "expires_ms");
  return ms == 0 ? "never" : FormatTime(ms);
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
    Json body = Json::object();
    if (!f->description.empty()) body["description"] = f->description;
    if (f->expires_in) {
      Result<int64_t> ms = ParseDurationMs(*f->expires_in);
      if (!ms) return UsageError("--expires-in: " + ms.error().message);
      if (*ms <= 0) return UsageError("--expires-in must be longer than 0, got " + *f->expires_in);
      body["expires_in_ms"] = *ms;
    }
    return WithSession(f->common, [&](Session& s) {
      const std::string endpoint = s.profile().endpoint;
      return CallAndPrint(s, "POST", "/v1/join-tokens", &body, f->common.json, [&](const Json& t) {
        std::cout << "join token: " << Str(t, "token") << "\n"
                  << "id:         " << Str(t, "id") << "\n"
                  << "expires:    " << Expires(t) << "\n";
        std::cerr << "Save the token now: it is not shown again. On each "
                     "node run:\n  gpupool agent --server "
                  << endpoint << " --join-token " << Str(t, "token") << "\n";
      });
    });
  });

  auto list = std::make_shared<CommonFlags>();
  CLI::App* l = group->add_subcommand("list", "Join tokens (never their secrets) and who joined");
  l->alias("ls");
  AddCommonFlags(l, list.get());
  OnRun(l, exit_code, [f = list] {
    return WithSession(*f, [&](Session& s) {
      return CallAndPrint(s, "GET", "/v1/join-tokens", nullptr, f->json, [](const Json& answer) {
        Table table({"ID", "STATE", "NODES", "EXPIRES", "CREATED", "DESCRIPTION"});
        for (const Json& t : Array(answer, "join_tokens")) {
          table.AddRow({Str(t, "id"), Str(t, "state"), Nodes(t), Expires(t),
                        FormatTime(Int(t, "created_ms")), Str(t, "description")});
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
      return CallAndPrint(s, "DELETE", "/v1/join-tokens/" + PathPart(f->id), nullptr,
                          f->common.json, [](const Json& t) {
                            std::cout << "revoked join token " << Str(t, "id")
                                      << "; nodes that joined with it: " << Nodes(t) << "\n";
                          });
    });
  });
}

}  // namespace gpupool::cli
