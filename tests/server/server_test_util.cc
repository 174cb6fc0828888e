#include "tests/server/server_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace tributary {
namespace testing_util {

ServerConfig TestServerConfig() {
  ServerConfig c;
  c.model_dir = std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare";
  c.backend.cpu.num_threads = 1;
  c.host = "127.0.0.1";
  c.api_port = 0;
  c.health_port = 0;
  // Off unless a test scrapes: stopping the exposer's HTTP server takes
  // about 2 s (civetweb's poll interval).
  c.metrics_port = -1;
  c.http_port = -1;  // on in the HTTP API tests only
  c.cache_mib = 64;
  c.liveness_timeout = absl::Seconds(60);
  c.drain_grace = absl::Seconds(10);
  return c;
}

std::unique_ptr<TestServer> TestServer::Start(ServerConfig config) {
  auto started = Server::Start(std::move(config));
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return nullptr;
  auto t = std::make_unique<TestServer>();
  t->server = *std::move(started);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  t->channel = grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", t->server->api_port()),
      grpc::InsecureChannelCredentials(), args);
  t->stub = v1::Tributary::NewStub(t->channel);
  if (t->server->health_port() > 0) {
    t->health_channel = grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", t->server->health_port()),
        grpc::InsecureChannelCredentials());
    t->health = grpc::health::v1::Health::NewStub(t->health_channel);
  }
  return t;
}

int64_t TestServer::FinishedRequests(const std::string& finish_reason) {
  return Sample(absl::StrCat("tributary_requests_total{finish_reason=\"",
                             finish_reason, "\"}"));
}

int64_t TestServer::Sample(const std::string& sample) {
  absl::StatusOr<std::string> metrics =
      HttpGet(server->metrics_port(), "/metrics");
  if (!metrics.ok()) return -1;
  const std::string series = absl::StrCat("\n", sample, " ");
  const size_t at = metrics->find(series);
  if (at == std::string::npos) return -1;
  int64_t value = -1;
  const size_t begin = at + series.size();
  const size_t end = metrics->find('\n', begin);
  double parsed = 0;
  if (absl::SimpleAtod(metrics->substr(begin, end - begin), &parsed)) {
    value = static_cast<int64_t>(parsed);
  }
  return value;
}

bool TestServer::WaitRunning(int64_t n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (server->engine().counts().num_running == n) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

bool TestServer::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const Engine::Capacity& cap = server->engine().capacity();
  while (absl::Now() < deadline) {
    const Engine::Counts c = server->engine().counts();
    if (c.num_active == 0 && c.num_sequences == 0 &&
        c.num_free_kv_blocks == cap.num_kv_blocks &&
        c.num_free_state_slots == cap.num_state_slots) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

v1::GenerateRequest GreedyRequest(const std::string& text,
                                  int32_t max_new_tokens) {
  v1::GenerateRequest r;
  r.set_text(text);
  r.mutable_sampling()->set_temperature(0.0f);
  r.mutable_stopping()->set_max_new_tokens(max_new_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  r.mutable_response()->set_return_token_ids(true);
  return r;
}

grpc::Status ReadStream(v1::Tributary::Stub& stub,
                        const v1::GenerateRequest& request,
                        v1::GenerateResponse* merged, int* num_messages) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  auto reader = stub.GenerateStream(&context, request);
  v1::GenerateResponse message;
  int n = 0;
  while (reader->Read(&message)) {
    ++n;
    // Repeated fields append and set scalars override; text concatenates.
    std::string text = merged->text() + message.text();
    merged->MergeFrom(message);
    merged->set_text(std::move(text));
  }
  if (num_messages != nullptr) *num_messages = n;
  return reader->Finish();
}

RawReply RawCall(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& method, const std::string& request,
                 const std::vector<std::pair<std::string, std::string>>&
                     metadata) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  grpc::CompletionQueue cq;
  // One operation in flight at a time: each completes before the next.
  auto await = [&cq](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(got), tag);
    return ok;
  };
  auto tag = [](intptr_t t) { return reinterpret_cast<void*>(t); };
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  RawReply reply;
  call->StartCall(tag(1));
  if (await(1)) {
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    // A write or the half-close fails when the server has finished already;
    // the status says why.
    call->Write(buffer, tag(2));
    await(2);
    call->WritesDone(tag(3));
    await(3);
    for (;;) {
      grpc::ByteBuffer response;
      call->Read(&response, tag(4));
      if (!await(4)) break;
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(response.Dump(&slices).ok());
      std::string bytes;
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      reply.messages.push_back(std::move(bytes));
    }
  }
  call->Finish(&reply.status, tag(5));
  await(5);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  return reply;
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

namespace {

// An HTTP/2 frame (RFC 9113 §4.1).
std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                  const std::string& payload) {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) {
    f += static_cast<char>((stream >> shift) & 0xff);
  }
  return f + payload;
}

// HPACK "literal header field without indexing, new name" (RFC 7541
// §6.2.2), no Huffman coding; names and values shorter than 127 bytes.
std::string Literal(const std::string& name, const std::string& value) {
  std::string h(1, '\0');
  h += static_cast<char>(name.size());
  h += name;
  h += static_cast<char>(value.size());
  h += value;
  return h;
}

}  // namespace

absl::StatusOr<int> StartNonReadingStream(int port,
                                          const v1::GenerateRequest& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect ", port));
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 0: no DATA may reach us.
  out += Frame(0x4, 0, 0, std::string("\x00\x04\x00\x00\x00\x00", 6));
  // The server's SETTINGS need an ACK; sending it up front is allowed.
  out += Frame(0x4, 0x1, 0, "");
  const std::string headers =
      Literal(":method", "POST") + Literal(":scheme", "http") +
      Literal(":path", "/tributary.v1.Tributary/GenerateStream") +
      Literal(":authority", "localhost") +
      Literal("content-type", "application/grpc") + Literal("te", "trailers");
  out += Frame(0x1, 0x4, 1, headers);  // END_HEADERS
  const std::string body = request.SerializeAsString();
  std::string message(1, '\0');  // not compressed
  const uint32_t n = static_cast<uint32_t>(body.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    message += static_cast<char>((n >> shift) & 0xff);
  }
  out += Frame(0x0, 0x1, 1, message + body);  // END_STREAM
  if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
    ::close(fd);
    return absl::InternalError("write failed");
  }
  return fd;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect ", port));
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n");
  if (::write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::InternalError("write failed");
  }
  std::string response;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::InternalError(absl::StrCat("not an HTTP response: ",
                                            response.substr(0, 100)));
  }
  if (response.find(" 200 ") == std::string::npos ||
      response.find(" 200 ") > response.find("\r\n")) {
    return absl::InternalError(absl::StrCat("HTTP status: ",
                                            response.substr(0, 40)));
  }
  return response.substr(body + 4);
}

absl::StatusOr<int> HttpSend(int port, const std::string& method,
                             const std::string& path, const std::string& body,
                             const std::string& extra_headers) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect ", port));
  const std::string request = absl::StrCat(
      method, " ", path, " HTTP/1.1\r\nHost: localhost\r\n",
      "Connection: close\r\nContent-Type: application/json\r\n",
      "Content-Length: ", body.size(), "\r\n", extra_headers, "\r\n", body);
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) break;  // the server may answer (413) before reading it all
    sent += static_cast<size_t>(n);
  }
  return fd;
}

absl::StatusOr<HttpResponse> ParseHttpResponse(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) {
    return absl::InternalError(absl::StrCat("not an HTTP response: ",
                                            raw.substr(0, 100)));
  }
  HttpResponse r;
  r.status = std::atoi(raw.c_str() + 9);
  r.headers = raw.substr(0, end + 2);
  for (char& c : r.headers) c = static_cast<char>(std::tolower(c));
  std::string rest = raw.substr(end + 4);
  if (r.headers.find("transfer-encoding: chunked") == std::string::npos) {
    r.body = std::move(rest);
    return r;
  }
  size_t pos = 0;
  for (;;) {
    const size_t eol = rest.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(rest.c_str() + pos, nullptr, 16);
    if (n == 0) break;
    r.body += rest.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return r;
}

namespace {

std::string RequestText(const std::string& method, const std::string& path,
                        const std::string& body,
                        const std::string& extra_headers) {
  return absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: localhost\r\n",
                      "Connection: close\r\nContent-Type: application/json\r\n",
                      "Content-Length: ", body.size(), "\r\n", extra_headers,
                      "\r\n", body);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    absl::StrAppend(&out, out.empty() ? "" : "; ", text);
  }
  return out.empty() ? "no OpenSSL error" : out;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path,
                                         const std::string& body,
                                         const std::string& extra_headers) {
  absl::StatusOr<int> fd = HttpSend(port, method, path, body, extra_headers);
  if (!fd.ok()) return fd.status();
  std::string raw;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(*fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  ::close(*fd);
  return ParseHttpResponse(raw);
}

bool MakeTestCertificates(const std::string& dir) {
  const std::string o = TRIBUTARY_OPENSSL;
  const std::string q = " 2>>" + dir + "/openssl.log";
  const std::string commands[] = {
      "mkdir -p " + dir,
      o + " req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca"
          " -keyout " + dir + "/ca.key -out " + dir + "/ca.pem" + q,
      o + " req -newkey rsa:2048 -nodes -subj /CN=localhost"
          " -keyout " + dir + "/server.key -out " + dir + "/server.csr" + q,
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > " + dir + "/san.ext",
      o + " x509 -req -in " + dir + "/server.csr -CA " + dir + "/ca.pem"
          " -CAkey " + dir + "/ca.key -CAcreateserial -days 1 -extfile " +
          dir + "/san.ext -out " + dir + "/server.pem" + q,
      o + " req -newkey rsa:2048 -nodes -subj /CN=test-client"
          " -keyout " + dir + "/client.key -out " + dir + "/client.csr" + q,
      o + " x509 -req -in " + dir + "/client.csr -CA " + dir + "/ca.pem"
          " -CAkey " + dir + "/ca.key -CAcreateserial -days 1 -out " + dir +
          "/client.pem" + q,
  };
  for (const std::string& c : commands) {
    if (std::system(c.c_str()) != 0) {
      ADD_FAILURE() << "failed: " << c << "\n" << ReadText(dir + "/openssl.log");
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<TlsConnection>> TlsConnection::Send(
    int port, const TlsClientOptions& tls, const std::string& method,
    const std::string& path, const std::string& body,
    const std::string& extra_headers) {
  std::unique_ptr<TlsConnection> c(new TlsConnection());
  ERR_clear_error();
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (c->ctx_ == nullptr) return absl::InternalError(OpenSslErrors());
  SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(c->ctx_, tls.ca_file.c_str(), nullptr) != 1) {
    return absl::InternalError("cannot load " + tls.ca_file);
  }
  if (!tls.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(c->ctx_, tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(c->ctx_, tls.key_file.c_str(),
                                   SSL_FILETYPE_PEM) != 1)) {
    return absl::InternalError("cannot load " + tls.cert_file);
  }
  c->fd_ = ConnectLoopback(port);
  if (c->fd_ < 0) return absl::UnavailableError(absl::StrCat("connect ", port));
  c->ssl_ = SSL_new(c->ctx_);
  SSL_set_fd(c->ssl_, c->fd_);
  SSL_set_tlsext_host_name(c->ssl_, "localhost");
  SSL_set1_host(c->ssl_, "localhost");
  if (SSL_connect(c->ssl_) != 1) {
    return absl::UnavailableError("TLS handshake: " + OpenSslErrors());
  }
  const std::string request = RequestText(method, path, body, extra_headers);
  if (SSL_write(c->ssl_, request.data(), static_cast<int>(request.size())) !=
      static_cast<int>(request.size())) {
    // TLS 1.3: a refused client certificate shows here or at the first read.
    return absl::UnavailableError("TLS write: " + OpenSslErrors());
  }
  return c;
}

TlsConnection::~TlsConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

int TlsConnection::Read(char* buffer, int size) {
  return SSL_read(ssl_, buffer, size);
}

std::string TlsConnection::ReadAll() {
  std::string raw;
  char buffer[65536];
  for (;;) {
    const int n = Read(buffer, sizeof(buffer));
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  return raw;
}

absl::StatusOr<HttpResponse> HttpsRequest(int port, const TlsClientOptions& tls,
                                          const std::string& method,
                                          const std::string& path,
                                          const std::string& body,
                                          const std::string& extra_headers) {
  absl::StatusOr<std::unique_ptr<TlsConnection>> c =
      TlsConnection::Send(port, tls, method, path, body, extra_headers);
  if (!c.ok()) return c.status();
  const std::string raw = (*c)->ReadAll();
  if (raw.empty()) {
    return absl::UnavailableError("no response: " + OpenSslErrors());
  }
  return ParseHttpResponse(raw);
}

std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

}  // namespace testing_util
}  // namespace tributary
