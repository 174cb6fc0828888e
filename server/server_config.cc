#include "server/server_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "base/cli.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

absl::Status CheckPort(const char* flag, int port, bool may_be_off) {
  if (port == -1 && may_be_off) return absl::OkStatus();
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in [0, 65535]",
                     may_be_off ? " or -1 (off)" : "", ", got ", port));
  }
  return absl::OkStatus();
}

absl::Status CheckReadable(const char* flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": cannot read ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> GetSeconds(const CliArgs& args,
                                          const std::string& flag,
                                          absl::Duration fallback,
                                          long long max_seconds) {
  ASSIGN_OR_RETURN(long long s,
                   args.GetInt(flag, absl::ToInt64Seconds(fallback), 0,
                               max_seconds));
  return absl::Seconds(s);
}

}  // namespace

const char* ServerUsage() {
  return R"(tributary-server: serves text generation over gRPC (design.md §5).

  --model DIR                 model directory (else $TRIBUTARY_MODEL, the
                              installed default model, models/tiny-shakespeare)
  --synthetic PRESET          instead: random weights of a published shape,
                              made on the backend (qwen3.5-27b, -9b, -4b, -2b,
                              -0.8b, tiny); token-id prompts only
  --synthetic-seed N          the synthetic weights' seed (1)
  --backend cpu|cuda          where the model runs (cpu)
  --cuda-device N             the CUDA device (0)
  --no-cuda-graphs            CUDA: decode steps as plain launches, not
                              CUDA graphs
  --cuda-programmatic-launch  CUDA: kernels launched with programmatic
                              dependent launch (off)
  --cuda-tune-gemms           CUDA: batched decode's products on the cuBLAS
                              algorithm measured fastest for each shape,
                              timed once per bucket of token counts, when
                              first met (off)
  --no-device-sampling        CUDA: sampled requests draw on the host from
                              copied logits rows, not on the device
  --threads N                 compute threads (0 = every core)
  --cpu-matmul f32|bf16       CPU: matmul products in f32 (the reference
                              numerics, default) or with inputs rounded to
                              bf16 (AVX512_BF16: up to 2x the throughput of
                              batched steps, GPU-like rounding)
  --engine-cpus LIST          cores for the engine thread, e.g. 0 (default any)
  --host ADDR                 listen address (default 127.0.0.1; 0.0.0.0 in pods)
  --port N                    gRPC API port (default 50051; 0 = any free port)
  --health-port N             plaintext health-only port (50052; -1 = off)
  --metrics-port N            Prometheus /metrics port (9464; -1 = off)
  --http-port N               OpenAI-compatible HTTP API port (8000; -1 = off)
  --http-threads N            HTTP completions answered at once (64)
  --http-max-connections N    HTTP connections open at once; more get 503
                              (1024)
  --http-backlog N            HTTP listen backlog (1024)
  --http-max-head-bytes N     HTTP request line and headers, bytes; more
                              get 431 (32768)
  --http-max-headers N        HTTP headers in one request; more get 431 (100)
  --http-head-timeout S       seconds for a request's head, from its first
                              byte; then 408 (10)
  --http-body-timeout S       seconds for a request's body; then 408 (30)
  --http-idle-timeout S       seconds an idle keep-alive connection stays
                              open (30)
  --served-model-name NAME    the HTTP API's model name (default: the model
                              directory's name)
  --tls-cert FILE --tls-key FILE [--tls-client-ca FILE]
                              TLS on the gRPC and HTTP API ports (mutual TLS
                              with a client CA)
  --auth-token-file FILE      require "authorization: Bearer <token>"
  --max-message-bytes N       largest request or response (4 MiB)
  --max-concurrent-streams N  HTTP/2 streams per connection (256)
  --max-waiting N             requests queued beyond the running places; one
                              more is RESOURCE_EXHAUSTED (256)
  --max-prompt-tokens N       longest prompt (0 = the context)
  --max-new-tokens N          cap of max_new_tokens (4096)
  --max-running N             sequences in one step (64)
  --max-tokens-per-step N     tokens in one step (512)
  --cache-mib N               memory for KV blocks and state slots (256)
  --stream-buffer-tokens N    tokens buffered for a slow streaming client (4096)
  --stream-write-timeout S    seconds one streamed write may wait (30)
  --liveness-timeout S        seconds without a step, work pending, before
                              health turns NOT_SERVING (60)
  --drain-grace S             seconds in-flight work may finish on SIGTERM (30)
  --no-residual-stats         do not compute the residual statistics
  --residual-window S         longest GetResidualStats window (60)
  --steering-vectors FILE     named directions for steering and ablation
                              (safetensors of [hidden_size] vectors)
)";
}

absl::Status ServerConfig::Validate() const {
  if (!synthetic_model.empty() && !model_dir.empty()) {
    return absl::InvalidArgumentError(
        "give --model DIR or --synthetic PRESET, not both");
  }
  RETURN_IF_ERROR(CheckPort("port", api_port, false));
  RETURN_IF_ERROR(CheckPort("health-port", health_port, true));
  RETURN_IF_ERROR(CheckPort("metrics-port", metrics_port, true));
  RETURN_IF_ERROR(CheckPort("http-port", http_port, true));
  if (http_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-threads must be >= 1, got ", http_threads));
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, absl::Duration>{"http-head-timeout", http_head_timeout},
        {"http-body-timeout", http_body_timeout},
        {"http-idle-timeout", http_idle_timeout}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be at least 1 second"));
    }
  }
  if (host.empty()) return absl::InvalidArgumentError("--host is empty");
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  if (!tls_client_ca_file.empty() && tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key");
  }
  RETURN_IF_ERROR(CheckReadable("tls-cert", tls_cert_file));
  RETURN_IF_ERROR(CheckReadable("tls-key", tls_key_file));
  RETURN_IF_ERROR(CheckReadable("tls-client-ca", tls_client_ca_file));
  RETURN_IF_ERROR(CheckReadable("steering-vectors", steering_vectors_file));
  if (max_message_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-message-bytes must be >= 1024, got ", max_message_bytes));
  }
  if (max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-new-tokens must be >= 1, got ", max_new_tokens));
  }
  if (residual_window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--residual-window must be >= 1");
  }
  if (liveness_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--liveness-timeout must be >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerConfig> ParseServerFlags(int argc, const char* const* argv,
                                              bool* help) {
  ASSIGN_OR_RETURN(
      CliArgs args,
      CliArgs::Parse(argc, argv,
                     {"model", "synthetic", "synthetic-seed", "backend",
                      "cuda-device", "threads", "cpu-matmul", "host", "port", "health-port",
                      "metrics-port", "tls-cert", "tls-key", "tls-client-ca",
                      "auth-token-file", "max-message-bytes",
                      "max-concurrent-streams", "max-waiting",
                      "max-prompt-tokens", "max-new-tokens", "max-running",
                      "max-tokens-per-step", "cache-mib",
                      "stream-buffer-tokens", "stream-write-timeout",
                      "liveness-timeout", "drain-grace", "residual-window",
                      "steering-vectors", "engine-cpus", "http-port",
                      "http-threads", "http-max-connections", "http-backlog",
                      "http-max-head-bytes", "http-max-headers",
                      "http-head-timeout", "http-body-timeout",
                      "http-idle-timeout", "served-model-name"},
                     {"help", "no-residual-stats", "no-cuda-graphs",
                      "cuda-programmatic-launch", "cuda-tune-gemms",
                      "no-device-sampling"}));
  *help = args.Has("help");
  for (const std::string& arg : args.positional()) {
    if (arg == "-h") *help = true;  // as every tool's --help
  }
  if (*help) return ServerConfig{};
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args.positional()[0],
                     "\" (see --help)"));
  }
  ServerConfig c;
  c.model_dir = args.GetOr("model", "");
  c.synthetic_model = args.GetOr("synthetic", "");
  ASSIGN_OR_RETURN(long long synthetic_seed,
                   args.GetInt("synthetic-seed", 1, 0, INT64_MAX));
  c.synthetic_seed = static_cast<uint64_t>(synthetic_seed);
  ASSIGN_OR_RETURN(c.backend.kind,
                   ParseBackendKind(args.GetOr("backend", "cpu")));
  ASSIGN_OR_RETURN(long long cuda_device, args.GetInt("cuda-device", 0, 0, 1023));
  c.backend.cuda.device = static_cast<int>(cuda_device);
  c.backend.cuda.graphs = !args.Has("no-cuda-graphs");
  c.backend.cuda.programmatic_launch = args.Has("cuda-programmatic-launch");
  c.backend.cuda.tune_gemms = args.Has("cuda-tune-gemms");
  c.device_sampling = !args.Has("no-device-sampling");
  ASSIGN_OR_RETURN(long long threads, args.GetInt("threads", 0, 0, 1024));
  c.backend.cpu.num_threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(c.backend.cpu.matmul_precision,
                   ParseMatMulPrecision(args.GetOr("cpu-matmul", "f32")));
  if (auto cpus = args.Get("engine-cpus")) {
    for (absl::string_view part : absl::StrSplit(*cpus, ',')) {
      int cpu = -1;
      if (!absl::SimpleAtoi(part, &cpu) || cpu < 0 || cpu > 4095) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--engine-cpus: \"", part, "\" is not a core number"));
      }
      c.engine_cpus.push_back(cpu);
    }
  }
  c.host = args.GetOr("host", c.host);
  ASSIGN_OR_RETURN(long long port, args.GetInt("port", c.api_port, 0, 65535));
  c.api_port = static_cast<int>(port);
  ASSIGN_OR_RETURN(long long health,
                   args.GetInt("health-port", c.health_port, -1, 65535));
  c.health_port = static_cast<int>(health);
  ASSIGN_OR_RETURN(long long metrics,
                   args.GetInt("metrics-port", c.metrics_port, -1, 65535));
  c.metrics_port = static_cast<int>(metrics);
  ASSIGN_OR_RETURN(long long http,
                   args.GetInt("http-port", c.http_port, -1, 65535));
  c.http_port = static_cast<int>(http);
  ASSIGN_OR_RETURN(long long http_threads,
                   args.GetInt("http-threads", c.http_threads, 1, 4096));
  c.http_threads = static_cast<int>(http_threads);
  ASSIGN_OR_RETURN(long long http_connections,
                   args.GetInt("http-max-connections", c.http_max_connections,
                               1, 1 << 20));
  c.http_max_connections = static_cast<int>(http_connections);
  ASSIGN_OR_RETURN(long long http_backlog,
                   args.GetInt("http-backlog", c.http_backlog, 1, 1 << 20));
  c.http_backlog = static_cast<int>(http_backlog);
  ASSIGN_OR_RETURN(c.http_max_head_bytes,
                   args.GetInt("http-max-head-bytes", c.http_max_head_bytes,
                               1024, 64 << 20));
  ASSIGN_OR_RETURN(long long http_headers,
                   args.GetInt("http-max-headers", c.http_max_headers, 1,
                               1 << 20));
  c.http_max_headers = static_cast<int>(http_headers);
  ASSIGN_OR_RETURN(c.http_head_timeout,
                   GetSeconds(args, "http-head-timeout", c.http_head_timeout,
                              86400));
  ASSIGN_OR_RETURN(c.http_body_timeout,
                   GetSeconds(args, "http-body-timeout", c.http_body_timeout,
                              86400));
  ASSIGN_OR_RETURN(c.http_idle_timeout,
                   GetSeconds(args, "http-idle-timeout", c.http_idle_timeout,
                              86400));
  c.served_model_name = args.GetOr("served-model-name", "");
  c.tls_cert_file = args.GetOr("tls-cert", "");
  c.tls_key_file = args.GetOr("tls-key", "");
  c.tls_client_ca_file = args.GetOr("tls-client-ca", "");
  if (auto token_file = args.Get("auth-token-file")) {
    std::ifstream in(*token_file);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-token-file: cannot read ", *token_file));
    }
    std::stringstream text;
    text << in.rdbuf();
    c.auth_token = std::string(absl::StripAsciiWhitespace(text.str()));
    if (c.auth_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-token-file: ", *token_file, " is empty"));
    }
  }
  ASSIGN_OR_RETURN(c.max_message_bytes,
                   args.GetInt("max-message-bytes", c.max_message_bytes, 1024,
                               1LL << 30));
  ASSIGN_OR_RETURN(long long streams,
                   args.GetInt("max-concurrent-streams",
                               c.max_concurrent_streams, 1, 1 << 20));
  c.max_concurrent_streams = static_cast<int>(streams);
  ASSIGN_OR_RETURN(c.max_waiting,
                   args.GetInt("max-waiting", c.max_waiting, 1, 1 << 24));
  ASSIGN_OR_RETURN(c.max_prompt_tokens,
                   args.GetInt("max-prompt-tokens", 0, 0, 1LL << 30));
  ASSIGN_OR_RETURN(long long max_new,
                   args.GetInt("max-new-tokens", c.max_new_tokens, 1,
                               1 << 30));
  c.max_new_tokens = static_cast<int32_t>(max_new);
  ASSIGN_OR_RETURN(c.max_running,
                   args.GetInt("max-running", c.max_running, 1, 1 << 16));
  ASSIGN_OR_RETURN(c.max_tokens_per_step,
                   args.GetInt("max-tokens-per-step", c.max_tokens_per_step, 1,
                               1 << 24));
  ASSIGN_OR_RETURN(c.cache_mib,
                   args.GetInt("cache-mib", c.cache_mib, 1, 1 << 24));
  SlowReaderPolicy& slow = c.slow_readers;
  ASSIGN_OR_RETURN(slow.max_pending_tokens,
                   args.GetInt("stream-buffer-tokens", slow.max_pending_tokens,
                               1, 1 << 24));
  ASSIGN_OR_RETURN(slow.max_write_pending,
                   GetSeconds(args, "stream-write-timeout",
                              slow.max_write_pending, 86400));
  ASSIGN_OR_RETURN(c.liveness_timeout,
                   GetSeconds(args, "liveness-timeout", c.liveness_timeout,
                              86400));
  ASSIGN_OR_RETURN(c.drain_grace,
                   GetSeconds(args, "drain-grace", c.drain_grace, 86400));
  c.residual_stats = !args.Has("no-residual-stats");
  c.steering_vectors_file = args.GetOr("steering-vectors", "");
  ASSIGN_OR_RETURN(c.residual_window,
                   GetSeconds(args, "residual-window", c.residual_window,
                              86400));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tributary
