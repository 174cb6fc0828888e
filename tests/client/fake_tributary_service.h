// An in-process stand-in for the Tributary service, on a loopback port, so
// that the client's RPC paths are tested without the real server or a model.
// GenerateStream writes one token per message (id i, text "t<i> ") with a
// delay between messages, and fails with RESOURCE_EXHAUSTED when the prompt
// text is "fail". With logit_lens, token i's message carries a reading at
// position 1 + i (the prompt is 2 tokens) per layer asked (0..3 for all):
// top-1 token i, text "t<i>", probability (layer + 1) / 4. It records the
// metadata it saw, the last GenerateRequest and the most streams it had open
// at once.
#ifndef TRIBUTARY_TESTS_CLIENT_FAKE_TRIBUTARY_SERVICE_H_
#define TRIBUTARY_TESTS_CLIENT_FAKE_TRIBUTARY_SERVICE_H_

#include <grpcpp/server.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {

class FakeTributaryService final : public v1::Tributary::Service {
 public:
  explicit FakeTributaryService(std::chrono::milliseconds token_delay)
      : token_delay_(token_delay) {}

  grpc::Status Generate(grpc::ServerContext* context,
                        const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status GenerateStream(
      grpc::ServerContext* context, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context,
                        const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context,
                            const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;
  grpc::Status GetResidualStats(grpc::ServerContext* context,
                                const v1::GetResidualStatsRequest* request,
                                v1::ResidualStats* response) override;

  int max_active_streams() const;
  std::string last_authorization() const;
  std::string last_request_id() const;
  v1::GenerateRequest last_generate_request() const;

 private:
  // Records the metadata and echoes x-request-id, as the real server does.
  void Observe(grpc::ServerContext* context);
  void Record(const v1::GenerateRequest& request);

  const std::chrono::milliseconds token_delay_;
  mutable std::mutex mu_;
  int active_streams_ = 0;
  int max_active_streams_ = 0;
  std::string last_authorization_;
  std::string last_request_id_;
  v1::GenerateRequest last_generate_request_;
};

// The service on 127.0.0.1 (a free port), with the default health service.
class FakeServer {
 public:
  explicit FakeServer(std::chrono::milliseconds token_delay);
  ~FakeServer();

  std::string target() const { return target_; }
  FakeTributaryService& service() { return service_; }
  grpc::Server& server() { return *server_; }

 private:
  FakeTributaryService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_CLIENT_FAKE_TRIBUTARY_SERVICE_H_
