#include "fake_tributary_service.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace {

std::string Metadata(grpc::ServerContext* context, const std::string& key) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(key);
  return it == metadata.end()
             ? ""
             : std::string(it->second.data(), it->second.size());
}

int32_t MaxNewTokens(const v1::GenerateRequest& request) {
  return request.stopping().has_max_new_tokens()
             ? request.stopping().max_new_tokens()
             : 4;
}

// The readings of the position that predicts token i (see the header).
void AddLensReadings(const v1::GenerateRequest& request, int32_t i,
                     v1::GenerateResponse* response) {
  if (!request.has_logit_lens()) return;
  std::vector<int32_t> layers(request.logit_lens().layers().begin(),
                              request.logit_lens().layers().end());
  if (layers.empty()) layers = {0, 1, 2, 3};
  for (int32_t layer : layers) {
    v1::LensReading* reading = response->add_logit_lens();
    reading->set_position(1 + i);
    reading->set_layer(layer);
    v1::TopLogprob* top = reading->add_top();
    top->set_token_id(i);
    top->set_text(absl::StrCat("t", i));
    top->set_logprob(static_cast<float>(std::log((layer + 1) / 4.0)));
  }
}

}  // namespace

void FakeTributaryService::Record(const v1::GenerateRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  last_generate_request_ = request;
}

v1::GenerateRequest FakeTributaryService::last_generate_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_generate_request_;
}

void FakeTributaryService::Observe(grpc::ServerContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  last_authorization_ = Metadata(context, "authorization");
  last_request_id_ = Metadata(context, "x-request-id");
  context->AddInitialMetadata("x-request-id", last_request_id_.empty()
                                                  ? "generated-id"
                                                  : last_request_id_);
}

grpc::Status FakeTributaryService::Generate(grpc::ServerContext* context,
                                            const v1::GenerateRequest* request,
                                            v1::GenerateResponse* response) {
  Observe(context);
  Record(*request);
  if (request->text() == "fail") {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  }
  const int32_t n = MaxNewTokens(*request);
  for (int32_t i = 0; i < n; ++i) {
    absl::StrAppend(response->mutable_text(), "t", i, " ");
    response->add_token_ids(i);
    AddLensReadings(*request, i, response);
  }
  response->mutable_usage()->set_prompt_tokens(2);
  response->set_finish_reason(v1::FINISH_REASON_LENGTH);
  response->mutable_usage()->set_generated_tokens(n);
  return grpc::Status::OK;
}

grpc::Status FakeTributaryService::GenerateStream(
    grpc::ServerContext* context, const v1::GenerateRequest* request,
    grpc::ServerWriter<v1::GenerateResponse>* writer) {
  Observe(context);
  Record(*request);
  if (request->text() == "fail") {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++active_streams_;
    max_active_streams_ = std::max(max_active_streams_, active_streams_);
  }
  const int32_t n = MaxNewTokens(*request);
  for (int32_t i = 0; i < n && !context->IsCancelled(); ++i) {
    std::this_thread::sleep_for(token_delay_);
    v1::GenerateResponse chunk;
    chunk.set_text(absl::StrCat("t", i, " "));
    if (request->response().return_token_ids()) chunk.add_token_ids(i);
    AddLensReadings(*request, i, &chunk);
    writer->Write(chunk);
  }
  v1::GenerateResponse last;
  last.set_finish_reason(v1::FINISH_REASON_LENGTH);
  last.mutable_usage()->set_prompt_tokens(2);
  last.mutable_usage()->set_generated_tokens(n);
  last.mutable_timing()->set_total_seconds(0.5);
  writer->Write(last);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --active_streams_;
  }
  return grpc::Status::OK;
}

grpc::Status FakeTributaryService::Tokenize(grpc::ServerContext* context,
                                            const v1::TokenizeRequest* request,
                                            v1::TokenizeResponse* response) {
  Observe(context);
  // One token per byte: enough to check the client's rendering.
  for (char c : request->text()) {
    response->add_token_ids(static_cast<unsigned char>(c));
    if (request->return_pieces()) response->add_pieces(std::string(1, c));
  }
  return grpc::Status::OK;
}

grpc::Status FakeTributaryService::GetModelInfo(grpc::ServerContext* context,
                                                const v1::GetModelInfoRequest*,
                                                v1::ModelInfo* response) {
  Observe(context);
  response->set_model_name("fake");
  response->set_backend("cpu");
  response->set_num_layers(4);
  for (const char* type : {"linear_attention", "linear_attention",
                           "linear_attention", "full_attention"}) {
    response->add_layer_types(type);
  }
  response->set_vocab_size(100);
  response->set_kv_block_bytes(65536);
  response->add_steering_vector_names("romeo");
  response->add_steering_vector_names("calm");
  return grpc::Status::OK;
}

grpc::Status FakeTributaryService::GetResidualStats(
    grpc::ServerContext* context, const v1::GetResidualStatsRequest* request,
    v1::ResidualStats* response) {
  Observe(context);
  response->set_window_seconds(
      request->window_seconds() > 0 ? request->window_seconds() : 60.0);
  v1::SublayerResidualStats* row = response->add_sublayers();
  row->set_layer(0);
  row->set_sublayer(v1::SUBLAYER_MIXER);
  row->set_kind(v1::LAYER_KIND_LINEAR_ATTENTION);
  row->set_num_tokens(10);
  row->mutable_update_to_stream_ratio()->set_mean(0.01);
  return grpc::Status::OK;
}

int FakeTributaryService::max_active_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_active_streams_;
}

std::string FakeTributaryService::last_authorization() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_authorization_;
}

std::string FakeTributaryService::last_request_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_id_;
}

FakeServer::FakeServer(std::chrono::milliseconds token_delay)
    : service_(token_delay) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  target_ = absl::StrCat("127.0.0.1:", port);
}

FakeServer::~FakeServer() { server_->Shutdown(); }

}  // namespace tributary
