// tributary.v1.Tributary on gRPC's callback API: every method checks the
// bearer token and the request id first (service_context.h). Generate and
// GenerateStream have their own reactors; the others answer inline (they
// never wait for the engine).
#ifndef TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_
#define TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_

#include "server/service_context.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {

class TributaryService final : public v1::Tributary::CallbackService {
 public:
  explicit TributaryService(ServiceContext& service) : service_(service) {}

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* call,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* GenerateStream(
      grpc::CallbackServerContext* call,
      const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetResidualStats(
      grpc::CallbackServerContext* call,
      const v1::GetResidualStatsRequest* request,
      v1::ResidualStats* response) override;

 private:
  // Auth and request id; an error to finish the call with, or OK.
  grpc::Status Admit(grpc::CallbackServerContext* call) const;

  ServiceContext& service_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_
