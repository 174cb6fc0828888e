#include "server/health_service.h"

#include <utility>
#include <vector>

namespace tributary {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call. Its state is under the service's mu_; what a decision
// calls for (a write, the end) runs outside it, since a reaction may run
// inline. A decision to write marks the write in flight, and only the
// write's completion decides again, so the watcher cannot end (and be
// deleted) between a decision and the StartWrite it called for.
class HealthService::Watcher
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  enum class Action { kNone, kWrite, kFinish };

  Watcher(HealthService* service, std::string name)
      : service_(service), name_(std::move(name)) {}

  // Under service_->mu_.
  Action Decide() {
    if (finished_ || in_flight_) return Action::kNone;
    if (cancelled_) {
      finished_ = true;
      finish_status_ = grpc::Status::CANCELLED;
      return Action::kFinish;
    }
    const ServingStatus now = service_->StatusOf(name_);
    if (!has_sent_ || sent_ != now) {
      response_.set_status(now);
      sent_ = now;
      has_sent_ = true;
      in_flight_ = true;
      return Action::kWrite;
    }
    if (service_->shut_down_) {
      finished_ = true;
      finish_status_ = grpc::Status::OK;
      return Action::kFinish;
    }
    return Action::kNone;
  }

  // Not under the lock.
  void Run(Action action) {
    if (action == Action::kWrite) StartWrite(&response_);
    if (action == Action::kFinish) Finish(finish_status_);
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      std::lock_guard<std::mutex> lock(service_->mu_);
      in_flight_ = false;
      if (!ok) cancelled_ = true;
      action = Decide();
    }
    Run(action);
  }

  void OnCancel() override {
    Action action;
    {
      std::lock_guard<std::mutex> lock(service_->mu_);
      cancelled_ = true;
      action = Decide();
    }
    Run(action);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(service_->mu_);
      service_->watchers_.erase(this);
    }
    delete this;
  }

 private:
  HealthService* service_;
  const std::string name_;
  HealthCheckResponse response_;  // the write in flight, if any
  ServingStatus sent_ = HealthCheckResponse::UNKNOWN;
  bool has_sent_ = false;
  bool in_flight_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  grpc::Status finish_status_;
};

// "" is the whole server, as in gRPC's built-in service.
HealthService::HealthService() {
  statuses_[""] = HealthCheckResponse::NOT_SERVING;
}
HealthService::~HealthService() = default;

HealthService::ServingStatus HealthService::StatusOf(
    const std::string& name) const {
  auto it = statuses_.find(name);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                               : it->second;
}

void HealthService::Set(const std::string& name, ServingStatus status) {
  if (shut_down_) return;  // NOT_SERVING for good
  statuses_[name] = status;
}

void HealthService::SetServingStatus(const std::string& service_name,
                                     bool serving) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Set(service_name, serving ? HealthCheckResponse::SERVING
                              : HealthCheckResponse::NOT_SERVING);
  }
  Notify();
}

void HealthService::SetServingStatus(bool serving) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, status] : statuses_) {
      Set(name, serving ? HealthCheckResponse::SERVING
                        : HealthCheckResponse::NOT_SERVING);
    }
  }
  Notify();
}

void HealthService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, status] : statuses_) {
      status = HealthCheckResponse::NOT_SERVING;
    }
    shut_down_ = true;
  }
  Notify();
}

void HealthService::Notify() {
  std::vector<std::pair<Watcher*, Watcher::Action>> actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Watcher* w : watchers_) {
      const Watcher::Action a = w->Decide();
      if (a != Watcher::Action::kNone) actions.emplace_back(w, a);
    }
  }
  for (auto& [w, a] : actions) w->Run(a);
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServingStatus status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = StatusOf(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "unknown service \"" +
                                     request->service().substr(0, 64) + "\""));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  Watcher::Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchers_.insert(watcher);
    action = watcher->Decide();
  }
  watcher->Run(action);
  return watcher;
}

}  // namespace tributary
