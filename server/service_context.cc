#include "server/service_context.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/logging.h"
#include "nlohmann/json.hpp"
#include "server/status_conversion.h"

namespace tributary {
namespace {

constexpr size_t kMaxRequestIdBytes = 128;

std::string GenerateRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x", rng());
}

// Compares without an early exit, so the time taken does not tell how much
// of a guessed token was right.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

grpc::Status ServiceContext::CheckAuth(
    const grpc::CallbackServerContext& call) const {
  const auto& metadata = call.client_metadata();
  auto it = metadata.find("authorization");
  const std::string value =
      it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
  return ToGrpcStatus(CheckBearer(it == metadata.end() ? nullptr : value.c_str()));
}

absl::Status ServiceContext::CheckBearer(const char* authorization) const {
  if (config->auth_token.empty()) return absl::OkStatus();
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "authorization metadata is missing: send "
        "\"authorization: Bearer <token>\"");
  }
  // `Bearer` 1*SP token (RFC 6750 §2.1); the scheme is case-insensitive
  // (RFC 7235 §2.1), the token is compared in constant time.
  const absl::string_view value(authorization);
  const size_t space = value.find(' ');
  const absl::string_view scheme = value.substr(0, space);
  if (space == absl::string_view::npos ||
      !absl::EqualsIgnoreCase(scheme, "Bearer")) {
    return absl::UnauthenticatedError(
        "authorization: not a bearer token: send "
        "\"authorization: Bearer <token>\"");
  }
  absl::string_view token = value.substr(space);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (!ConstantTimeEquals(token, config->auth_token)) {
    return absl::UnauthenticatedError("authorization: the bearer token is wrong");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ServiceContext::RequestId(
    grpc::CallbackServerContext* call) const {
  const auto& metadata = call->client_metadata();
  auto it = metadata.find("x-request-id");
  const std::string value =
      it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
  absl::StatusOr<std::string> id =
      RequestIdFrom(it == metadata.end() ? nullptr : value.c_str());
  if (id.ok()) call->AddInitialMetadata("x-request-id", *id);
  return id;
}

absl::StatusOr<std::string> ServiceContext::RequestIdFrom(
    const char* x_request_id) {
  if (x_request_id == nullptr) return GenerateRequestId();
  const absl::string_view value(x_request_id);
  if (value.empty() || value.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("x-request-id metadata must be 1 to ", kMaxRequestIdBytes,
                     " bytes, got ", value.size()));
  }
  for (char c : value) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "x-request-id metadata must be printable ASCII without spaces");
    }
  }
  return std::string(value);
}

GenerationRecord::GenerationRecord(const ServiceContext& service,
                                   std::string method)
    : service_(service), method_(std::move(method)), start_(absl::Now()) {}

void GenerationRecord::OnEvent(const TokenEvent& event) {
  if (!event.has_token) return;
  const absl::Time now = absl::Now();
  if (has_token_ && service_.metrics != nullptr) {
    service_.metrics->RecordInterToken(absl::ToDoubleSeconds(now - last_token_));
  }
  has_token_ = true;
  last_token_ = now;
}

void GenerationRecord::Finish(const grpc::Status& status,
                              const TokenEvent* final_event) {
  if (finished_) return;
  finished_ = true;
  const char* reason = nullptr;
  if (final_event != nullptr && final_event->finish_reason) {
    reason = FinishReasonName(*final_event->finish_reason).data();
  }
  if (service_.metrics != nullptr) {
    service_.metrics->RecordFinished(status, final_event, reason);
  }
  nlohmann::json line;
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                  absl::UTCTimeZone());
  line["event"] = "request_finished";
  line["request_id"] = request_id_;
  line["method"] = method_;
  line["status"] = GrpcCodeName(status.error_code());
  if (!status.ok()) line["message"] = status.error_message();
  if (status.ok() && reason != nullptr) line["finish_reason"] = reason;
  if (final_event != nullptr) {
    line["prompt_tokens"] = final_event->usage.num_prompt_tokens;
    line["generated_tokens"] = final_event->usage.num_generated_tokens;
    line["queue_seconds"] = final_event->timing.queue_seconds;
    line["ttft_seconds"] = final_event->timing.time_to_first_token_seconds;
    line["total_seconds"] = final_event->timing.total_seconds;
  } else {
    line["prompt_tokens"] = 0;
    line["generated_tokens"] = 0;
    line["total_seconds"] = absl::ToDoubleSeconds(absl::Now() - start_);
  }
  LogRawLine(line.dump(-1, ' ', false,
                        nlohmann::json::error_handler_t::replace));
}

grpc::Status FinalStatus(const TokenEvent& event,
                         const grpc::CallbackServerContext& call) {
  if (!event.status.ok()) return ToGrpcStatus(event.status);
  if (event.finish_reason == FinishReason::kCancelled) {
    const gpr_timespec deadline = call.raw_deadline();
    if (gpr_time_cmp(deadline, gpr_inf_future(deadline.clock_type)) != 0 &&
        gpr_time_cmp(gpr_now(deadline.clock_type), deadline) >= 0) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "the deadline passed during generation");
    }
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the request was cancelled");
  }
  return grpc::Status::OK;
}

}  // namespace tributary
