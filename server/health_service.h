// The standard gRPC health service (grpc.health.v1.Health: Check and
// Watch), served from the generated code of proto/grpc/health/v1/
// health.proto rather than by gRPC's built-in one, so that server
// reflection can describe it (the built-in service has no descriptor:
// `grpcurl … grpc.health.v1.Health/Check` failed without -proto).
//
// It is a grpc::HealthCheckServiceInterface, driven by HealthMonitor as the
// built-in one was: the statuses of "" (the whole server) and of each named
// service. Check of an unknown name is NOT_FOUND; Watch sends the current
// status at once (SERVICE_UNKNOWN for an unknown name) and then every
// change, until the client cancels or Shutdown() ends it. Exempt from the
// bearer token, as load balancers' probes are.
#ifndef TRIBUTARY_SERVER_HEALTH_SERVICE_H_
#define TRIBUTARY_SERVER_HEALTH_SERVICE_H_

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace tributary {

class HealthService final : public grpc::health::v1::Health::CallbackService,
                            public grpc::HealthCheckServiceInterface {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService();
  ~HealthService() override;  // after Shutdown() and the server's end

  // grpc::HealthCheckServiceInterface (thread-safe).
  void SetServingStatus(const std::string& service_name, bool serving) override;
  void SetServingStatus(bool serving) override;
  // Every status NOT_SERVING from now on, sent to every watcher, whose
  // calls then end OK: a server's Shutdown does not wait for them.
  void Shutdown() override;

  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  // The status `name` has now (SERVICE_UNKNOWN if none); under mu_.
  ServingStatus StatusOf(const std::string& name) const;
  void Set(const std::string& name, ServingStatus status);  // under mu_
  void Notify();  // sends the watchers their service's status; not under mu_

  std::mutex mu_;
  std::map<std::string, ServingStatus> statuses_;
  std::set<Watcher*> watchers_;
  bool shut_down_ = false;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HEALTH_SERVICE_H_
