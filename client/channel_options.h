// How both client tools reach the server: the target, TLS, the bearer token,
// the deadline and the request id, parsed once from the common flags and then
// applied to the channel (TLS) and to every ClientContext (metadata,
// deadline).
#ifndef TRIBUTARY_CLIENT_CHANNEL_OPTIONS_H_
#define TRIBUTARY_CLIENT_CHANNEL_OPTIONS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "base/cli.h"

namespace tributary {

struct ChannelOptions {
  // HOST:PORT, or any gRPC target URI (dns:///…, unix:…). The default is
  // the address the server listens on by default, as a literal: "localhost"
  // goes through gRPC's resolver, which fails on a machine without
  // /etc/hosts (a bare container or chroot).
  std::string target = "127.0.0.1:50051";
  // Sent as `authorization: Bearer TOKEN` on every call when non-empty.
  std::string token;
  // TLS when tls_ca_file is set: the CA that signs the server's certificate.
  // Mutual TLS when tls_cert_file and tls_key_file are set too (both or
  // neither). Plaintext otherwise.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Per-call deadline in seconds; nullopt = none.
  std::optional<double> timeout_seconds;
  // Sent as `x-request-id` when non-empty (at most 128 printable ASCII
  // bytes; the server rejects anything else).
  std::string request_id;
};

// The value flags ParseChannelOptions reads: target, token, tls-ca,
// tls-cert, tls-key, timeout, request-id.
const std::set<std::string>& ChannelFlagNames();

// Reads the common flags; errors name the flag. Does not open any file.
absl::StatusOr<ChannelOptions> ParseChannelOptions(const CliArgs& args);

// A channel to options.target: plaintext, TLS or mutual TLS. Reads the PEM
// files (an unreadable or empty file is an error naming it). Does not
// connect: the first RPC does.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(
    const ChannelOptions& options);

// Applies the metadata and the deadline (counted from now) to `context`,
// which must not have started a call yet.
void ConfigureClientContext(const ChannelOptions& options,
                            grpc::ClientContext* context);

// Parses a positive, finite number of seconds (or of anything else: the
// error names `flag`).
absl::StatusOr<double> ParsePositiveDouble(const std::string& flag,
                                           const std::string& text);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_CHANNEL_OPTIONS_H_
