// The serving status behind grpc.health.v1 (design.md §5), on every health
// service it is given (the API server's and the plaintext health-only
// server's), for the whole server ("") and "tributary.v1.Tributary":
//   SERVING       the model is loaded and the engine makes progress;
//   NOT_SERVING   draining (SIGTERM), or the engine failed, or work has been
//                 pending with no finished step for liveness_timeout (a hung
//                 step): Kubernetes' liveness probe then restarts the pod.
// A stall that ends (a step finishes) returns to SERVING; a failure or a
// drain is final. A thread polls the engine's published counts; the policy
// itself (Evaluate) is a pure function of the samples, for tests.
#ifndef TRIBUTARY_SERVER_HEALTH_MONITOR_H_
#define TRIBUTARY_SERVER_HEALTH_MONITOR_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "grpcpp/health_check_service_interface.h"

namespace tributary {

class HealthMonitor {
 public:
  enum class State { kServing, kStalled, kFailed, kDraining };

  // The policy: the state after observing `counts` at `now`, given the time
  // of the last observed progress (updated in place).
  struct Tracker {
    int64_t last_steps = -1;
    absl::Time last_progress;
    State Evaluate(const Engine::Counts& counts, absl::Time now,
                   absl::Duration liveness_timeout, bool draining);
  };

  HealthMonitor(std::function<Engine::Counts()> counts,
                absl::Duration liveness_timeout,
                absl::Duration poll_period = absl::Milliseconds(250));
  ~HealthMonitor();  // stops the thread

  // Not owned; must outlive the monitor (or Stop() first).
  void AddService(grpc::HealthCheckServiceInterface* service);
  void Start();
  void Stop();
  // NOT_SERVING from now on.
  void SetDraining();
  State state() const;
  // Called once (on the monitor thread) when the engine is found failed.
  void OnFailure(std::function<void()> callback);

  static const char* kServiceName;  // "tributary.v1.Tributary"

 private:
  void Run();
  void Publish(State state);  // under mu_

  std::function<Engine::Counts()> counts_;
  absl::Duration liveness_timeout_;
  absl::Duration poll_period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<grpc::HealthCheckServiceInterface*> services_;
  Tracker tracker_;
  State state_ = State::kServing;
  bool published_ = false;
  bool draining_ = false;
  bool stop_ = false;
  std::function<void()> on_failure_;
  std::thread thread_;
};

const char* HealthStateName(HealthMonitor::State state);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HEALTH_MONITOR_H_
