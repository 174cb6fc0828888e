// The OpenAI-compatible HTTP API with the gRPC port's security flags, end
// to end over HTTPS (an OpenSSL client), with certificates made at test
// time by the openssl command: completions streamed and not, the bearer
// token, mutual TLS refusing a client without a certificate from the CA,
// and a non-streaming client that disconnects (the TLS path of
// ClientWatch: its sequence is cancelled and freed).
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using nlohmann::json;
using testing_util::HttpResponse;
using testing_util::HttpsRequest;
using testing_util::TlsClientOptions;
using testing_util::TlsConnection;

constexpr const char* kModel = "tiny-shakespeare";
constexpr const char* kToken = "Authorization: Bearer s3cret\r\n";

class HttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/tributary_http_tls");
    certificates_ok_ = testing_util::MakeTestCertificates(*dir_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(certificates_ok_); }

  static ServerConfig TlsConfig(bool mutual) {
    ServerConfig c = testing_util::TestServerConfig();
    c.http_port = 0;
    c.tls_cert_file = *dir_ + "/server.pem";
    c.tls_key_file = *dir_ + "/server.key";
    if (mutual) c.tls_client_ca_file = *dir_ + "/ca.pem";
    return c;
  }
  static TlsClientOptions Trusting() { return {*dir_ + "/ca.pem", "", ""}; }
  static TlsClientOptions WithCertificate() {
    return {*dir_ + "/ca.pem", *dir_ + "/client.pem", *dir_ + "/client.key"};
  }

  static std::string* dir_;
  static bool certificates_ok_;
};

std::string* HttpTlsTest::dir_ = nullptr;
bool HttpTlsTest::certificates_ok_ = false;

TEST_F(HttpTlsTest, CompletionsStreamedAndNotOverTls) {
  ServerConfig config = TlsConfig(false);
  config.auth_token = "s3cret";
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->server->http_port();
  ASSERT_GT(port, 0);

  json request{{"model", kModel},  {"prompt", "ROMEO:"},
               {"max_tokens", 12}, {"temperature", 0.8},
               {"seed", 5},        {"ignore_eos", true}};
  absl::StatusOr<HttpResponse> whole = HttpsRequest(
      port, Trusting(), "POST", "/v1/completions", request.dump(), kToken);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->status, 200) << whole->body;
  EXPECT_TRUE(absl::StrContains(whole->headers, "x-request-id: "));
  const json body = json::parse(whole->body);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  const std::string text = body["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  request["stream"] = true;
  absl::StatusOr<HttpResponse> stream = HttpsRequest(
      port, Trusting(), "POST", "/v1/completions", request.dump(), kToken);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_EQ(stream->status, 200) << stream->body;
  EXPECT_TRUE(
      absl::StrContains(stream->headers, "content-type: text/event-stream"));
  const std::vector<std::string> data = testing_util::SseData(stream->body);
  ASSERT_GE(data.size(), 2u) << stream->body;
  EXPECT_EQ(data.back(), "[DONE]");
  std::string streamed;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json chunk = json::parse(data[i]);
    if (!chunk["choices"].empty()) {
      streamed += chunk["choices"][0]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(streamed, text);

  // The bearer token over TLS: missing or wrong is 401 with an OpenAI body.
  for (const std::string& auth :
       {std::string(), std::string("Authorization: Bearer wrong\r\n")}) {
    absl::StatusOr<HttpResponse> r = HttpsRequest(
        port, Trusting(), "POST", "/v1/completions", request.dump(), auth);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  }
  // Health is exempt from the token, not from TLS.
  absl::StatusOr<HttpResponse> health =
      HttpsRequest(port, Trusting(), "GET", "/health", "");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  // Plaintext HTTP on the TLS port gets no HTTP answer.
  absl::StatusOr<HttpResponse> plaintext =
      testing_util::HttpRequest(port, "GET", "/health", "");
  EXPECT_FALSE(plaintext.ok());
  EXPECT_TRUE(server->WaitIdle());
}

TEST_F(HttpTlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  auto server = testing_util::TestServer::Start(TlsConfig(true));
  ASSERT_NE(server, nullptr);
  const int port = server->server->http_port();
  const std::string request =
      json{{"model", kModel}, {"prompt", "ROMEO:"}, {"max_tokens", 2}}.dump();

  absl::StatusOr<HttpResponse> without =
      HttpsRequest(port, Trusting(), "POST", "/v1/completions", request);
  EXPECT_FALSE(without.ok());

  // A certificate that the CA did not sign.
  const std::string o = TRIBUTARY_OPENSSL;
  const std::string stranger = *dir_ + "/stranger";
  ASSERT_EQ(
      std::system((o +
                   " req -x509 -newkey rsa:2048 -nodes -days 1"
                   " -subj /CN=stranger -keyout " +
                   stranger + ".key -out " + stranger + ".pem 2>/dev/null")
                      .c_str()),
      0);
  absl::StatusOr<HttpResponse> foreign = HttpsRequest(
      port, {*dir_ + "/ca.pem", stranger + ".pem", stranger + ".key"}, "POST",
      "/v1/completions", request);
  EXPECT_FALSE(foreign.ok());

  absl::StatusOr<HttpResponse> with =
      HttpsRequest(port, WithCertificate(), "POST", "/v1/completions", request);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->status, 200) << with->body;
  EXPECT_TRUE(server->WaitIdle());
}

// A non-streaming client that goes away while its answer is generated
// cancels the sequence (found through the TLS session's socket).
TEST_F(HttpTlsTest, NonStreamingDisconnectFreesTheSequence) {
  ServerConfig config = TlsConfig(false);
  config.metrics_port = 0;
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  const json request{{"model", kModel},
                     {"prompt", "ROMEO:"},
                     {"max_tokens", 1000},
                     {"ignore_eos", true}};
  absl::StatusOr<std::unique_ptr<TlsConnection>> connection =
      TlsConnection::Send(server->server->http_port(), Trusting(), "POST",
                          "/v1/completions", request.dump());
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_TRUE(server->WaitRunning(1));
  connection->reset();  // closes the socket mid-generation
  EXPECT_TRUE(server->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(server->FinishedRequests("cancelled"), 1);
  EXPECT_EQ(server->FinishedRequests("length"), 0);
}

}  // namespace
}  // namespace tributary
