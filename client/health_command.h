// `tributary health [--service NAME] [--watch]`: the standard
// grpc.health.v1 protocol, so it also probes any gRPC server.
#ifndef TRIBUTARY_CLIENT_HEALTH_COMMAND_H_
#define TRIBUTARY_CLIENT_HEALTH_COMMAND_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/channel_options.h"
#include "client/command_line.h"
#include "grpc/health/v1/health.pb.h"

namespace tributary {

CommandSpec HealthCommandSpec();

// Check: prints the status (SERVING, NOT_SERVING, …) and succeeds only for
// SERVING. --watch: prints every status Watch streams, flushed, until the
// call ends (--timeout, or the server closes it); succeeds when the last one
// was SERVING.
absl::Status RunHealthCommand(const CommandLine& line,
                              const ChannelOptions& options,
                              const std::shared_ptr<grpc::Channel>& channel);

// "SERVING", "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN".
std::string ServingStatusName(
    grpc::health::v1::HealthCheckResponse::ServingStatus status);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_HEALTH_COMMAND_H_
