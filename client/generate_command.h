// `tributary generate` and `tributary chat`: one GenerateStream (or, with
// --unary, one Generate) call, the text on stdout as it arrives.
#ifndef TRIBUTARY_CLIENT_GENERATE_COMMAND_H_
#define TRIBUTARY_CLIENT_GENERATE_COMMAND_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/channel_options.h"
#include "client/command_line.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

// Streams the reply: every text delta is written to stdout and flushed as it
// arrives, then a newline. With --verbose, the finish reason, usage, timing
// and request id go to stderr (and with --residual the request's residual
// summary). With --lens, the logit-lens table follows the text on stdout
// (lens_table.h). A failed call returns RpcError after ending the partial
// line.
absl::Status RunGenerateCommand(const CommandLine& line,
                                const ChannelOptions& options,
                                const std::shared_ptr<grpc::Channel>& channel);

// "LENGTH", "STOP", "STOP_TOKEN", "STOP_STRING", "UNSPECIFIED".
std::string FinishReasonName(v1::FinishReason reason);

// The --verbose summary of a final message: finish reason (with what
// matched), usage and timing, one "key: value" per line.
std::string DescribeFinish(const v1::GenerateResponse& last);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_GENERATE_COMMAND_H_
