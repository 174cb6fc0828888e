#include "server/tributary_service.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/message_bytes.h"
#include "server/status_conversion.h"
#include "server/stream_generate_reactor.h"
#include "server/unary_generate_reactor.h"

namespace tributary {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* call,
                               const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

grpc::Status TributaryService::Admit(grpc::CallbackServerContext* call) const {
  absl::StatusOr<std::string> id = service_.RequestId(call);
  if (!id.ok()) return ToGrpcStatus(id.status());
  return service_.CheckAuth(*call);
}

template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* TributaryService::Inline(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes, Answer answer) {
  if (grpc::Status s = Admit(call); !s.ok()) return Done(call, s);
  Request request;
  if (grpc::Status s = ParseRequest(*request_bytes, &request); !s.ok()) {
    return Done(call, s);
  }
  Response response;
  grpc::Status status = answer(request, &response);
  if (status.ok()) status = SerializeResponse(response, response_bytes);
  return Done(call, status);
}

grpc::ServerUnaryReactor* TributaryService::Generate(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return new UnaryGenerateReactor(service_, call, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TributaryService::GenerateStream(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request) {
  return StreamGenerateReactor::Start(service_, call, request);
}

grpc::ServerUnaryReactor* TributaryService::Tokenize(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Inline<v1::TokenizeRequest, v1::TokenizeResponse>(
      call, request, response,
      [this](const v1::TokenizeRequest& r, v1::TokenizeResponse* out) {
        return AnswerTokenize(r, out);
      });
}

grpc::ServerUnaryReactor* TributaryService::GetModelInfo(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Inline<v1::GetModelInfoRequest, v1::ModelInfo>(
      call, request, response,
      [this](const v1::GetModelInfoRequest&, v1::ModelInfo* out) {
        *out = service_.model_info;
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* TributaryService::GetResidualStats(
    grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Inline<v1::GetResidualStatsRequest, v1::ResidualStats>(
      call, request, response,
      [this](const v1::GetResidualStatsRequest& r, v1::ResidualStats* out) {
        return AnswerGetResidualStats(r, out);
      });
}

grpc::Status TributaryService::AnswerTokenize(
    const v1::TokenizeRequest& request, v1::TokenizeResponse* response) const {
  absl::StatusOr<std::vector<int32_t>> ids;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText:
      ids = service_.converter->EncodeText(request.text());
      break;
    case v1::TokenizeRequest::kChat:
      ids = service_.converter->EncodeChat(request.chat());
      break;
    case v1::TokenizeRequest::INPUT_NOT_SET:
      ids = absl::InvalidArgumentError(
          "input: one of text or chat is required");
      break;
  }
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  response->mutable_token_ids()->Add(ids->begin(), ids->end());
  if (request.return_pieces()) {
    const Tokenizer* tokenizer = service_.converter->tokenizer();
    for (int32_t id : *ids) {
      response->add_pieces(tokenizer->IdToToken(id).value_or(""));
    }
  }
  return grpc::Status::OK;
}

grpc::Status TributaryService::AnswerGetResidualStats(
    const v1::GetResidualStatsRequest& request,
    v1::ResidualStats* response) const {
  if (service_.residual_window == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "residual statistics are off (--no-residual-stats)");
  }
  const double max_seconds =
      absl::ToDoubleSeconds(service_.residual_window->max_window());
  const double window = request.window_seconds();
  if (!std::isfinite(window) || window < 0.0 || window > max_seconds) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("window_seconds = ", window,
                                     " must be in [0, ", max_seconds,
                                     "] (0 = 60 s)"));
  }
  const double seconds = window == 0.0 ? std::min(60.0, max_seconds) : window;
  const ResidualSummary summary = service_.residual_window->Query(
      absl::Seconds(seconds), absl::Now());
  service_.converter->ToProto(summary, seconds, response);
  return grpc::Status::OK;
}

}  // namespace tributary
