// The one place where an absl::Status becomes a grpc::Status (design.md §1).
// The canonical codes are the same numbers in both; the message passes
// through unchanged (it names the field, design.md §6).
#ifndef TRIBUTARY_SERVER_STATUS_CONVERSION_H_
#define TRIBUTARY_SERVER_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tributary {

grpc::Status ToGrpcStatus(const absl::Status& status);
// For metrics and logs: "OK", "INVALID_ARGUMENT", …
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_STATUS_CONVERSION_H_
