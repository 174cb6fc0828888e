// GenerateStream: the engine's events become messages, one write in flight
// at a time (design.md §2). Events that arrive while a write is in flight
// are merged into one pending message, so a slow reader costs at most one
// message of buffer per call, not one per token; a reader further behind
// than ServerConfig::slow_readers allows (tokens waiting, or one write
// pending too long: slow_reader_policy.h) is cut off with RESOURCE_EXHAUSTED
// and its sequence is cancelled in the engine (its KV blocks and state slot
// return to the pools). Client cancellation and deadlines reach Engine::Cancel.
//
// Threads: OnEvent runs on the engine thread; OnWriteDone, OnCancel and
// OnDone on gRPC's. The state they share is under mu_, where the next gRPC
// call (a write of the pending message, or the finish) is decided; the call
// itself runs on the ResponsePump thread, all of them in decision order, so
// the engine thread never does gRPC work and no write starts after the
// finish (finish_started_, decided once). Shared ownership keeps the
// reactor alive for the sink and queued pump tasks after OnDone.
#ifndef TRIBUTARY_SERVER_STREAM_GENERATE_REACTOR_H_
#define TRIBUTARY_SERVER_STREAM_GENERATE_REACTOR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/service_context.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

// The messages are v1::GenerateResponse, serialized here (the method is
// registered raw: tributary_service.h).
class StreamGenerateReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Creates the reactor (owned by shared pointers: its own until OnDone,
  // the engine's sink, queued pump tasks), parses, validates and submits
  // `request`, a v1::GenerateRequest's bytes (read before this returns).
  static StreamGenerateReactor* Start(ServiceContext& service,
                                      grpc::CallbackServerContext* call,
                                      const grpc::ByteBuffer* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  StreamGenerateReactor(ServiceContext& service,
                        grpc::CallbackServerContext* call);
  class Sink;
  struct Shared;
  enum class Action { kNone, kWrite, kFinish };
  // Under mu_: what is due next (a write of the pending message or the
  // finish), marked as started. Perform() then calls gRPC outside mu_.
  Action Decide(grpc::Status* status);
  void Perform(Action action, const grpc::Status& status);
  // Queues Perform on the service's ResponsePump.
  void Post(const std::shared_ptr<StreamGenerateReactor>& self, Action action,
            const grpc::Status& status);
  void Pump();  // Decide under mu_, then Perform
  // Parses, validates and submits to the engine; an error is for
  // FinishEarly.
  grpc::Status Submit(const grpc::ByteBuffer* request);
  // Finishes without the engine (validation errors, before any write).
  void FinishEarly(const grpc::Status& status);

  std::shared_ptr<StreamGenerateReactor> self_;  // reset in OnDone
  ServiceContext& service_;
  grpc::CallbackServerContext* call_;
  v1::ResponseOptions options_;
  GenerationRecord record_;
  std::atomic<uint64_t> engine_id_{0};
  std::atomic<bool> cancelled_{false};

  std::mutex mu_;
  v1::GenerateResponse pending_;   // merged events not yet written
  bool has_pending_ = false;
  int64_t pending_tokens_ = 0;
  v1::GenerateResponse in_flight_;    // the message being written
  grpc::ByteBuffer in_flight_bytes_;  // its bytes, gRPC's until OnWriteDone
  bool write_in_flight_ = false;
  absl::Time write_started_;
  // The call's status, set when the engine's final event arrived (or at
  // FinishEarly).
  std::optional<grpc::Status> final_status_;
  bool finish_started_ = false;
  bool client_gone_ = false;  // a write failed or the call was cancelled
  bool cut_off_ = false;      // we gave up on a client that stopped reading
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_STREAM_GENERATE_REACTOR_H_
