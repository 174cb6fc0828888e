// tributary-server: the gRPC model server (design.md §5). With no flags it
// serves the embedded default model on localhost: gRPC API 50051, health
// 50052, Prometheus 9464. SIGTERM or SIGINT drains (health NOT_SERVING,
// new requests UNAVAILABLE, work in flight finishes within --drain-grace)
// and exits 0; a model that fails to load, a port in use or an engine
// failure exits 1 with the reason.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/model/model_locator.h"
#include "server/server.h"

namespace tributary {
namespace {

absl::Status Serve(int argc, const char* const* argv, const sigset_t& signals) {
  bool help = false;
  ASSIGN_OR_RETURN(ServerConfig config, ParseServerFlags(argc, argv, &help));
  if (help) {
    std::cout << ServerUsage();
    return absl::OkStatus();
  }
  const char* env = std::getenv("TRIBUTARY_MODEL");
  if (config.synthetic_model.empty()) {
    ASSIGN_OR_RETURN(
        config.model_dir,
        LocateModelDirectory(MakeModelSearch(
            config.model_dir.empty()
                ? std::nullopt
                : std::optional<std::string>(config.model_dir),
            env)));
  }
  const absl::Duration grace = config.drain_grace;
  ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Start(config));

  // Signals are blocked in every thread (main blocked them before any
  // thread existed); this one waits for them synchronously.
  std::thread signal_thread([&server, signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) == 0) {
      LogInfo("received signal ", signal, " (", strsignal(signal), ")");
      server->RequestStop(absl::OkStatus());
    }
  });
  const absl::Status reason = server->Wait();
  server->Drain(reason.ok() ? grace : absl::ZeroDuration());
  // Unblock the signal thread if it still waits.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  server.reset();
  return reason;
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return tributary::RunCliMain("tributary-server", [&] {
    return tributary::Serve(argc, argv, signals);
  });
}
