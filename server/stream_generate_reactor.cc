#include "server/stream_generate_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "server/message_bytes.h"
#include "server/slow_reader_policy.h"
#include "server/status_conversion.h"

namespace tributary {

// Owned by the engine until the final event; shares the reactor's
// ownership, so every call finds it alive.
class StreamGenerateReactor::Sink : public TokenSink {
 public:
  explicit Sink(std::shared_ptr<StreamGenerateReactor> reactor)
      : r_(std::move(reactor)) {}

  void OnEvent(const TokenEvent& event) override {
    StreamGenerateReactor* r = r_.get();
    r->record_.OnEvent(event);
    std::optional<TokenEvent> final_event;
    bool cut_off_now = false;
    Action action = Action::kNone;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(r->mu_);
      const SlowReaderPolicy& policy = r->service_.config->slow_readers;
      if (!r->client_gone_) {
        r->service_.converter->AppendEvent(event, r->options_, &r->pending_);
        r->has_pending_ = true;
        if (event.has_token) ++r->pending_tokens_;
        if (!event.is_final &&
            policy.CutsOff(r->pending_tokens_,
                           r->write_in_flight_
                               ? std::optional<absl::Time>(r->write_started_)
                               : std::nullopt,
                           absl::Now())) {
          r->client_gone_ = true;
          r->cut_off_ = true;
          cut_off_now = true;
        }
      }
      if (event.is_final) {
        r->final_status_ =
            r->cut_off_ ? grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                       policy.Message())
                        : FinalStatus(event, *r->call_);
        final_event = event;
      }
      action = r->Decide(&status);
    }
    if (cut_off_now) r->service_.engine->Cancel(event.request_id);
    // gRPC calls, the log line and the metrics run on the pump thread, off
    // the engine's step.
    if (final_event) {
      r->service_.pump->Post([r = r_, e = *std::move(final_event)] {
        r->record_.Finish(*r->final_status_, &e);
      });
    }
    r->Post(r_, action, status);
  }

 private:
  std::shared_ptr<StreamGenerateReactor> r_;
};

StreamGenerateReactor::StreamGenerateReactor(ServiceContext& service,
                                             grpc::CallbackServerContext* call)
    : service_(service), call_(call), record_(service, "GenerateStream") {}

StreamGenerateReactor* StreamGenerateReactor::Start(
    ServiceContext& service, grpc::CallbackServerContext* call,
    const grpc::ByteBuffer* request) {
  std::shared_ptr<StreamGenerateReactor> r(
      new StreamGenerateReactor(service, call));
  r->self_ = r;
  if (grpc::Status s = r->Submit(request); !s.ok()) r->FinishEarly(s);
  return r.get();
}

grpc::Status StreamGenerateReactor::Submit(const grpc::ByteBuffer* request) {
  absl::StatusOr<std::string> id = service_.RequestId(call_);
  if (!id.ok()) return ToGrpcStatus(id.status());
  record_.set_request_id(*id);
  if (grpc::Status auth = service_.CheckAuth(*call_); !auth.ok()) return auth;
  if (service_.draining.load()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is draining");
  }
  v1::GenerateRequest parsed;
  if (grpc::Status s = ParseRequest(*request, &parsed); !s.ok()) return s;
  // Read by the sink, which exists only from the engine's Submit on.
  options_ = parsed.response();
  absl::StatusOr<GenerateRequest> converted =
      service_.converter->ToEngine(parsed);
  if (!converted.ok()) return ToGrpcStatus(converted.status());
  absl::StatusOr<uint64_t> engine_id = service_.engine->Submit(
      *std::move(converted), std::make_shared<Sink>(self_));
  if (!engine_id.ok()) {
    return ToGrpcStatus(WithProtoFieldName(engine_id.status()));
  }
  // OnDone cannot run before the constructor returns (gRPC binds the
  // reactor after the handler returns), so `this` is valid here even if
  // the final event came already.
  engine_id_.store(*engine_id);
  if (cancelled_.load()) service_.engine->Cancel(*engine_id);
  return grpc::Status::OK;
}

void StreamGenerateReactor::FinishEarly(const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_started_ = true;
    final_status_ = status;
  }
  record_.Finish(status, nullptr);
  Finish(status);
}

StreamGenerateReactor::Action StreamGenerateReactor::Decide(
    grpc::Status* status) {
  if (finish_started_ || !final_status_) {
    // Before the final event only writes are due.
    if (finish_started_ || write_in_flight_ || !has_pending_ || client_gone_) {
      return Action::kNone;
    }
  } else {
    // After the final event: finish when nothing more will be written. A
    // cut-off client is finished even with its write still pending (it
    // may never read it); an error ends the stream without the partial
    // message.
    const bool nothing_to_write =
        !has_pending_ || client_gone_ || !final_status_->ok();
    if (cut_off_ || (!write_in_flight_ && nothing_to_write)) {
      finish_started_ = true;
      *status = *final_status_;
      return Action::kFinish;
    }
    if (write_in_flight_) return Action::kNone;
  }
  in_flight_.Swap(&pending_);
  pending_.Clear();
  has_pending_ = false;
  pending_tokens_ = 0;
  write_in_flight_ = true;
  write_started_ = absl::Now();
  return Action::kWrite;
}

void StreamGenerateReactor::Post(
    const std::shared_ptr<StreamGenerateReactor>& self, Action action,
    const grpc::Status& status) {
  if (action == Action::kNone) return;
  // Every gRPC call goes through the one pump, in the order decided, so a
  // write never starts after the finish.
  service_.pump->Post([self, action, status] { self->Perform(action, status); });
}

void StreamGenerateReactor::Perform(Action action, const grpc::Status& status) {
  if (action == Action::kWrite) {
    // in_flight_ is not touched by Decide until OnWriteDone.
    if (grpc::Status s = SerializeResponse(in_flight_, &in_flight_bytes_);
        !s.ok()) {
      // Only past 2 GiB, which max_message_bytes forbids: end the stream
      // as a write gRPC refused as too large would.
      LogError("GenerateStream: ", s.error_message());
      OnWriteDone(false);
      return;
    }
    StartWrite(&in_flight_bytes_);
  } else if (action == Action::kFinish) {
    Finish(status);
  }
}

void StreamGenerateReactor::Pump() {
  grpc::Status status;
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    action = Decide(&status);
  }
  // Called on gRPC's threads before OnDone, while self_ is set.
  Post(self_, action, status);
}

void StreamGenerateReactor::OnWriteDone(bool ok) {
  bool cancel = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_in_flight_ = false;
    if (!ok && !client_gone_) {
      client_gone_ = true;
      cancel = !final_status_;
    }
  }
  // The stream broke (the client went away): stop generating.
  if (cancel) {
    const uint64_t id = engine_id_.load();
    if (id != 0) service_.engine->Cancel(id);
  }
  Pump();
}

void StreamGenerateReactor::OnCancel() {
  cancelled_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    client_gone_ = true;
  }
  const uint64_t id = engine_id_.load();
  if (id != 0) service_.engine->Cancel(id);
}

void StreamGenerateReactor::OnDone() {
  // The last owners may be the sink (until the engine drops it) and queued
  // pump tasks; gRPC is done with the reactor.
  std::shared_ptr<StreamGenerateReactor> last = std::move(self_);
}

}  // namespace tributary
