// libFuzzer over the HTTP listener (server/http_listener.cc, Beast's parser
// under it): each input is the bytes one client sends on one connection,
// then a half-close. Checks, beyond the sanitizers: the listener answers
// with an HTTP/1.1 status line or closes without a byte (never anything
// else), within the deadlines it was given (no hang: libFuzzer's -timeout),
// and after every input still answers a plain GET /health on a fresh
// connection. The router is a small handler that exercises both paths: a
// POST runs on a worker and streams its body back in chunks, the rest is
// answered on the event thread.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http_listener.h"

namespace {

using tributary::HttpBodyWriter;
using tributary::HttpListener;
using tributary::HttpListenerOptions;
using tributary::HttpRequest;
using tributary::HttpResponse;

class EchoHandler : public tributary::HttpHandler {
 public:
  bool Blocks(const HttpRequest& request) const override {
    return request.method == "POST";
  }
  void Handle(const HttpRequest& request, HttpResponse* response) override {
    response->content_type = "text/plain";
    if (request.method != "POST") {
      response->body = absl::StrCat(request.method, " ", request.path, " ",
                                    request.headers.size(), "\n");
      return;
    }
    const std::string body = request.body;
    response->stream = [body](HttpBodyWriter& out) {
      for (size_t at = 0; at < body.size(); at += 7) {
        if (!out.Write(absl::string_view(body).substr(at, 7))) return false;
      }
      return true;
    };
    response->on_done = [] {};
  }
  void FillError(int status, const std::string& message,
                 HttpResponse* response) override {
    response->status = status;
    response->content_type = "text/plain";
    response->body = message + "\n";
  }
  void OnRefusal(int) override {}
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  // (A connect interrupted by a signal goes on; asked again, it says so.)
  if (rc != 0 && errno != EISCONN) {
    std::fprintf(stderr, "connect failed: %s\n", std::strerror(errno));
    std::abort();
  }
  return fd;
}

// Sends `data`, half-closes, reads everything until the server closes.
std::string Exchange(int port, const uint8_t* data, size_t size) {
  const int fd = Connect(port);
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server refused and closed
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;  // libFuzzer's SIGALRM
    if (n < 0) {
      absl::StrAppend(&out, out.empty() ? "" : " ", "[recv: ", std::strerror(errno), "]");
    }
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  // An abortive close: thousands of connections a second would otherwise
  // leave as many in TIME_WAIT and run out of loopback ports.
  const linger abort{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  ::close(fd);
  return out;
}

HttpListener* Listener() {
  static EchoHandler* handler = new EchoHandler();
  static HttpListener* listener = [] {
    HttpListenerOptions o;
    o.port = 0;
    o.worker_threads = 2;
    o.max_head_bytes = 4096;
    o.max_headers = 16;
    o.max_body_bytes = 8192;
    // Short, so that an input the parser waits on ends quickly (the
    // half-close usually ends it sooner).
    o.head_timeout = absl::Milliseconds(200);
    o.body_timeout = absl::Milliseconds(200);
    o.idle_timeout = absl::Milliseconds(200);
    o.write_timeout = absl::Seconds(2);
    auto started = HttpListener::Start(o, handler);
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      std::abort();
    }
    return started->release();
  }();
  return listener;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpListener* listener = Listener();
  const std::string answer = Exchange(listener->port(), data, size);
  if (!answer.empty() && !absl::StartsWith(answer, "HTTP/1.1 ")) {
    std::fprintf(stderr, "not an HTTP answer: %s\n", answer.substr(0, 80).c_str());
    std::abort();
  }
  static const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string health = Exchange(
      listener->port(), reinterpret_cast<const uint8_t*>(kHealth.data()), kHealth.size());
  if (!absl::StartsWith(health, "HTTP/1.1 200 OK\r\n")) {
    std::fprintf(stderr, "health after the input: %s\n", health.substr(0, 80).c_str());
    std::abort();
  }
  return 0;
}
