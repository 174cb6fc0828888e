// The read-only commands of `tributary`: tokenize, info and stats, one unary
// call each, and the pure renderings of their replies (tested without a
// server).
#ifndef TRIBUTARY_CLIENT_MODEL_COMMANDS_H_
#define TRIBUTARY_CLIENT_MODEL_COMMANDS_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/channel_options.h"
#include "client/command_line.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

CommandSpec TokenizeCommandSpec();
CommandSpec InfoCommandSpec();
CommandSpec StatsCommandSpec();

// `tokenize "TEXT"` (or with --chat, TEXT as a user message after an
// optional --system message, through the chat template): the ids on one line,
// comma-separated (what --ids takes); with --pieces one line per token.
absl::Status RunTokenizeCommand(const CommandLine& line,
                                const ChannelOptions& options,
                                const std::shared_ptr<grpc::Channel>& channel);
// `info`: GetModelInfo as key: value lines.
absl::Status RunInfoCommand(const CommandLine& line,
                            const ChannelOptions& options,
                            const std::shared_ptr<grpc::Channel>& channel);
// `stats [--window SECONDS]`: GetResidualStats as a table and a bar chart.
absl::Status RunStatsCommand(const CommandLine& line,
                             const ChannelOptions& options,
                             const std::shared_ptr<grpc::Channel>& channel);

// "1,2,3\n"; with pieces, a header and "index id "piece"" per token (the
// piece quoted, control bytes, quotes and backslashes escaped, UTF-8 kept).
std::string RenderTokens(const v1::TokenizeResponse& response, bool pieces);

// One "key: value" line per field; layer types run-length encoded
// ("0-2 linear_attention, 3 full_attention"), byte sizes also in KiB/MiB/GiB,
// the steering vector names comma-separated ("-" when none).
std::string RenderModelInfo(const v1::ModelInfo& info);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_MODEL_COMMANDS_H_
