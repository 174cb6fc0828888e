// gRPC status codes as the names the API documents ("INVALID_ARGUMENT"), and
// the conversion of a failed RPC into the absl::Status a tool returns, so that
// RunCliMain prints `TOOL: CODE_NAME: message`.
#ifndef TRIBUTARY_CLIENT_STATUS_NAMES_H_
#define TRIBUTARY_CLIENT_STATUS_NAMES_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace tributary {

// "OK", "CANCELLED", …, "UNAUTHENTICATED"; "CODE_<n>" for a number outside
// the enum (a misbehaving peer can send one).
std::string StatusCodeName(grpc::StatusCode code);

// OK for an OK status; otherwise an absl::Status with the same code and the
// message "CODE_NAME: message" (or just "CODE_NAME" when the message is
// empty).
absl::Status RpcError(const grpc::Status& status);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_STATUS_NAMES_H_
