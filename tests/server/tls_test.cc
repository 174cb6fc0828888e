// TLS and mutual TLS on the API port, with certificates made at test time
// by the openssl command (testing_util::MakeTestCertificates); the
// health-only port stays plaintext. The HTTP API's TLS: http_tls_test.cc.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using testing_util::TestServer;
using testing_util::TestServerConfig;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::unique_ptr<v1::Tributary::Stub> Stub(int port,
                                          grpc::SslCredentialsOptions ssl) {
  grpc::ChannelArguments args;
  // The certificate is for localhost; we dial 127.0.0.1.
  args.SetSslTargetNameOverride("localhost");
  return v1::Tributary::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(ssl), args));
}

grpc::StatusCode ModelInfoCode(v1::Tributary::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ModelInfo info;
  return stub.GetModelInfo(&ctx, {}, &info).error_code();
}

TEST(TlsTest, TlsAndMutualTls) {
  const std::string dir = ::testing::TempDir() + "/tributary_tls";
  ASSERT_TRUE(testing_util::MakeTestCertificates(dir));
  grpc::SslCredentialsOptions trusted;
  trusted.pem_root_certs = Read(dir + "/ca.pem");
  {  // TLS: a client that trusts the CA gets in; plaintext does not.
    ServerConfig config = TestServerConfig();
    config.tls_cert_file = dir + "/server.pem";
    config.tls_key_file = dir + "/server.key";
    auto t = TestServer::Start(config);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(ModelInfoCode(*Stub(t->server->api_port(), trusted)),
              grpc::StatusCode::OK);
    EXPECT_NE(ModelInfoCode(*t->stub), grpc::StatusCode::OK);  // plaintext
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(t->health->Check(&ctx, {}, &response).ok());
  }
  {  // Mutual TLS: a client certificate from the CA is required.
    ServerConfig config = TestServerConfig();
    config.tls_cert_file = dir + "/server.pem";
    config.tls_key_file = dir + "/server.key";
    config.tls_client_ca_file = dir + "/ca.pem";
    auto t = TestServer::Start(config);
    ASSERT_NE(t, nullptr);
    EXPECT_NE(ModelInfoCode(*Stub(t->server->api_port(), trusted)),
              grpc::StatusCode::OK);
    grpc::SslCredentialsOptions with_cert = trusted;
    with_cert.pem_cert_chain = Read(dir + "/client.pem");
    with_cert.pem_private_key = Read(dir + "/client.key");
    EXPECT_EQ(ModelInfoCode(*Stub(t->server->api_port(), with_cert)),
              grpc::StatusCode::OK);
  }
}

}  // namespace
}  // namespace tributary
