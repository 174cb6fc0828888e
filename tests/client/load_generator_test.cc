// The load generator against the in-process fake service. Asserts counts and
// the number of streams in flight, never a latency value.
#include "client/load_generator.h"

#include <gtest/gtest.h>

#include "client/load_report.h"
#include "fake_tributary_service.h"

namespace tributary {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<grpc::Channel> ChannelTo(const FakeServer& server) {
  ChannelOptions options;
  options.target = server.target();
  auto channel = CreateClientChannel(options);
  EXPECT_TRUE(channel.ok());
  return *channel;
}

RequestFactory Tokens(int32_t n, bool fail_odd = false) {
  return [n, fail_odd](int64_t index) {
    v1::GenerateRequest request;
    request.set_text(fail_odd && index % 2 == 1 ? "fail" : "hello");
    request.mutable_stopping()->set_max_new_tokens(n);
    return request;
  };
}

TEST(LoadGeneratorTest, ClosedLoopKeepsExactlyNInFlight) {
  FakeServer server(milliseconds(20));
  LoadOptions options;
  options.concurrency = 4;
  options.num_requests = 12;
  ASSERT_TRUE(options.Validate().ok());
  LoadResult result = RunLoad(ChannelTo(server), options, Tokens(5));
  EXPECT_EQ(result.num_started, 12);
  EXPECT_EQ(result.num_ok, 12);
  EXPECT_TRUE(result.errors.empty());
  EXPECT_EQ(result.generated_tokens, 60);
  EXPECT_EQ(result.time_to_first_token.count(), 12);
  // One sample per token after the first of each request.
  EXPECT_EQ(result.inter_token.count(), 12 * 4);
  EXPECT_EQ(result.end_to_end.count(), 12);
  EXPECT_EQ(result.max_in_flight_seen, 4);
  // Each call lasts ~100 ms: the server saw the four at once.
  EXPECT_EQ(server.service().max_active_streams(), 4);
  EXPECT_GT(result.wall_seconds, 0.0);
}

TEST(LoadGeneratorTest, ErrorsAreCountedByCode) {
  FakeServer server(milliseconds(1));
  LoadOptions options;
  options.concurrency = 2;
  options.num_requests = 10;
  LoadResult result = RunLoad(ChannelTo(server), options, Tokens(2, true));
  EXPECT_EQ(result.num_started, 10);
  EXPECT_EQ(result.num_ok, 5);
  ASSERT_EQ(result.errors.count("RESOURCE_EXHAUSTED"), 1u);
  EXPECT_EQ(result.errors.at("RESOURCE_EXHAUSTED"), 5);
  EXPECT_EQ(result.first_error_messages.at("RESOURCE_EXHAUSTED"), "queue full");
  // Failed calls are in no latency.
  EXPECT_EQ(result.end_to_end.count(), 5);

  LoadDescription description;
  description.target = server.target();
  nlohmann::json json = LoadReportJson(description, result);
  EXPECT_EQ(json["num_requests"], 10);
  EXPECT_EQ(json["num_ok"], 5);
  EXPECT_EQ(json["errors"]["RESOURCE_EXHAUSTED"], 5);
  EXPECT_EQ(json["ttft"]["count"], 5);
  EXPECT_TRUE(json["inter_token_latency"].contains("p99_ms"));
  const std::string text = LoadReportText(description, result);
  EXPECT_NE(text.find("5 ok / 10 total"), std::string::npos);
  EXPECT_NE(text.find("RESOURCE_EXHAUSTED 5 (first: queue full)"),
            std::string::npos);
}

TEST(LoadGeneratorTest, OpenLoopRespectsMaxInFlight) {
  FakeServer server(milliseconds(20));
  LoadOptions options;
  // Arrivals every 5 ms, calls of ~60 ms, at most 2 at once: arrivals wait.
  options.rate_per_second = 200;
  options.poisson = false;
  options.max_in_flight = 2;
  options.num_requests = 8;
  LoadResult result = RunLoad(ChannelTo(server), options, Tokens(3));
  EXPECT_EQ(result.num_started, 8);
  EXPECT_EQ(result.num_ok, 8);
  EXPECT_LE(result.max_in_flight_seen, 2);
  EXPECT_LE(server.service().max_active_streams(), 2);
  EXPECT_GT(result.num_delayed_starts, 0);
}

TEST(LoadGeneratorTest, DurationStopsStartingAndWaitsForTheRest) {
  FakeServer server(milliseconds(10));
  LoadOptions options;
  options.concurrency = 2;
  options.duration_seconds = 0.2;
  LoadResult result = RunLoad(ChannelTo(server), options, Tokens(3));
  EXPECT_GE(result.num_started, 2);
  EXPECT_EQ(result.num_ok, result.num_started);
}

TEST(LoadGeneratorTest, UnreachableServerFailsEveryCall) {
  ChannelOptions channel_options;
  channel_options.target = "127.0.0.1:1";  // nothing listens on port 1
  auto channel = CreateClientChannel(channel_options);
  ASSERT_TRUE(channel.ok());
  LoadOptions options;
  options.concurrency = 2;
  options.num_requests = 4;
  LoadResult result = RunLoad(*channel, options, Tokens(3));
  EXPECT_EQ(result.num_ok, 0);
  EXPECT_EQ(result.errors.at("UNAVAILABLE"), 4);
}

TEST(LoadOptionsTest, Validate) {
  LoadOptions options;
  EXPECT_FALSE(options.Validate().ok());  // neither count nor duration
  options.num_requests = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.num_requests = 1;
  EXPECT_TRUE(options.Validate().ok());
  options.concurrency = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.rate_per_second = 1.0;  // open loop: concurrency unused
  EXPECT_TRUE(options.Validate().ok());
  options.max_in_flight = 0;
  EXPECT_FALSE(options.Validate().ok());
}

}  // namespace
}  // namespace tributary
