// When the server gives up on a streaming client that stopped reading, one
// rule for the gRPC stream (GenerateStream) and the HTTP API's streams: a
// client is cut off once more than max_pending_tokens tokens wait for it,
// or one write to it has been pending for longer than max_write_pending.
// The sequence is then cancelled, so that it holds no KV block or state slot
// for nobody, and the client (if it reads again) gets RESOURCE_EXHAUSTED
// with Message().
#ifndef TRIBUTARY_SERVER_SLOW_READER_POLICY_H_
#define TRIBUTARY_SERVER_SLOW_READER_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace tributary {

struct SlowReaderPolicy {
  int64_t max_pending_tokens = 4096;  // --stream-buffer-tokens
  absl::Duration max_write_pending =
      absl::Seconds(30);  // --stream-write-timeout

  // Whether a client with `pending_tokens` tokens waiting for it and a write
  // in flight since `write_started` (nullopt: none, or the transport bounds
  // its writes itself, as the HTTP server's socket timeout does) is cut off
  // at `now`.
  bool CutsOff(int64_t pending_tokens, std::optional<absl::Time> write_started,
               absl::Time now) const;

  // What the cut-off client is told.
  std::string Message() const;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_SLOW_READER_POLICY_H_
