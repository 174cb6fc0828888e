// The hand-over of one HTTP generation's engine events from the engine
// thread to the HTTP connection thread that writes them.
//
// The engine thread only enqueues (a short lock and a notify: it never
// waits on a client); the connection thread waits on the condition variable,
// takes everything queued at once and writes it. The queue is bounded by
// the gRPC stream's rule (slow_reader_policy.h): when more tokens than the
// policy allows wait for a slow reader, the sequence is cancelled (cut
// off), so a client that does not read costs bounded memory and frees its
// KV blocks. The policy's write bound is the socket's write timeout here
// (http_server.cc), so this side counts tokens only.
#ifndef TRIBUTARY_SERVER_OPENAI_STREAM_H_
#define TRIBUTARY_SERVER_OPENAI_STREAM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/request.h"
#include "server/service_context.h"
#include "server/slow_reader_policy.h"

namespace tributary {

class HttpGeneration : public TokenSink {
 public:
  HttpGeneration(Engine* engine, GenerationRecord* record,
                 const SlowReaderPolicy& policy);

  // Engine thread.
  void OnEvent(const TokenEvent& event) override;

  // Connection thread, after a successful Engine::Submit.
  void set_engine_id(uint64_t id) { engine_id_.store(id); }
  // Waits up to `timeout` for events; moves what is queued to `out` (in
  // order). False when nothing came in time.
  bool Take(absl::Duration timeout, std::deque<TokenEvent>* out);
  // The client went away: stop generating (the final event still comes).
  void Cancel();
  // Whether the cut-off cancelled the sequence (the client was too slow).
  bool cut_off() const;
  const SlowReaderPolicy& policy() const { return policy_; }

 private:
  Engine* engine_;
  GenerationRecord* record_;  // OnEvent from the engine thread only
  const SlowReaderPolicy policy_;
  std::atomic<uint64_t> engine_id_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> queue_;
  int64_t pending_tokens_ = 0;
  bool cut_off_ = false;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_OPENAI_STREAM_H_
