#include "server/server.h"

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/model/stop_tokens.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"

namespace tributary {
namespace {

// The project's version (CMake's project(VERSION)).
constexpr const char* kVersion = TRIBUTARY_VERSION;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Basename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

// The engine's observer: metrics and the residual window.
class Server::Observer : public EngineObserver {
 public:
  Observer(ServerMetrics* metrics, ResidualWindow* window)
      : metrics_(metrics), window_(window) {}
  // Only before the first request (no step runs before one).
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }
  void OnStep(const StepStats& stats) override {
    if (metrics_ != nullptr) metrics_->OnStep(stats);
  }
  // The model's health only: tokens of requests that change the stream are
  // counted, not summed (EngineObserver::OnResidualStats).
  void OnResidualStats(const ResidualSummary& step,
                       int64_t num_intervened_tokens) override {
    if (metrics_ != nullptr) metrics_->OnResidualStats(step, num_intervened_tokens);
    if (window_ != nullptr) window_->Add(step, absl::Now());
  }

 private:
  ServerMetrics* metrics_;
  ResidualWindow* window_;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerConfig config) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<Server> server(new Server());
  RETURN_IF_ERROR(server->Init(std::move(config)));
  return server;
}

absl::Status Server::Init(ServerConfig config) {
  config_ = std::move(config);
  const absl::Time load_start = absl::Now();
  const bool synthetic = !config_.synthetic_model.empty();
  LogInfo("loading model ",
          synthetic ? "synthetic:" + config_.synthetic_model
                    : "from " + config_.model_dir,
          " ...");
  absl::StatusOr<ModelDirectory> model =
      synthetic ? ModelDirectory::Synthetic(config_.synthetic_model)
                : ModelDirectory::Load(config_.model_dir);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("loading the model: ",
                                     model.status().message()));
  }
  model_.emplace(*std::move(model));
  for (const std::string& w : model_->warnings()) LogWarning(w);
  const ModelConfig& mc = model_->config();
  if (std::ifstream(model_->dir() + "/tokenizer.json").good()) {
    ASSIGN_OR_RETURN(tokenizer_, Tokenizer::Load(model_->dir()));
  } else {
    LogWarning("no tokenizer.json in ", model_->dir(),
               ": prompts must be token ids, responses carry no text");
  }
  LogInfo("model loaded: ", Basename(model_->dir()), ", ",
          mc.num_hidden_layers, " layers, hidden ", mc.hidden_size, ", vocab ",
          mc.vocab_size, " (", absl::FormatDuration(absl::Now() - load_start),
          ")");

  if (!config_.steering_vectors_file.empty()) {
    ASSIGN_OR_RETURN(vectors_, VectorLibrary::Load(config_.steering_vectors_file,
                                                   mc.hidden_size));
    LogInfo("steering vectors from ", config_.steering_vectors_file, ": ",
            absl::StrJoin(vectors_.names(), ", "));
  }
  if (config_.residual_stats) {
    ResidualWindowOptions window;
    window.num_layers = static_cast<int>(mc.num_hidden_layers);
    window.max_window = config_.residual_window;
    ASSIGN_OR_RETURN(residual_window_, ResidualWindow::Create(window));
  }

  EngineOptions eo;
  eo.model = &*model_;
  eo.tokenizer = tokenizer_.get();
  eo.backend = config_.backend;
  eo.device_sampling = config_.device_sampling
                           ? EngineOptions::DeviceSampling::kAuto
                           : EngineOptions::DeviceSampling::kOff;
  eo.synthetic_seed = config_.synthetic_seed;
  eo.engine_cpus = config_.engine_cpus;
  eo.scheduler.max_running_sequences = config_.max_running;
  eo.scheduler.max_tokens_per_step = config_.max_tokens_per_step;
  eo.scheduler.max_waiting = config_.max_waiting;
  eo.scheduler.max_sequence_tokens = int64_t{1} << 30;  // the model's, capped
  eo.cache_memory_budget_bytes = config_.cache_mib << 20;
  eo.max_new_tokens_limit = config_.max_new_tokens;
  eo.residual_stats = config_.residual_stats;
  eo.fault_hook = config_.engine_fault_hook;
  // The metrics need the engine (its counts) and the engine its observer:
  // the observer forwards to metrics that are created right after.
  observer_ = std::make_unique<Observer>(nullptr, residual_window_.get());
  eo.observer = observer_.get();
  ASSIGN_OR_RETURN(engine_, Engine::Create(eo));
  Engine* engine = engine_.get();
  if (config_.metrics_port >= 0) {
    ServerMetricsOptions mo;
    mo.version = kVersion;
    mo.backend = engine->backend_name();
    mo.model = Basename(model_->dir());
    mo.config = &mc;
    mo.capacity = engine->capacity();
    mo.counts = [engine] { return engine->counts(); };
    metrics_ = std::make_unique<ServerMetrics>(mo);
    observer_->set_metrics(metrics_.get());
  }

  ConversionLimits limits;
  const int64_t context = engine->capacity().max_sequence_tokens;
  limits.max_prompt_tokens =
      config_.max_prompt_tokens > 0
          ? std::min(config_.max_prompt_tokens, context - 1)
          : context - 1;
  limits.max_new_tokens = config_.max_new_tokens;
  converter_ = std::make_unique<RequestConverter>(mc, tokenizer_.get(), limits,
                                                  &vectors_);
  service_context_.engine = engine;
  service_context_.converter = converter_.get();
  service_context_.config = &config_;
  service_context_.metrics = metrics_.get();
  service_context_.residual_window = residual_window_.get();
  pump_ = std::make_unique<ResponsePump>();
  service_context_.pump = pump_.get();
  BuildModelInfo();
  service_context_.model_info.set_max_prompt_tokens(
      static_cast<int32_t>(limits.max_prompt_tokens));
  service_ = std::make_unique<TributaryService>(service_context_);

  health_ = std::make_unique<HealthMonitor>(
      [engine] { return engine->counts(); }, config_.liveness_timeout);
  RETURN_IF_ERROR(StartApiServer());
  RETURN_IF_ERROR(StartHealthServer());
  RETURN_IF_ERROR(StartMetrics());
  RETURN_IF_ERROR(StartHttpApi());
  health_->OnFailure([this] {
    RequestStop(absl::UnavailableError(
        "the engine failed (see the log): exiting so that the pod restarts"));
  });
  health_->Start();
  return absl::OkStatus();
}

void Server::BuildModelInfo() {
  const ModelConfig& mc = model_->config();
  const Engine::Capacity& cap = engine_->capacity();
  v1::ModelInfo& info = service_context_.model_info;
  info.set_model_name(Basename(model_->dir()));
  info.set_model_type(mc.model_type);
  info.set_backend(engine_->backend_name());
  info.set_server_version(kVersion);
  info.set_num_layers(static_cast<int32_t>(mc.num_hidden_layers));
  for (LayerKind kind : mc.layer_types) {
    info.add_layer_types(std::string(LayerKindName(kind)));
  }
  info.set_hidden_size(static_cast<int32_t>(mc.hidden_size));
  info.set_vocab_size(static_cast<int32_t>(mc.vocab_size));
  info.set_context_tokens(static_cast<int32_t>(cap.max_sequence_tokens));
  for (int64_t id : model_->stop_tokens().token_ids) {
    info.add_eos_token_ids(static_cast<int32_t>(id));
  }
  if (model_->stop_tokens().token_ids.empty() && tokenizer_ != nullptr) {
    if (auto id = tokenizer_->TokenToId(model_->stop_tokens().eos_token_text)) {
      info.add_eos_token_ids(*id);
    }
  }
  info.set_has_tokenizer(tokenizer_ != nullptr);
  info.set_num_kv_blocks(cap.num_kv_blocks);
  info.set_kv_block_tokens(static_cast<int32_t>(cap.kv_block_size));
  info.set_kv_block_bytes(cap.kv_block_bytes);
  info.set_num_state_slots(cap.num_state_slots);
  info.set_state_slot_bytes(cap.state_slot_bytes);
  info.set_max_new_tokens(config_.max_new_tokens);
  info.set_max_waiting_requests(static_cast<int32_t>(config_.max_waiting));
  info.set_residual_stats_enabled(config_.residual_stats);
  info.set_residual_max_window_seconds(
      absl::ToDoubleSeconds(config_.residual_window));
  for (const std::string& name : vectors_.names()) {
    info.add_steering_vector_names(name);
  }
}

absl::Status Server::StartApiServer() {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (!config_.tls_cert_file.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        config_.tls_client_ca_file.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.private_key, ReadFile(config_.tls_key_file));
    ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(config_.tls_cert_file));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    if (!config_.tls_client_ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(config_.tls_client_ca_file));
    }
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  // Health and reflection are our own services (health_service.h,
  // reflection_service.h): reflection can describe health, and requires
  // the bearer token, which health does not.
  api_health_ = std::make_unique<HealthService>();
  api_reflection_ = std::make_unique<ReflectionService>(
      service_context_,
      std::vector<std::string>{
          v1::Tributary::service_full_name(),
          grpc::health::v1::Health::service_full_name(),
          grpc::reflection::v1alpha::ServerReflection::service_full_name()});
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config_.host, ":", config_.api_port);
  builder.AddListeningPort(address, creds, &api_port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             config_.max_concurrent_streams);
  builder.RegisterService(service_.get());
  builder.RegisterService(api_health_.get());
  builder.RegisterService(api_reflection_.get());
  api_server_ = builder.BuildAndStart();
  if (api_server_ == nullptr || api_port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, " (port in use?)"));
  }
  health_->AddService(api_health_.get());
  LogInfo("gRPC API listening on ", config_.host, ":", api_port_,
          config_.tls_cert_file.empty() ? " (plaintext)"
          : config_.tls_client_ca_file.empty() ? " (TLS)"
                                               : " (mutual TLS)",
          config_.auth_token.empty() ? "" : ", bearer token required");
  return absl::OkStatus();
}

absl::Status Server::StartHealthServer() {
  if (config_.health_port < 0) return absl::OkStatus();
  grpc::ServerBuilder builder;
  const std::string address =
      absl::StrCat(config_.host, ":", config_.health_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(),
                           &health_port_);
  port_health_ = std::make_unique<HealthService>();
  builder.RegisterService(port_health_.get());
  // Reflection here too, as on the API port and with the same token: it
  // describes the API (any symbol), it does not serve it.
  port_reflection_ = std::make_unique<ReflectionService>(
      service_context_,
      std::vector<std::string>{
          grpc::health::v1::Health::service_full_name(),
          grpc::reflection::v1alpha::ServerReflection::service_full_name()});
  builder.RegisterService(port_reflection_.get());
  health_server_ = builder.BuildAndStart();
  if (health_server_ == nullptr || health_port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, " (port in use?)"));
  }
  health_->AddService(port_health_.get());
  LogInfo("gRPC health listening on ", config_.host, ":", health_port_,
          " (plaintext, health only)");
  return absl::OkStatus();
}

absl::Status Server::StartMetrics() {
  if (config_.metrics_port < 0 || metrics_ == nullptr) return absl::OkStatus();
  const std::string address =
      absl::StrCat(config_.host, ":", config_.metrics_port);
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", e.what()));
  }
  for (const auto& collectable : metrics_->collectables()) {
    exposer_->RegisterCollectable(collectable);
  }
  const std::vector<int> ports = exposer_->GetListeningPorts();
  metrics_port_ = ports.empty() ? config_.metrics_port : ports.front();
  LogInfo("metrics listening on http://", config_.host, ":", metrics_port_,
          "/metrics");
  return absl::OkStatus();
}

absl::Status Server::StartHttpApi() {
  if (config_.http_port < 0) return absl::OkStatus();
  // The API port's TLS, mutual TLS and bearer token apply here too.
  ASSIGN_OR_RETURN(http_, HttpApiServer::Start(
                              service_context_,
                              config_.served_model_name.empty()
                                  ? Basename(model_->dir())
                                  : config_.served_model_name));
  return absl::OkStatus();
}

int Server::http_port() const { return http_ != nullptr ? http_->port() : -1; }

void Server::RequestStop(absl::Status reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_reason_) stop_reason_ = std::move(reason);
  }
  cv_.notify_all();
}

absl::Status Server::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_reason_.has_value(); });
  return *stop_reason_;
}

void Server::Drain(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (drained_) return;
    drained_ = true;
  }
  LogInfo("draining: health NOT_SERVING, new requests UNAVAILABLE, ",
          absl::FormatDuration(grace), " for the work in flight");
  if (health_ != nullptr) health_->SetDraining();
  service_context_.draining.store(true);
  if (engine_ != nullptr) engine_->Shutdown(absl::Now() + grace);
  // Every generation has its final event now; what is left are writes to
  // clients that do not read.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  // Health watchers see NOT_SERVING (above) and then their calls end, so
  // the servers' shutdown does not wait for them.
  if (api_health_ != nullptr) api_health_->Shutdown();
  if (port_health_ != nullptr) port_health_->Shutdown();
  if (api_server_ != nullptr) api_server_->Shutdown(absl::ToChronoTime(deadline));
  if (health_server_ != nullptr) {
    health_server_->Shutdown(absl::ToChronoTime(deadline));
  }
  // Every HTTP generation has its final event: the connection threads end.
  if (http_ != nullptr) http_->Stop();
  if (health_ != nullptr) health_->Stop();
  exposer_.reset();
  LogInfo("drained");
}

Server::~Server() {
  Drain(absl::ZeroDuration());
  if (api_server_ != nullptr) api_server_->Wait();
  if (health_server_ != nullptr) health_server_->Wait();
  // Run what is still queued (log lines, metrics) while everything it
  // touches is alive.
  pump_.reset();
}

}  // namespace tributary
