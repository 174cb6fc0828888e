#include "client/status_names.h"

#include "absl/strings/str_cat.h"

namespace tributary {

std::string StatusCodeName(grpc::StatusCode code) {
  // Spelled out rather than borrowed from absl::StatusCodeToString: the two
  // enums agree today, but the client's output must follow gRPC's names
  // whatever Abseil does.
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      break;
  }
  return absl::StrCat("CODE_", static_cast<int>(code));
}

absl::Status RpcError(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  std::string message = StatusCodeName(status.error_code());
  if (!status.error_message().empty()) {
    absl::StrAppend(&message, ": ", status.error_message());
  }
  // gRPC's codes 1..16 are Abseil's; anything else becomes UNKNOWN so that
  // the absl::Status stays well-formed.
  const int code = static_cast<int>(status.error_code());
  const absl::StatusCode absl_code = code >= 1 && code <= 16
                                         ? static_cast<absl::StatusCode>(code)
                                         : absl::StatusCode::kUnknown;
  return absl::Status(absl_code, message);
}

}  // namespace tributary
