#include "server/health_monitor.h"

#include <utility>

#include "base/logging.h"

namespace tributary {

const char* HealthMonitor::kServiceName = "tributary.v1.Tributary";

const char* HealthStateName(HealthMonitor::State state) {
  switch (state) {
    case HealthMonitor::State::kServing: return "serving";
    case HealthMonitor::State::kStalled: return "stalled";
    case HealthMonitor::State::kFailed: return "failed";
    case HealthMonitor::State::kDraining: return "draining";
  }
  return "unknown";
}

HealthMonitor::State HealthMonitor::Tracker::Evaluate(
    const Engine::Counts& counts, absl::Time now,
    absl::Duration liveness_timeout, bool draining) {
  if (counts.failed) return State::kFailed;
  // Idle, or a step finished since the last look: progress.
  if (counts.num_active == 0 || counts.num_steps != last_steps) {
    last_steps = counts.num_steps;
    last_progress = now;
  }
  if (draining) return State::kDraining;
  return now - last_progress >= liveness_timeout ? State::kStalled
                                                 : State::kServing;
}

HealthMonitor::HealthMonitor(std::function<Engine::Counts()> counts,
                             absl::Duration liveness_timeout,
                             absl::Duration poll_period)
    : counts_(std::move(counts)),
      liveness_timeout_(liveness_timeout),
      poll_period_(poll_period) {}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::AddService(grpc::HealthCheckServiceInterface* service) {
  std::lock_guard<std::mutex> lock(mu_);
  services_.push_back(service);
  const bool serving = state_ == State::kServing;
  service->SetServingStatus(serving);
  service->SetServingStatus(kServiceName, serving);
}

void HealthMonitor::OnFailure(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mu_);
  on_failure_ = std::move(callback);
}

void HealthMonitor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  tracker_.last_progress = absl::Now();
  thread_ = std::thread([this] { Run(); });
}

void HealthMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::SetDraining() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  if (state_ != State::kFailed) Publish(State::kDraining);
}

HealthMonitor::State HealthMonitor::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void HealthMonitor::Publish(State state) {
  if (published_ && state == state_) return;
  if (published_ || state != State::kServing) {
    LogInfo("health: ", HealthStateName(state_), " -> ",
            HealthStateName(state));
  }
  state_ = state;
  published_ = true;
  const bool serving = state == State::kServing;
  for (grpc::HealthCheckServiceInterface* s : services_) {
    s->SetServingStatus(serving);
    s->SetServingStatus(kServiceName, serving);
  }
}

void HealthMonitor::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const Engine::Counts counts = counts_();
    lock.lock();
    const State before = state_;
    // A failure and a drain are final.
    State next = state_ == State::kFailed
                     ? State::kFailed
                     : tracker_.Evaluate(counts, absl::Now(),
                                         liveness_timeout_, draining_);
    Publish(next);
    if (next == State::kFailed && before != State::kFailed && on_failure_) {
      std::function<void()> callback = on_failure_;
      lock.unlock();
      callback();
      lock.lock();
    }
    cv_.wait_for(lock, absl::ToChronoNanoseconds(poll_period_),
                 [this] { return stop_; });
  }
}

}  // namespace tributary
