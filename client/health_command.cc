#include "client/health_command.h"

#include <grpcpp/client_context.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/status_names.h"
#include "base/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace tributary {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

absl::Status NotServing(const std::string& service,
                        HealthCheckResponse::ServingStatus status) {
  return absl::UnavailableError(absl::StrCat(
      service.empty() ? "the server" : absl::StrCat("service '", service, "'"),
      " is ", ServingStatusName(status)));
}

}  // namespace

CommandSpec HealthCommandSpec() {
  return CommandSpec{"health", {"service"}, {"watch"}, {}};
}

std::string ServingStatusName(HealthCheckResponse::ServingStatus status) {
  const std::string& name = HealthCheckResponse::ServingStatus_Name(status);
  return name.empty() ? absl::StrCat("STATUS_", static_cast<int>(status))
                      : name;
}

absl::Status RunHealthCommand(const CommandLine& line,
                              const ChannelOptions& options,
                              const std::shared_ptr<grpc::Channel>& channel) {
  if (!line.args().positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "health: unexpected argument '", line.args().positional()[0], "'"));
  }
  HealthCheckRequest request;
  request.set_service(line.args().GetOr("service", ""));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);

  if (!line.args().Has("watch")) {
    HealthCheckResponse response;
    RETURN_IF_ERROR(RpcError(stub->Check(&context, request, &response)));
    std::printf("%s\n", ServingStatusName(response.status()).c_str());
    if (response.status() == HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    return NotServing(request.service(), response.status());
  }

  auto reader = stub->Watch(&context, request);
  HealthCheckResponse response;
  bool seen_any = false;
  HealthCheckResponse::ServingStatus last = HealthCheckResponse::UNKNOWN;
  while (reader->Read(&response)) {
    seen_any = true;
    last = response.status();
    std::printf("%s\n", ServingStatusName(last).c_str());
    std::fflush(stdout);  // a watcher reads transitions as they happen
  }
  grpc::Status status = reader->Finish();
  // --timeout is how a watch is bounded: its deadline ends the watch, it is
  // not a failure of the server.
  const bool ended_normally =
      status.ok() ||
      (options.timeout_seconds &&
       status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  if (!ended_normally || !seen_any) RETURN_IF_ERROR(RpcError(status));
  if (last == HealthCheckResponse::SERVING) return absl::OkStatus();
  return NotServing(request.service(), last);
}

}  // namespace tributary
