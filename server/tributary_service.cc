#include "server/tributary_service.h"

#include <cmath>

#include "absl/strings/str_cat.h"
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

grpc::ServerUnaryReactor* TributaryService::Generate(
    grpc::CallbackServerContext* call, const v1::GenerateRequest* request,
    v1::GenerateResponse* response) {
  return new UnaryGenerateReactor(service_, call, request, response);
}

grpc::ServerWriteReactor<v1::GenerateResponse>*
TributaryService::GenerateStream(grpc::CallbackServerContext* call,
                                 const v1::GenerateRequest* request) {
  return StreamGenerateReactor::Start(service_, call, request);
}

grpc::ServerUnaryReactor* TributaryService::Tokenize(
    grpc::CallbackServerContext* call, const v1::TokenizeRequest* request,
    v1::TokenizeResponse* response) {
  if (grpc::Status s = Admit(call); !s.ok()) return Done(call, s);
  absl::StatusOr<std::vector<int32_t>> ids;
  switch (request->input_case()) {
    case v1::TokenizeRequest::kText:
      ids = service_.converter->EncodeText(request->text());
      break;
    case v1::TokenizeRequest::kChat:
      ids = service_.converter->EncodeChat(request->chat());
      break;
    case v1::TokenizeRequest::INPUT_NOT_SET:
      ids = absl::InvalidArgumentError(
          "input: one of text or chat is required");
      break;
  }
  if (!ids.ok()) return Done(call, ToGrpcStatus(ids.status()));
  response->mutable_token_ids()->Add(ids->begin(), ids->end());
  if (request->return_pieces()) {
    const Tokenizer* tokenizer = service_.converter->tokenizer();
    for (int32_t id : *ids) {
      response->add_pieces(tokenizer->IdToToken(id).value_or(""));
    }
  }
  return Done(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TributaryService::GetModelInfo(
    grpc::CallbackServerContext* call, const v1::GetModelInfoRequest*,
    v1::ModelInfo* response) {
  if (grpc::Status s = Admit(call); !s.ok()) return Done(call, s);
  *response = service_.model_info;
  return Done(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TributaryService::GetResidualStats(
    grpc::CallbackServerContext* call,
    const v1::GetResidualStatsRequest* request, v1::ResidualStats* response) {
  if (grpc::Status s = Admit(call); !s.ok()) return Done(call, s);
  if (service_.residual_window == nullptr) {
    return Done(call, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                   "residual statistics are off "
                                   "(--no-residual-stats)"));
  }
  const double max_seconds =
      absl::ToDoubleSeconds(service_.residual_window->max_window());
  const double window = request->window_seconds();
  if (!std::isfinite(window) || window < 0.0 || window > max_seconds) {
    return Done(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   absl::StrCat("window_seconds = ", window,
                                                " must be in [0, ", max_seconds,
                                                "] (0 = 60 s)")));
  }
  const double seconds = window == 0.0 ? std::min(60.0, max_seconds) : window;
  const ResidualSummary summary = service_.residual_window->Query(
      absl::Seconds(seconds), absl::Now());
  service_.converter->ToProto(summary, seconds, response);
  return Done(call, grpc::Status::OK);
}

}  // namespace tributary
