#include "client/channel_options.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

absl::StatusOr<std::string> ReadPemFile(const std::string& flag,
                                        const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--", flag, ": cannot read '", path, "'"));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", path, "' is empty"));
  }
  return contents.str();
}

}  // namespace

const std::set<std::string>& ChannelFlagNames() {
  static const auto* const names =
      new std::set<std::string>{"target",  "token",   "tls-ca",    "tls-cert",
                                "tls-key", "timeout", "request-id"};
  return *names;
}

absl::StatusOr<double> ParsePositiveDouble(const std::string& flag,
                                           const std::string& text) {
  double value = 0.0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value) ||
      !(value > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", flag, " must be a positive number, got '", text, "'"));
  }
  return value;
}

absl::StatusOr<ChannelOptions> ParseChannelOptions(const CliArgs& args) {
  ChannelOptions options;
  options.target = args.GetOr("target", options.target);
  if (options.target.empty()) {
    return absl::InvalidArgumentError("flag --target must not be empty");
  }
  options.token = args.GetOr("token", "");
  options.tls_ca_file = args.GetOr("tls-ca", "");
  options.tls_cert_file = args.GetOr("tls-cert", "");
  options.tls_key_file = args.GetOr("tls-key", "");
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "give both --tls-cert and --tls-key (mutual TLS) or neither");
  }
  if (!options.tls_cert_file.empty() && options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key need --tls-ca (the server's CA)");
  }
  if (auto timeout = args.Get("timeout")) {
    ASSIGN_OR_RETURN(options.timeout_seconds,
                     ParsePositiveDouble("timeout", *timeout));
  }
  options.request_id = args.GetOr("request-id", "");
  // The server would reject it anyway; failing here says which flag.
  if (options.request_id.size() > 128) {
    return absl::InvalidArgumentError(
        "flag --request-id must be at most 128 bytes");
  }
  for (char c : options.request_id) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "flag --request-id must be printable ASCII without spaces");
    }
  }
  return options;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(
    const ChannelOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls_ca_file.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadPemFile("tls-ca", options.tls_ca_file));
    if (!options.tls_cert_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                       ReadPemFile("tls-cert", options.tls_cert_file));
      ASSIGN_OR_RETURN(ssl.pem_private_key,
                       ReadPemFile("tls-key", options.tls_key_file));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  // The model's messages can be large (a residual trace is 6 floats per
  // layer per token): lift gRPC's 4 MiB receive limit.
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(options.target, credentials, arguments);
}

void ConfigureClientContext(const ChannelOptions& options,
                            grpc::ClientContext* context) {
  // The token goes in as plain metadata rather than call credentials: gRPC
  // refuses to attach call credentials to a plaintext channel, and a
  // token-protected server behind a TLS-terminating proxy is plaintext here.
  if (!options.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options.token);
  }
  if (!options.request_id.empty()) {
    context->AddMetadata("x-request-id", options.request_id);
  }
  if (options.timeout_seconds) {
    context->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(*options.timeout_seconds)));
  }
}

}  // namespace tributary
