#include "client/load_generator.h"

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/status_names.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// What one call measured, handed to the driver when it ends.
struct CallRecord {
  grpc::Status status;
  std::optional<double> time_to_first_token_seconds;
  double end_to_end_seconds = 0.0;
  int64_t num_tokens = 0;
  // (seconds per token, tokens) of every token-carrying message after the
  // first.
  std::vector<std::pair<double, int64_t>> inter_token;
  Clock::time_point end;
};

// The state the driver thread and the gRPC callback threads share.
class Driver {
 public:
  std::mutex mu;
  std::condition_variable cv;
  int64_t in_flight = 0;  // guarded by mu
  LoadResult result;      // guarded by mu
  std::optional<Clock::time_point> last_end;

  // Called once per call, from a gRPC thread, after the call's reactor is
  // gone.
  void OnCallDone(CallRecord record) {
    std::lock_guard<std::mutex> lock(mu);
    --in_flight;
    result.generated_tokens += record.num_tokens;
    last_end = last_end ? std::max(*last_end, record.end) : record.end;
    if (record.status.ok()) {
      ++result.num_ok;
      if (record.time_to_first_token_seconds) {
        result.time_to_first_token.Add(*record.time_to_first_token_seconds);
      }
      for (const auto& [seconds, tokens] : record.inter_token) {
        result.inter_token.Add(seconds, tokens);
      }
      result.end_to_end.Add(record.end_to_end_seconds);
    } else {
      const std::string code = StatusCodeName(record.status.error_code());
      ++result.errors[code];
      result.first_error_messages.emplace(code, record.status.error_message());
    }
    // Notified under the lock: once the driver sees in_flight reach 0 it may
    // return and destroy this object, so nothing may touch it after the
    // unlock.
    cv.notify_all();
  }
};

// One GenerateStream call. Owns itself: created by Launch, deleted in OnDone
// (gRPC's last callback for it), before the driver hears of the end.
class StreamCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  StreamCall(Driver* driver, v1::GenerateRequest request,
             const ChannelOptions& call_options)
      : driver_(driver), request_(std::move(request)) {
    ConfigureClientContext(call_options, &context_);
  }

  void Start(v1::Tributary::Stub* stub) {
    start_ = Clock::now();
    stub->async()->GenerateStream(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    const Clock::time_point now = Clock::now();
    const int64_t tokens = response_.token_ids_size();
    if (tokens > 0) {
      if (!record_.time_to_first_token_seconds) {
        record_.time_to_first_token_seconds = Seconds(now - start_);
      } else {
        // The tokens of one message arrived together: the gap is shared.
        record_.inter_token.emplace_back(
            Seconds(now - last_token_) / static_cast<double>(tokens), tokens);
      }
      last_token_ = now;
      record_.num_tokens += tokens;
    }
    response_.Clear();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    record_.end = Clock::now();
    record_.end_to_end_seconds = Seconds(record_.end - start_);
    record_.status = status;
    Driver* driver = driver_;
    CallRecord record = std::move(record_);
    delete this;
    driver->OnCallDone(std::move(record));
  }

 private:
  Driver* driver_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  Clock::time_point start_;
  Clock::time_point last_token_;
  CallRecord record_;
};

}  // namespace

absl::Status LoadOptions::Validate() const {
  if (!num_requests && !duration_seconds) {
    return absl::InvalidArgumentError(
        "give a number of requests or a duration");
  }
  if (num_requests && *num_requests < 1) {
    return absl::InvalidArgumentError("the number of requests must be >= 1");
  }
  if (duration_seconds && !(*duration_seconds > 0.0)) {
    return absl::InvalidArgumentError("the duration must be positive");
  }
  if (rate_per_second > 0.0) {
    if (max_in_flight < 1) {
      return absl::InvalidArgumentError("max in flight must be >= 1");
    }
  } else if (concurrency < 1) {
    return absl::InvalidArgumentError("the concurrency must be >= 1");
  }
  return absl::OkStatus();
}

LoadResult RunLoad(const std::shared_ptr<grpc::Channel>& channel,
                   const LoadOptions& options, const RequestFactory& factory) {
  auto stub = v1::Tributary::NewStub(channel);
  Driver driver;
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> stop;
  if (options.duration_seconds) {
    stop =
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(*options.duration_seconds));
  }
  int64_t launched = 0;
  auto more = [&](Clock::time_point now) {
    return (!options.num_requests || launched < *options.num_requests) &&
           (!stop || now < *stop);
  };
  // Called with the lock held; starts the call with it released, so that a
  // call ending meanwhile is never blocked on the driver.
  auto launch = [&](std::unique_lock<std::mutex>& lock) {
    ++driver.in_flight;
    driver.result.max_in_flight_seen =
        std::max(driver.result.max_in_flight_seen, driver.in_flight);
    const int64_t index = launched++;
    lock.unlock();
    v1::GenerateRequest request = factory(index);
    request.mutable_response()->set_return_token_ids(true);
    (new StreamCall(&driver, std::move(request), options.call_options))
        ->Start(stub.get());
    lock.lock();
  };

  std::unique_lock<std::mutex> lock(driver.mu);
  if (options.rate_per_second > 0.0) {
    std::mt19937_64 rng(options.seed);
    std::exponential_distribution<double> poisson_gap(options.rate_per_second);
    Clock::time_point next = start;
    while (more(next)) {
      // Sleep until the arrival; the predicate ignores wake-ups from calls
      // ending, so this waits the whole gap without polling.
      driver.cv.wait_until(lock, next, [&] { return Clock::now() >= next; });
      if (driver.in_flight >= options.max_in_flight) {
        ++driver.result.num_delayed_starts;
        driver.cv.wait(
            lock, [&] { return driver.in_flight < options.max_in_flight; });
        if (!more(Clock::now())) break;
      }
      launch(lock);
      const double gap =
          options.poisson ? poisson_gap(rng) : 1.0 / options.rate_per_second;
      next += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(gap));
    }
  } else {
    auto has_room = [&] { return driver.in_flight < options.concurrency; };
    while (more(Clock::now())) {
      if (stop) {
        driver.cv.wait_until(lock, *stop, has_room);
      } else {
        driver.cv.wait(lock, has_room);
      }
      if (has_room() && more(Clock::now())) launch(lock);
    }
  }
  driver.cv.wait(lock, [&] { return driver.in_flight == 0; });
  LoadResult result = std::move(driver.result);
  result.num_started = launched;
  result.wall_seconds =
      Seconds((driver.last_end ? *driver.last_end : Clock::now()) - start);
  return result;
}

}  // namespace tributary
