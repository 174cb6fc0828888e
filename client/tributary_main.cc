// tributary: the command-line client of the Tributary service.
//
//   tributary [--target HOST:PORT] COMMAND [FLAGS] [ARGS]
//
// Commands: generate, chat, tokenize, info, stats, health (usage below and
// in client/README.md). Common flags: --target (default 127.0.0.1:50051),
// --token, --tls-ca/--tls-cert/--tls-key, --timeout, --request-id. A failed
// RPC prints `tributary: CODE_NAME: message` on stderr and exits 1.
#include <cstdio>
#include <functional>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "client/channel_options.h"
#include "client/command_line.h"
#include "client/generate_command.h"
#include "client/generate_flags.h"
#include "client/health_command.h"
#include "client/model_commands.h"
#include "base/cli.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

constexpr char kUsage[] =
    R"(usage: tributary [COMMON FLAGS] COMMAND [FLAGS] [ARGS]

commands:
  generate "PROMPT" | --ids 1,2,3   stream a completion of the prompt
      [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
      [--min-p P] [--seed S] [--repetition-penalty R] [--presence-penalty R]
      [--frequency-penalty R] [--stop STRING]... [--stop-token-ids 1,2]
      [--include-stop-string] [--ignore-eos] [--include-special-tokens]
      [--priority N] [--unary] [--verbose] [--residual]
      interventions on the residual stream (DIRECTION: a name from `info`,
      or @FILE of floats):
      [--steer LAYER:DIRECTION[:SCALE][:mixer][:generated]]...
      [--ablate DIRECTION]... [--skip-layers 1,2]
      [--lens all|3,5,7 [--lens-top N] [--lens-prompt] [--lens-width N]]
  chat "MESSAGE" [--system "TEXT"] [--enable-thinking true|false]
      (and the flags of generate but --ids)
  tokenize "TEXT" [--pieces] [--chat [--system "TEXT"]]
  info                              the model, cache capacity and limits
  stats [--window SECONDS]          residual-stream health per sublayer
  health [--service NAME] [--watch] exit 0 only when SERVING

common flags:
  --target HOST:PORT   the server (default 127.0.0.1:50051)
  --token TOKEN        sends "authorization: Bearer TOKEN"
  --tls-ca FILE        TLS, trusting this CA; with --tls-cert FILE and
                       --tls-key FILE: mutual TLS
  --timeout SECONDS    deadline of the call
  --request-id ID      sends "x-request-id: ID" (logged by the server)
)";

using CommandBody =
    std::function<absl::Status(const CommandLine&, const ChannelOptions&,
                               const std::shared_ptr<grpc::Channel>&)>;

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h" || (i == 1 && arg == "help")) {
      return true;
    }
  }
  return false;
}

absl::Status Run(int argc, char** argv) {
  const std::vector<CommandSpec> specs = {
      GenerateCommandSpec(), ChatCommandSpec(),  TokenizeCommandSpec(),
      InfoCommandSpec(),     StatsCommandSpec(), HealthCommandSpec()};
  const std::map<std::string, CommandBody> bodies = {
      {"generate", RunGenerateCommand}, {"chat", RunGenerateCommand},
      {"tokenize", RunTokenizeCommand}, {"info", RunInfoCommand},
      {"stats", RunStatsCommand},       {"health", RunHealthCommand}};
  ASSIGN_OR_RETURN(
      CommandLine line,
      CommandLine::Parse(argc, argv, ChannelFlagNames(), {}, specs));
  ASSIGN_OR_RETURN(ChannelOptions options, ParseChannelOptions(line.args()));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   CreateClientChannel(options));
  return bodies.at(line.command())(line, options, channel);
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  if (tributary::WantsHelp(argc, argv)) {
    std::fputs(tributary::kUsage, stdout);
    return 0;
  }
  return tributary::RunCliMain("tributary",
                               [&] { return tributary::Run(argc, argv); });
}
