// Everything tributary-server is configured with, as one plain struct filled
// from flags once (ParseServerFlags) and validated once (Validate). Defaults
// are design.md §5's: gRPC API on 50051, the plaintext health-only listener
// on 50052, Prometheus on 9464, all on localhost.
#ifndef TRIBUTARY_SERVER_SERVER_CONFIG_H_
#define TRIBUTARY_SERVER_SERVER_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/backend/backend_options.h"
#include "server/slow_reader_policy.h"

namespace tributary {

struct ServerConfig {
  // --- The model ---
  // --model; when empty, $TRIBUTARY_MODEL, then the installed default
  // model, then models/tiny-shakespeare in the source tree.
  std::string model_dir;
  // --synthetic PRESET: a model of a published shape with random weights
  // made on the backend (--synthetic-seed), instead of a directory; it has
  // no tokenizer (token-id prompts) and no stop tokens.
  std::string synthetic_model;
  uint64_t synthetic_seed = 1;
  // Where the model runs (EngineOptions::backend): --backend cpu|cuda;
  // CUDA: --cuda-device N, --no-cuda-graphs (decode steps as plain
  // launches), --cuda-programmatic-launch (kernels may start while the one
  // before them finishes; off by default), --cuda-tune-gemms (batched
  // decode's products on the algorithm measured fastest for their shape;
  // off by default); CPU: --threads N (compute threads; 0 = every core),
  // --cpu-matmul f32|bf16.
  BackendOptions backend;
  // --no-device-sampling: CUDA: sampled requests draw on the host from the
  // copied logits rows (EngineOptions::device_sampling; on by default).
  bool device_sampling = true;
  // Cores for the engine thread (--engine-cpus 0,1); empty = any. With
  // --threads 1, e.g. `taskset -c 1 tributary-server --engine-cpus 0`
  // keeps the model on core 0 and gRPC on core 1.
  std::vector<int> engine_cpus;

  // --- Listeners (a port of 0 picks a free one; -1 turns it off) ---
  std::string host = "127.0.0.1";
  int api_port = 50051;
  int health_port = 50052;  // plaintext, health service only
  int metrics_port = 9464;  // HTTP /metrics
  // The OpenAI-compatible HTTP API (server/http_server.h): the gRPC port's
  // TLS, mutual TLS and bearer token.
  int http_port = 8000;
  // Completions answered at once: each waits for the engine on one of
  // these threads (more wait for a free one).
  int http_threads = 64;
  // The HTTP listener's limits (http_listener.h; README "HTTP limits").
  int http_max_connections = 1024;  // more: 503 at once
  int http_backlog = 1024;          // listen(2) queue
  int64_t http_max_head_bytes = 32 << 10;  // request line + headers; 431
  int http_max_headers = 100;              // more: 431
  absl::Duration http_head_timeout = absl::Seconds(10);  // 408 after
  absl::Duration http_body_timeout = absl::Seconds(30);  // 408 after
  absl::Duration http_idle_timeout = absl::Seconds(30);  // keep-alive
  // The model name of the HTTP API (--served-model-name); empty = the model
  // directory's name.
  std::string served_model_name;

  // --- Security of the API port (design.md §5) ---
  // TLS when cert and key are set; mutual TLS when a client CA is set too.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // When set, every API call needs "authorization: Bearer <token>"
  // (health is exempt). Read from --auth-token-file, never from argv (it
  // would show in `ps`).
  std::string auth_token;

  // --- Limits ---
  int64_t max_message_bytes = 4 << 20;  // received and sent messages
  int max_concurrent_streams = 256;     // HTTP/2 streams per connection
  int64_t max_waiting = 256;            // engine queue; more: RESOURCE_EXHAUSTED
  int64_t max_prompt_tokens = 0;        // 0 = the context
  int32_t max_new_tokens = 4096;
  int64_t max_running = 64;             // sequences in one step
  int64_t max_tokens_per_step = 512;
  int64_t cache_mib = 256;              // KV blocks + state slots

  // --- Streaming back-pressure ---
  // When a client that stops reading is cut off (RESOURCE_EXHAUSTED), on
  // gRPC and HTTP alike: --stream-buffer-tokens (max_pending_tokens) and
  // --stream-write-timeout (max_write_pending, also the HTTP socket's write
  // timeout).
  SlowReaderPolicy slow_readers;

  // --- Health and shutdown ---
  // Work pending and no engine step finished for this long: NOT_SERVING, so
  // that Kubernetes restarts the pod.
  absl::Duration liveness_timeout = absl::Seconds(60);
  // SIGTERM: NOT_SERVING, then in-flight work may finish for this long.
  absl::Duration drain_grace = absl::Seconds(30);

  // Named directions for steering and ablation (--steering-vectors FILE, a
  // safetensors file of [hidden_size] vectors, e.g. from
  // tributary-direction); empty = none.
  std::string steering_vectors_file;

  // --- Residual telemetry (design.md §4) ---
  bool residual_stats = true;
  absl::Duration residual_window = absl::Seconds(60);

  // Tests only (no flag): EngineOptions::fault_hook.
  std::function<absl::Status()> engine_fault_hook;

  // INVALID_ARGUMENT naming the flag.
  absl::Status Validate() const;
};

// Parses argv (see --help text in the implementation). INVALID_ARGUMENT for
// an unknown flag or a bad value, naming the flag. Reads the token file.
// `help` is set when --help was given (the caller prints ServerUsage()).
absl::StatusOr<ServerConfig> ParseServerFlags(int argc, const char* const* argv,
                                              bool* help);
const char* ServerUsage();

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_SERVER_CONFIG_H_
