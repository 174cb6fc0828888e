// Shared helpers of the server integration tests: an in-process server on
// the default model with ports picked by the OS, stubs, and a plain HTTP
// GET for /metrics.
#ifndef TRIBUTARY_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define TRIBUTARY_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/hang_guard.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/server.h"
#include "tributary/v1/tributary.grpc.pb.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX and SSL
struct ssl_st;

namespace tributary {
namespace testing_util {

// Loopback ports 0 (metrics off), one compute thread, the default model.
ServerConfig TestServerConfig();

struct TestServer {
  std::unique_ptr<Server> server;
  std::shared_ptr<grpc::Channel> channel;         // API port
  std::shared_ptr<grpc::Channel> health_channel;  // health-only port
  std::unique_ptr<v1::Tributary::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  static std::unique_ptr<TestServer> Start(ServerConfig config);
  // Waits until the engine has no request left and every KV block and
  // state slot is free again; false on timeout.
  bool WaitIdle(absl::Duration timeout = testing_util::kHangGuard);
  // tributary_requests_total for one finish reason, from a /metrics scrape
  // (-1 when the scrape fails or the series is absent).
  int64_t FinishedRequests(const std::string& finish_reason);
  // One sample ("name{label=\"value\"}") from a /metrics scrape (-1 when
  // the scrape fails or the sample is absent).
  int64_t Sample(const std::string& sample);
  // Waits until the engine runs exactly `n` sequences; false on timeout.
  bool WaitRunning(int64_t n, absl::Duration timeout = testing_util::kHangGuard);
};

// A greedy request for `max_new_tokens` tokens that ignores EOS.
v1::GenerateRequest GreedyRequest(const std::string& text,
                                  int32_t max_new_tokens);

// Drains a GenerateStream into one response (text and ids concatenated, the
// last message's final fields); returns the call's status.
grpc::Status ReadStream(v1::Tributary::Stub& stub,
                        const v1::GenerateRequest& request,
                        v1::GenerateResponse* merged, int* num_messages);

// One call of `method` ("/package.Service/Method") through a generic stub,
// whatever the method's kind: `request` is sent as the only message, as is
// (bytes the server's parser may refuse), then the client half-closes and
// reads every response message until the status.
struct RawReply {
  grpc::Status status;
  std::vector<std::string> messages;  // each response message's bytes
};
RawReply RawCall(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& method, const std::string& request,
                 const std::vector<std::pair<std::string, std::string>>&
                     metadata = {});

// A client that starts GenerateStream and never reads: a minimal HTTP/2
// client on a raw socket that announces a stream window of 0 bytes, so the
// server cannot send a single message. Returns the socket (close it to end
// the call), or an error.
absl::StatusOr<int> StartNonReadingStream(int port,
                                          const v1::GenerateRequest& request);

// GET http://127.0.0.1:port/path; the body, or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// One HTTP/1.1 exchange with the OpenAI-compatible API (Connection: close;
// a chunked body is decoded).
struct HttpResponse {
  int status = 0;
  std::string headers;  // the raw header block, lower-cased
  std::string body;
};
// Sends `method path` with `body` (and "extra" header lines, each ending in
// \r\n) and returns the socket, to read the response from.
// A blocking TCP connection to 127.0.0.1:port; -1 when it fails.
int ConnectLoopback(int port);
// The status, lower-cased headers and (de-chunked) body of a raw response.
absl::StatusOr<HttpResponse> ParseHttpResponse(const std::string& raw);
absl::StatusOr<int> HttpSend(int port, const std::string& method,
                             const std::string& path, const std::string& body,
                             const std::string& extra_headers = "");
absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path,
                                         const std::string& body,
                                         const std::string& extra_headers = "");
// The "data: " payloads of a Server-Sent Events body, in order.
std::vector<std::string> SseData(const std::string& body);

// Makes, with the openssl command, a throw-away CA (ca.pem), a server
// certificate for localhost and 127.0.0.1 (server.{pem,key}) and a client
// certificate (client.{pem,key}) signed by the CA, in `dir` (created);
// false (with a test failure naming the command) on failure.
bool MakeTestCertificates(const std::string& dir);

// The same HTTP/1.1 exchange over TLS (OpenSSL): the server must present
// a certificate for "localhost" signed by `ca_file`; `cert_file` and
// `key_file` (both or neither) are the client's certificate. An error when
// the handshake or the exchange fails (e.g. a mutual-TLS server refused us).
struct TlsClientOptions {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};
absl::StatusOr<HttpResponse> HttpsRequest(
    int port, const TlsClientOptions& tls, const std::string& method,
    const std::string& path, const std::string& body,
    const std::string& extra_headers = "");

// A TLS connection with a request sent on it, to read from (or close)
// yourself.
class TlsConnection {
 public:
  static absl::StatusOr<std::unique_ptr<TlsConnection>> Send(
      int port, const TlsClientOptions& tls, const std::string& method,
      const std::string& path, const std::string& body,
      const std::string& extra_headers = "");
  // Closes the socket without a close_notify: a client that vanishes.
  ~TlsConnection();
  // Up to `size` bytes; 0 at the end, < 0 on an error.
  int Read(char* buffer, int size);
  // Everything until the server closes.
  std::string ReadAll();

 private:
  TlsConnection() = default;
  ssl_ctx_st* ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  int fd_ = -1;
};

}  // namespace testing_util
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_SERVER_SERVER_TEST_UTIL_H_
