#include "server/openai_stream.h"

#include <utility>

namespace tributary {

HttpGeneration::HttpGeneration(Engine* engine, GenerationRecord* record,
                               const SlowReaderPolicy& policy)
    : engine_(engine), record_(record), policy_(policy) {}

void HttpGeneration::OnEvent(const TokenEvent& event) {
  record_->OnEvent(event);  // inter-token latency, as for gRPC
  bool cut_off_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // After a cut-off only the final event matters (it ends the wait).
    if (!cut_off_ || event.is_final) {
      queue_.push_back(event);
      if (event.has_token) ++pending_tokens_;
      if (!event.is_final && !cut_off_ &&
          policy_.CutsOff(pending_tokens_, std::nullopt, absl::Now())) {
        cut_off_ = true;
        cut_off_now = true;
        // The queued tokens will never be written: free them now.
        queue_.clear();
        pending_tokens_ = 0;
      }
    }
  }
  cv_.notify_one();
  // A sink may call Cancel (request.h); the final event follows at the next
  // step boundary.
  if (cut_off_now) engine_->Cancel(event.request_id);
}

bool HttpGeneration::Take(absl::Duration timeout, std::deque<TokenEvent>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                    [this] { return !queue_.empty(); })) {
    return false;
  }
  for (TokenEvent& e : queue_) out->push_back(std::move(e));
  queue_.clear();
  pending_tokens_ = 0;
  return true;
}

void HttpGeneration::Cancel() {
  const uint64_t id = engine_id_.load();
  if (id != 0) engine_->Cancel(id);
}

bool HttpGeneration::cut_off() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cut_off_;
}

}  // namespace tributary
