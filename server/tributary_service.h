// tributary.v1.Tributary on gRPC's callback API: every method checks the
// bearer token and the request id first (service_context.h). Generate and
// GenerateStream have their own reactors; the others answer inline (they
// never wait for the engine).
//
// Every method is registered raw (its request and response as bytes) and
// parses its request itself after those checks (message_bytes.h), so that
// bytes that are no valid request are INVALID_ARGUMENT with the reason
// rather than gRPC's bare UNIMPLEMENTED; Generate and GenerateStream log
// and count them as their other errors.
#ifndef TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_
#define TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_

#include "server/service_context.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {

class TributaryService final
    : public v1::Tributary::WithRawCallbackMethod_Generate<
          v1::Tributary::WithRawCallbackMethod_GenerateStream<
              v1::Tributary::WithRawCallbackMethod_Tokenize<
                  v1::Tributary::WithRawCallbackMethod_GetModelInfo<
                      v1::Tributary::WithRawCallbackMethod_GetResidualStats<
                          v1::Tributary::Service>>>>> {
 public:
  explicit TributaryService(ServiceContext& service) : service_(service) {}

  // Requests are v1::GenerateRequest etc., responses the methods' response
  // messages, as bytes.
  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* call,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(
      grpc::CallbackServerContext* call,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetResidualStats(
      grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
      grpc::ByteBuffer* response) override;

 private:
  // Auth and request id; an error to finish the call with, or OK.
  grpc::Status Admit(grpc::CallbackServerContext* call) const;
  // Admit, parse the request, answer it, serialize the response, finish.
  template <typename Request, typename Response, typename Answer>
  grpc::ServerUnaryReactor* Inline(grpc::CallbackServerContext* call,
                                   const grpc::ByteBuffer* request_bytes,
                                   grpc::ByteBuffer* response_bytes,
                                   Answer answer);

  grpc::Status AnswerTokenize(const v1::TokenizeRequest& request,
                              v1::TokenizeResponse* response) const;
  grpc::Status AnswerGetResidualStats(
      const v1::GetResidualStatsRequest& request,
      v1::ResidualStats* response) const;

  ServiceContext& service_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_TRIBUTARY_SERVICE_H_
