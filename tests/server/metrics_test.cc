// /metrics scraped over HTTP (design.md §5): serving counters move as
// requests complete, residual series exist for every (layer, sublayer) of
// the model with finite values, and promtool accepts the exposition.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using testing_util::GreedyRequest;
using testing_util::HttpGet;
using testing_util::TestServer;
using testing_util::TestServerConfig;

// "name{labels}" -> value, for every sample line.
std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    samples[std::string(line.substr(0, space))] =
        std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return samples;
}

double Get(const std::map<std::string, double>& samples,
           const std::string& key) {
  auto it = samples.find(key);
  EXPECT_NE(it, samples.end()) << "missing sample " << key;
  return it == samples.end() ? NAN : it->second;
}

TEST(MetricsTest, ScrapedSeriesMoveAndParse) {
  ServerConfig config = TestServerConfig();
  config.metrics_port = 0;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  const int port = t->server->metrics_port();
  ASSERT_GT(port, 0);
  auto before_text = HttpGet(port, "/metrics");
  ASSERT_TRUE(before_text.ok()) << before_text.status();
  const auto before = ParseSamples(*before_text);
  const std::string length = "tributary_requests_total{finish_reason=\"length\"}";
  EXPECT_EQ(Get(before, length), 0.0);

  int generated = 0;
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    ASSERT_TRUE(t->stub->Generate(&ctx, GreedyRequest("ROMEO:\nO", 5 + i), &r).ok());
    generated += r.usage().generated_tokens();
  }
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    v1::GenerateRequest bad = GreedyRequest("x", 4);
    bad.mutable_sampling()->set_top_p(7.0f);
    EXPECT_FALSE(t->stub->Generate(&ctx, bad, &r).ok());
  }
  ASSERT_TRUE(t->WaitIdle());
  auto after_text = HttpGet(port, "/metrics");
  ASSERT_TRUE(after_text.ok()) << after_text.status();
  const auto after = ParseSamples(*after_text);
  EXPECT_EQ(Get(after, length), 3.0);
  EXPECT_EQ(Get(after, "tributary_generation_tokens_total"), generated);
  EXPECT_GT(Get(after, "tributary_prompt_tokens_total"), 0.0);
  EXPECT_EQ(Get(after, "tributary_request_errors_total{code=\"INVALID_ARGUMENT\"}"),
            1.0);
  EXPECT_EQ(Get(after, "tributary_time_to_first_token_seconds_count"), 3.0);
  EXPECT_EQ(Get(after, "tributary_e2e_request_latency_seconds_count"), 3.0);
  EXPECT_GT(Get(after, "tributary_inter_token_latency_seconds_count"), 0.0);
  EXPECT_GT(Get(after, "tributary_step_duration_seconds_count"), 0.0);
  EXPECT_GT(Get(after, "tributary_batch_size_count"), 0.0);
  EXPECT_EQ(Get(after, "tributary_requests_running"), 0.0);
  EXPECT_EQ(Get(after, "tributary_requests_waiting"), 0.0);
  EXPECT_EQ(Get(after, "tributary_kv_cache_usage_ratio"), 0.0);
  EXPECT_EQ(Get(after, "tributary_state_slots_usage_ratio"), 0.0);
  // The engine runs on the CPU here; the version is CMake's project(VERSION).
  EXPECT_EQ(Get(after, absl::StrCat("tributary_build_info{backend=\"cpu\","
                                    "model=\"tiny-shakespeare\",version=\"",
                                    TRIBUTARY_VERSION, "\"}")),
            1.0);

  // Every (layer, sublayer) of the model, with finite positive values.
  const ModelConfig& mc = t->server->model().config();
  for (int layer = 0; layer < mc.num_hidden_layers; ++layer) {
    const char* kind =
        mc.layer_types[static_cast<size_t>(layer)] == LayerKind::kFullAttention
            ? "full_attention"
            : "linear_attention";
    for (const char* sub : {"mixer", "ffn"}) {
      SCOPED_TRACE(absl::StrCat(layer, " ", sub));
      const std::string labels = absl::StrCat("{kind=\"", kind, "\",layer=\"",
                                              layer, "\",sublayer=\"", sub, "\"}");
      for (const char* series :
           {"tributary_residual_update_to_stream_ratio",
            "tributary_residual_stream_norm", "tributary_residual_update_norm",
            "tributary_residual_sum_norm"}) {
        const double count = Get(after, absl::StrCat(series, "_count", labels));
        const double sum = Get(after, absl::StrCat(series, "_sum", labels));
        EXPECT_GT(count, 0.0) << series;
        EXPECT_TRUE(std::isfinite(sum) && sum > 0.0) << series << " " << sum;
      }
      const std::string short_labels =
          absl::StrCat("{layer=\"", layer, "\",sublayer=\"", sub, "\"}");
      EXPECT_EQ(Get(after, "tributary_residual_nonfinite_total" + short_labels), 0.0);
      const double max_abs =
          Get(after, "tributary_residual_max_abs_activation" + short_labels);
      EXPECT_TRUE(std::isfinite(max_abs) && max_abs > 0.0);
    }
  }
  EXPECT_GT(Get(after, "tributary_residual_final_stream_norm_count"), 0.0);
  EXPECT_GT(Get(after,
                "tributary_residual_update_to_stream_ratio_distribution_count{"
                "kind=\"full_attention\",sublayer=\"mixer\"}"),
            0.0);

  // The exposition parses (promtool, from Debian's prometheus package).
  const std::string path = ::testing::TempDir() + "/tributary_metrics.txt";
  std::ofstream(path) << *after_text;
  const std::string command =
      absl::StrCat(TRIBUTARY_PROMTOOL, " check metrics < ", path, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int rc = pclose(pipe);
  EXPECT_EQ(rc, 0) << "promtool: " << output;
}

// No request a client can send moves the model-health series or fires
// their alerts: a steering whose product overflows float32 (which would
// fill the stream with Inf) is refused, and a request that skips layer 2
// (60 tokens of zero update there) leaves layer 2's ratio series as they
// were, its tokens counted as intervened instead.
TEST(MetricsTest, InterventionsCannotMoveTheModelHealthSeries) {
  ServerConfig config = TestServerConfig();
  config.metrics_port = 0;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  const int port = t->server->metrics_port();
  const int64_t hidden = t->server->model().config().hidden_size;
  const ModelConfig& mc = t->server->model().config();
  const std::string kind =
      mc.layer_types[2] == LayerKind::kFullAttention ? "full_attention"
                                                     : "linear_attention";
  const std::string ratio_count = absl::StrCat(
      "tributary_residual_update_to_stream_ratio_count{kind=\"", kind,
      "\",layer=\"2\",sublayer=\"mixer\"}");
  const std::string ratio_sum = absl::StrCat(
      "tributary_residual_update_to_stream_ratio_sum{kind=\"", kind,
      "\",layer=\"2\",sublayer=\"mixer\"}");
  // Some plain traffic first, so that the series exist.
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    ASSERT_TRUE(t->stub->Generate(&ctx, GreedyRequest("ROMEO:\nO", 4), &r).ok());
  }
  ASSERT_TRUE(t->WaitIdle());
  auto before_text = HttpGet(port, "/metrics");
  ASSERT_TRUE(before_text.ok()) << before_text.status();
  const auto before = ParseSamples(*before_text);
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    v1::GenerateRequest overflow = GreedyRequest("ROMEO:\nO", 8);
    v1::Steering* st = overflow.add_steering();
    st->set_layer(3);
    st->set_scale(3e38f);
    for (int64_t i = 0; i < hidden; ++i) {
      st->mutable_direction()->mutable_inline_vector()->add_values(1.0f);
    }
    const grpc::Status s = t->stub->Generate(&ctx, overflow, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("steering[0].scale"), std::string::npos)
        << s.error_message();
  }
  int64_t skipped_tokens = 0;
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    v1::GenerateRequest skipping = GreedyRequest("ROMEO:\nO", 60);
    skipping.add_skip_layers(2);
    ASSERT_TRUE(t->stub->Generate(&ctx, skipping, &r).ok());
    skipped_tokens = r.usage().prompt_tokens() + r.usage().generated_tokens() - 1;
  }
  ASSERT_TRUE(t->WaitIdle());
  auto after_text = HttpGet(port, "/metrics");
  ASSERT_TRUE(after_text.ok()) << after_text.status();
  const auto after = ParseSamples(*after_text);
  EXPECT_EQ(Get(after, ratio_count), Get(before, ratio_count));
  EXPECT_EQ(Get(after, ratio_sum), Get(before, ratio_sum));
  for (int layer = 0; layer < mc.num_hidden_layers; ++layer) {
    for (const char* sub : {"mixer", "ffn"}) {
      EXPECT_EQ(Get(after, absl::StrCat("tributary_residual_nonfinite_total{layer=\"",
                                        layer, "\",sublayer=\"", sub, "\"}")),
                0.0);
    }
  }
  EXPECT_EQ(Get(after, "tributary_residual_intervened_tokens_total") -
                Get(before, "tributary_residual_intervened_tokens_total"),
            static_cast<double>(skipped_tokens));
}

}  // namespace
}  // namespace tributary
