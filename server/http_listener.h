// The HTTP/1.1 listener of the OpenAI-compatible API (http_server.h routes
// what it reads): event-driven on Boost.Asio, requests parsed by
// Boost.Beast's parser, TLS on OpenSSL. It exists so that slow, idle or
// hostile connections cost a few kilobytes and a timer each, never a
// thread:
//   - one event thread accepts, reads every request head and body and
//     writes every answer, with a deadline for each (the head from the
//     connection's first byte, the body, each write, an idle keep-alive);
//   - the head is capped in bytes and in header count (431), the body by
//     its Content-Length before a byte of it is read (413; 400 for a length
//     that is not one) and again as it arrives (chunked) and decoded;
//   - connections beyond the cap get 503 at once and are closed;
//   - only a complete request reaches the router: on the event thread when
//     it answers at once (health, models, every refusal), on one of
//     `worker_threads` threads when it waits for the engine (completions),
//     whose streamed writes go through the event thread.
// Refusals close the connection after a lingering read (the client gets
// the answer instead of a reset for the bytes it is still sending).
#ifndef TRIBUTARY_SERVER_HTTP_LISTENER_H_
#define TRIBUTARY_SERVER_HTTP_LISTENER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http_message.h"

namespace tributary {

// The listener's limits (README "HTTP limits" names their flags).
struct HttpListenerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free port
  // TLS when both are set; mutual TLS with a client CA.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;

  int worker_threads = 64;    // requests waiting on the engine at once
  int max_connections = 1024;  // open at once; more get 503
  int backlog = 1024;          // listen(2) queue (the kernel caps it)
  int64_t max_head_bytes = 32 << 10;  // request line and headers
  int max_headers = 100;
  int64_t max_body_bytes = 4 << 20;  // as received, and decoded
  absl::Duration head_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(30);  // between requests
  absl::Duration write_timeout = absl::Seconds(30);  // one write
  int max_requests_per_connection = 1000;

  // Errors name the option's flag.
  absl::Status Validate() const;
};

// What the listener serves requests with.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Whether Handle may wait (for the engine): it then runs on a worker
  // thread and may stream; otherwise it runs on the event thread and must
  // answer at once, without a stream.
  virtual bool Blocks(const HttpRequest& request) const = 0;
  virtual void Handle(const HttpRequest& request, HttpResponse* response) = 0;
  // The body of an answer the listener gives by itself (a head too large,
  // a deadline passed, the connection cap): `status` and `message` set,
  // the handler writes the rest (its error body). Event thread; at once.
  virtual void FillError(int status, const std::string& message,
                         HttpResponse* response) = 0;
  // Each time the listener refuses a request or a connection by itself,
  // with the status it answered (for a count). Event thread; at once.
  virtual void OnRefusal(int status) = 0;
};

class HttpListener {
 public:
  // Binds and starts serving. `handler` outlives the listener. Errors: the
  // options' (Validate), a port in use, a certificate or key that does
  // not load.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      const HttpListenerOptions& options, HttpHandler* handler);
  ~HttpListener();  // Stop()

  int port() const;
  bool tls() const;
  bool mutual_tls() const;

  // Stops accepting, closes every connection that is not being answered,
  // and waits for those that are (call once the engine has ended every
  // generation). Idempotent.
  void Stop();

  struct Impl;  // the event loop, the workers, the connections (in the .cc)

 private:
  explicit HttpListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_LISTENER_H_
