// The HTTP listener against clients that are slow, idle or hostile, on raw
// sockets: connections that never finish their head or body do not hold
// back /health or a completion (with 2 worker threads for 100+ such
// connections), heads over the byte or header cap get 431, a Content-Length
// is judged before any body byte (413 at once, 400 for one that is not a
// length), the head, body and idle deadlines answer 408 or close, the
// connection cap answers 503 at once, a burst of connections is accepted,
// and the HTTP details clients rely on (Expect: 100-continue, pipelining,
// compressed bodies with a bound on what they decode to) hold.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/hang_guard.h"
#include "tests/server/deflate_for_test.h"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using nlohmann::json;
using testing_util::ConnectLoopback;
using testing_util::Gzip;
using testing_util::HttpResponse;
using testing_util::kHangGuard;
using testing_util::ParseHttpResponse;

constexpr const char* kModel = "tiny-shakespeare";

// Deadlines far beyond the test: what a test sees is the server's
// behaviour, never a deadline passing on a slow machine.
ServerConfig PatientConfig() {
  ServerConfig c = testing_util::TestServerConfig();
  c.http_port = 0;
  c.http_threads = 2;
  c.http_head_timeout = kHangGuard * 2;
  c.http_body_timeout = kHangGuard * 2;
  c.http_idle_timeout = kHangGuard * 2;
  return c;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Everything the server sends until it closes the connection (or resets
// it, or the hang guard passes).
std::string ReadUntilClosed(int fd) {
  std::string raw;
  const absl::Time deadline = absl::Now() + kHangGuard;
  char buffer[65536];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  return raw;
}

// The first response of `raw` (of `Content-Length` framing, as the
// listener's own answers and health/models all are) is removed and
// returned; `raw` keeps what follows.
std::string TakeOneResponse(std::string* raw) {
  const size_t end = raw->find("\r\n\r\n");
  if (end == std::string::npos) return std::exchange(*raw, "");
  std::string lower = raw->substr(0, end);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(ch));
  const size_t at = lower.find("content-length: ");
  const size_t length =
      at == std::string::npos ? 0 : std::strtoul(lower.c_str() + at + 16, nullptr, 10);
  std::string first = raw->substr(0, end + 4 + length);
  raw->erase(0, first.size());
  return first;
}

// Whether the server still holds the connection open without having
// answered: nothing to read, no hang-up.
bool StillOpenAndSilent(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

// The status and error message of a raw answer.
void ExpectError(const std::string& raw, int status, const std::string& says) {
  absl::StatusOr<HttpResponse> r = ParseHttpResponse(raw);
  ASSERT_TRUE(r.ok()) << r.status() << " in " << raw.substr(0, 200);
  EXPECT_EQ(r->status, status) << raw.substr(0, 400);
  const json body = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r->body;
  EXPECT_TRUE(absl::StrContains(body["error"]["message"].get<std::string>(), says))
      << r->body;
}

class HttpFrontDoorTest : public ::testing::Test {
 protected:
  void StartServer(const ServerConfig& config) {
    server_ = testing_util::TestServer::Start(config);
    ASSERT_NE(server_, nullptr);
    port_ = server_->server->http_port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    for (int fd : open_) ::close(fd);
  }
  int Connect() {
    const int fd = ConnectLoopback(port_);
    EXPECT_GE(fd, 0);
    if (fd >= 0) open_.push_back(fd);
    return fd;
  }
  // A connection that sent `text` and nothing more.
  int Partial(const std::string& text) {
    const int fd = Connect();
    EXPECT_TRUE(SendAll(fd, text));
    return fd;
  }
  void ExpectHealthAndCompletion() {
    absl::StatusOr<HttpResponse> r = testing_util::HttpRequest(port_, "GET", "/health", "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
    for (bool stream : {false, true}) {
      r = testing_util::HttpRequest(
          port_, "POST", "/v1/completions",
          json{{"model", kModel}, {"prompt", "ROMEO:"}, {"max_tokens", 1},
               {"stream", stream}}
              .dump());
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->status, 200) << r->body;
    }
  }

  std::unique_ptr<testing_util::TestServer> server_;
  int port_ = -1;
  std::vector<int> open_;
};

// 64 slowloris heads, 64 bodies that never finish and 16 silent
// connections, against 2 worker threads: health and completions are
// answered while every one of them is still open.
TEST_F(HttpFrontDoorTest, SlowConnectionsDoNotHoldRequestsBack) {
  StartServer(PatientConfig());
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(Partial("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: a"));
    slow.push_back(Partial(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo"));
  }
  for (int i = 0; i < 16; ++i) slow.push_back(Connect());
  ExpectHealthAndCompletion();
  for (int fd : slow) EXPECT_TRUE(StillOpenAndSilent(fd));
  EXPECT_TRUE(server_->WaitIdle());
}

// Heads over the byte cap or the header count get 431 naming the flag,
// also a flood far beyond the cap; the server keeps serving.
TEST_F(HttpFrontDoorTest, OversizedHeadsAre431) {
  ServerConfig config = PatientConfig();
  config.http_max_head_bytes = 8192;
  config.http_max_headers = 20;
  StartServer(config);
  int fd = Partial(absl::StrCat("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ",
                                std::string(9000, 'a'), "\r\n\r\n"));
  ExpectError(ReadUntilClosed(fd), 431, "--http-max-head-bytes");
  std::string many = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 30; ++i) absl::StrAppend(&many, "X-H", i, ": v\r\n");
  fd = Partial(many + "\r\n");
  ExpectError(ReadUntilClosed(fd), 431, "--http-max-headers");
  // A flood of 1.6 M header lines (19 MB): the server answers after the
  // cap and drops the rest; the writer may see its connection reset.
  fd = Connect();
  std::string lines;
  for (int i = 0; i < 10000; ++i) absl::StrAppend(&lines, "X-H", 1000000 + i, ": v\r\n");
  bool sent = SendAll(fd, "GET /v1/models HTTP/1.1\r\n");
  for (int i = 0; i < 160 && sent; ++i) sent = SendAll(fd, lines);
  const std::string raw = ReadUntilClosed(fd);
  if (!raw.empty()) ExpectError(raw, 431, "--http-max-head-bytes");
  ExpectHealthAndCompletion();
}

// A Content-Length is judged before any of the body is read, so these
// are answered although no body byte ever comes (the body deadline is far
// beyond the test).
TEST_F(HttpFrontDoorTest, ContentLengthIsJudgedBeforeTheBody) {
  StartServer(PatientConfig());
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  struct Case {
    std::string headers;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"Content-Length: -1\r\n", 400, "Content-Length"},
      {"Content-Length: 99999999999999999999\r\n", 400, "Content-Length"},
      {"Content-Length: 12abc\r\n", 400, "Content-Length"},
      {"Content-Length: 10\r\nContent-Length: 11\r\n", 400, "Content-Length"},
      {"Content-Length: 5000000000\r\n", 413, "--max-message-bytes"},
      {"Content-Length: 4194305\r\n", 413, "--max-message-bytes"},
  };
  std::vector<int> fds;
  for (const Case& c : cases) fds.push_back(Partial(head + c.headers + "\r\n"));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].headers);
    ExpectError(ReadUntilClosed(fds[i]), cases[i].status, cases[i].says);
  }
  ExpectHealthAndCompletion();
}

// The head's deadline answers 408 and closes, so does the body's; an idle
// keep-alive connection is closed without an answer.
TEST_F(HttpFrontDoorTest, DeadlinesAnswer408) {
  ServerConfig config = PatientConfig();
  config.http_head_timeout = absl::Seconds(1);
  config.http_body_timeout = absl::Seconds(1);
  config.http_idle_timeout = absl::Seconds(1);
  StartServer(config);
  const int head = Partial("GET /v1/models HTTP/1.1\r\nHost: x\r\n");
  const int body =
      Partial("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{");
  const int silent = Connect();
  const int idle = Partial("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  ExpectError(ReadUntilClosed(head), 408, "--http-head-timeout");
  ExpectError(ReadUntilClosed(body), 408, "--http-body-timeout");
  ExpectError(ReadUntilClosed(silent), 408, "--http-head-timeout");
  // One answer (keep-alive), then the close.
  const std::string raw = ReadUntilClosed(idle);
  absl::StatusOr<HttpResponse> r = ParseHttpResponse(raw);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(raw.find("HTTP/1.1", 1), std::string::npos) << raw;
}

// Beyond --http-max-connections a connection gets 503 at once and is
// closed; once one closes, a new one is served.
TEST_F(HttpFrontDoorTest, ConnectionCapAnswers503) {
  ServerConfig config = PatientConfig();
  config.http_max_connections = 8;
  StartServer(config);
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(Partial("GET /health HTTP/1.1\r\n"));
  // Accepted in order, so the 9th finds the 8 registered.
  const int over = Connect();
  ExpectError(ReadUntilClosed(over), 503, "--http-max-connections");
  ::shutdown(held[0], SHUT_RDWR);
  const absl::Time deadline = absl::Now() + kHangGuard;
  bool served = false;
  while (!served && absl::Now() < deadline) {
    absl::StatusOr<HttpResponse> r = testing_util::HttpRequest(port_, "GET", "/health", "");
    served = r.ok() && r->status == 200;
    if (!served) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(served);
}

// 300 connections opened at once, then a request on each: every one is
// accepted and answered (the listen backlog takes the burst).
TEST_F(HttpFrontDoorTest, BurstOfConnectionsIsAccepted) {
  StartServer(PatientConfig());
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) fds.push_back(Connect());
  int answered = 0;
  for (int fd : fds) {
    if (!SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) continue;
    absl::StatusOr<HttpResponse> r = ParseHttpResponse(ReadUntilClosed(fd));
    if (r.ok() && r->status == 200) ++answered;
  }
  EXPECT_EQ(answered, 300);
}

// Expect: 100-continue gets the interim answer before the body is sent;
// two pipelined requests get two answers in order.
TEST_F(HttpFrontDoorTest, ContinueAndPipelining) {
  StartServer(PatientConfig());
  const std::string body =
      json{{"model", kModel}, {"prompt", "ROMEO:"}, {"max_tokens", 1}}.dump();
  int fd = Partial(absl::StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Expect: 100-continue\r\nContent-Length: ",
      body.size(), "\r\n\r\n"));
  std::string interim;
  char c;
  while (!absl::EndsWith(interim, "\r\n\r\n") && ::recv(fd, &c, 1, 0) == 1) interim += c;
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(SendAll(fd, body));
  absl::StatusOr<HttpResponse> r = ParseHttpResponse(ReadUntilClosed(fd));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;

  fd = Partial(
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string both = ReadUntilClosed(fd);
  r = ParseHttpResponse(TakeOneResponse(&both));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(json::parse(r->body)["status"], "ok");
  r = ParseHttpResponse(both);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(json::parse(r->body)["object"], "list");
}

// A gzip body is decoded; one that would decode past --max-message-bytes
// (5 MiB of spaces in 5 KB) is 413 without being decoded whole.
TEST_F(HttpFrontDoorTest, CompressedBodiesAreDecodedWithinTheLimit) {
  StartServer(PatientConfig());
  const std::string body =
      json{{"model", kModel}, {"prompt", "ROMEO:"}, {"max_tokens", 1}}.dump();
  absl::StatusOr<HttpResponse> r = testing_util::HttpRequest(
      port_, "POST", "/v1/completions", Gzip(body), "Content-Encoding: gzip\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  const std::string bomb = Gzip(body.substr(0, body.size() - 1) +
                                std::string(5 << 20, ' ') + "}");
  ASSERT_LT(bomb.size(), 64u << 10);
  r = testing_util::HttpRequest(port_, "POST", "/v1/completions", bomb,
                                "Content-Encoding: gzip\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "decoded body")) << r->body;
}

// The HTTP fuzzer's seed corpus (tests/fuzz/corpus/http_request), each
// file the bytes of one connection then a half-close: an HTTP/1.1 answer
// or a close, and the server serves on.
TEST_F(HttpFrontDoorTest, FuzzCorpusGetsAnswersOrCloses) {
  ServerConfig config = PatientConfig();
  config.http_head_timeout = absl::Seconds(2);
  config.http_body_timeout = absl::Seconds(2);
  StartServer(config);
  const std::filesystem::path dir =
      std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/fuzz/corpus/http_request";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    const int fd = Connect();
    SendAll(fd, bytes);
    ::shutdown(fd, SHUT_WR);
    const std::string answer = ReadUntilClosed(fd);
    EXPECT_TRUE(answer.empty() || absl::StartsWith(answer, "HTTP/1.1 ")) << answer;
    ++files;
  }
  EXPECT_GE(files, 8);
  ExpectHealthAndCompletion();
}

}  // namespace
}  // namespace tributary
