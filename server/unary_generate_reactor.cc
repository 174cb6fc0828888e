#include "server/unary_generate_reactor.h"

#include <utility>

#include "server/message_bytes.h"
#include "server/status_conversion.h"

namespace tributary {

// Owned by the engine until the final event; then it finishes the call and
// never touches the reactor again (the reactor may be deleted right after).
class UnaryGenerateReactor::Sink : public TokenSink {
 public:
  explicit Sink(UnaryGenerateReactor* reactor) : reactor_(reactor) {}
  void OnEvent(const TokenEvent& event) override {
    UnaryGenerateReactor* r = reactor_;
    r->record_.OnEvent(event);
    r->service_.converter->AppendEvent(event, r->options_, &r->response_);
    if (event.is_final) {
      reactor_ = nullptr;
      // The finish (gRPC work), the log line and the metrics run on the
      // pump thread, off the engine's step; the reactor lives until its
      // OnDone, which only follows that Finish.
      r->service_.pump->Post(
          [r, status = FinalStatus(event, *r->call_), e = event] {
            r->FinishWith(status, &e);
          });
    }
  }

 private:
  UnaryGenerateReactor* reactor_;
};

UnaryGenerateReactor::UnaryGenerateReactor(ServiceContext& service,
                                           grpc::CallbackServerContext* call,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response)
    : service_(service),
      call_(call),
      response_bytes_(response),
      record_(service, "Generate") {
  absl::StatusOr<std::string> id = service.RequestId(call);
  if (!id.ok()) {
    FinishWith(ToGrpcStatus(id.status()), nullptr);
    return;
  }
  record_.set_request_id(*id);
  if (grpc::Status auth = service.CheckAuth(*call); !auth.ok()) {
    FinishWith(auth, nullptr);
    return;
  }
  if (service.draining.load()) {
    FinishWith(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the server is draining"),
               nullptr);
    return;
  }
  v1::GenerateRequest parsed;
  if (grpc::Status s = ParseRequest(*request, &parsed); !s.ok()) {
    FinishWith(s, nullptr);
    return;
  }
  options_ = parsed.response();
  absl::StatusOr<GenerateRequest> converted =
      service.converter->ToEngine(parsed);
  if (!converted.ok()) {
    FinishWith(ToGrpcStatus(converted.status()), nullptr);
    return;
  }
  absl::StatusOr<uint64_t> engine_id = service.engine->Submit(
      *std::move(converted), std::make_shared<Sink>(this));
  if (!engine_id.ok()) {
    // On error the engine never calls the sink.
    FinishWith(ToGrpcStatus(WithProtoFieldName(engine_id.status())), nullptr);
    return;
  }
  // The final event may have arrived (and the reactor be finished) already;
  // the engine ignores a cancel of a finished id, and the reactor is not
  // deleted before OnDone, which needs this constructor to return first.
  engine_id_.store(*engine_id);
  if (cancelled_.load()) service.engine->Cancel(*engine_id);
}

void UnaryGenerateReactor::OnCancel() {
  cancelled_.store(true);
  const uint64_t id = engine_id_.load();
  if (id != 0) service_.engine->Cancel(id);
}

void UnaryGenerateReactor::FinishWith(grpc::Status status,
                                      const TokenEvent* final_event) {
  // gRPC sends the response only with an OK status.
  if (status.ok()) status = SerializeResponse(response_, response_bytes_);
  record_.Finish(status, final_event);
  Finish(status);
}

}  // namespace tributary
