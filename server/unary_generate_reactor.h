// Generate (unary): parse and validate the request, submit it to the engine
// with a sink that accumulates the events into the response, and finish the
// call on the final event, with the response serialized. Client
// cancellation and deadlines reach Engine::Cancel through OnCancel.
// Deletes itself in OnDone.
#ifndef TRIBUTARY_SERVER_UNARY_GENERATE_REACTOR_H_
#define TRIBUTARY_SERVER_UNARY_GENERATE_REACTOR_H_

#include <atomic>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "server/service_context.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

class UnaryGenerateReactor final : public grpc::ServerUnaryReactor {
 public:
  // Starts the work; the reactor finishes itself (possibly before this
  // returns, with an error).
  // `request`: a v1::GenerateRequest's bytes (read in the constructor
  // only); `response` receives the v1::GenerateResponse's (gRPC's, alive
  // until OnDone).
  UnaryGenerateReactor(ServiceContext& service,
                       grpc::CallbackServerContext* call,
                       const grpc::ByteBuffer* request,
                       grpc::ByteBuffer* response);

  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  class Sink;
  void FinishWith(grpc::Status status, const TokenEvent* final_event);

  ServiceContext& service_;
  grpc::CallbackServerContext* call_;
  v1::ResponseOptions options_;
  v1::GenerateResponse response_;
  grpc::ByteBuffer* response_bytes_;
  GenerationRecord record_;
  // 0 until Submit returned; Cancel before that is remembered in cancelled_.
  std::atomic<uint64_t> engine_id_{0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_UNARY_GENERATE_REACTOR_H_
