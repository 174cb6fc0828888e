// The flags of `tributary generate` and `tributary chat` and their
// translation into a GenerateRequest. No network: the server validates the
// ranges (its messages name the field); this only rejects what does not
// parse, so that a typo fails before a connection is made.
#ifndef TRIBUTARY_CLIENT_GENERATE_FLAGS_H_
#define TRIBUTARY_CLIENT_GENERATE_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command_line.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

// The command specs (flags) of generate and chat.
CommandSpec GenerateCommandSpec();
CommandSpec ChatCommandSpec();

// The request `line` (a generate or chat command line) asks for: the input
// (the prompt text, --ids, or the chat message with --system), sampling,
// stopping and response options, and the residual-stream interventions
// (intervention_flags.h). Errors name the flag.
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(
    const CommandLine& line);

// The chat turns of a command line: --system (optional), then `message` as
// the user turn, and --enable-thinking true|false (an error otherwise).
absl::Status BuildChatInput(const CliArgs& args, const std::string& message,
                            v1::ChatInput* chat);

// "1,2,3" → {1, 2, 3}; spaces around items are allowed; an empty list, an
// empty item or a value outside int32 is an error naming `flag`.
absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& flag,
                                                 const std::string& text);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_GENERATE_FLAGS_H_
