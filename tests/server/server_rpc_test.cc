// Every RPC end to end on a loopback server, and the call lifecycle:
// cancellation, deadlines, a full queue, a slow reader, drain, auth.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/model/safetensors_writer.h"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::GreedyRequest;
using testing_util::ReadStream;
using testing_util::TestServer;
using testing_util::TestServerConfig;

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

TEST(ServerRpcTest, EveryRpcEndToEnd) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);

  {  // GetModelInfo
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    ASSERT_TRUE(t->stub->GetModelInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.model_name(), "tiny-shakespeare");
    EXPECT_EQ(info.num_layers(), 8);
    EXPECT_EQ(info.layer_types_size(), 8);
    EXPECT_EQ(info.layer_types(3), "full_attention");
    EXPECT_EQ(info.vocab_size(), 3008);
    EXPECT_TRUE(info.has_tokenizer());
    EXPECT_GT(info.num_kv_blocks(), 0);
    EXPECT_GT(info.num_state_slots(), 0);
    EXPECT_GT(info.kv_block_bytes(), 0);
    EXPECT_GT(info.state_slot_bytes(), 0);
    EXPECT_EQ(info.context_tokens(), 1024);
  }
  {  // Tokenize: text and chat
    grpc::ClientContext ctx;
    v1::TokenizeRequest request;
    request.set_text("ROMEO: hello there");
    request.set_return_pieces(true);
    v1::TokenizeResponse response;
    ASSERT_TRUE(t->stub->Tokenize(&ctx, request, &response).ok());
    EXPECT_GT(response.token_ids_size(), 2);
    EXPECT_EQ(response.pieces_size(), response.token_ids_size());
  }
  // Generate and GenerateStream agree for the same seeded sampled request.
  v1::GenerateRequest request = GreedyRequest("ROMEO:\nBut soft", 32);
  request.mutable_sampling()->set_temperature(0.9f);
  request.mutable_sampling()->set_seed(42);
  request.mutable_response()->set_logprobs(true);
  request.mutable_response()->set_top_logprobs(3);
  request.mutable_response()->set_residual_summary(true);
  v1::GenerateResponse unary;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "test-42");
    ASSERT_TRUE(t->stub->Generate(&ctx, request, &unary).ok());
    const auto& md = ctx.GetServerInitialMetadata();
    auto it = md.find("x-request-id");
    ASSERT_NE(it, md.end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()), "test-42");
  }
  EXPECT_EQ(unary.token_ids_size(), 32);
  EXPECT_EQ(unary.logprobs_size(), 32);
  EXPECT_EQ(unary.logprobs(0).top_size(), 3);
  EXPECT_EQ(unary.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(unary.usage().generated_tokens(), 32);
  EXPECT_GT(unary.usage().prompt_tokens(), 0);
  EXPECT_GT(unary.timing().total_seconds(), 0.0);
  EXPECT_FALSE(unary.text().empty());
  EXPECT_EQ(unary.residual_summary().sublayers_size(), 16);
  EXPECT_EQ(unary.residual_summary().sublayers(0).num_tokens(),
            unary.usage().prompt_tokens() + 31);

  v1::GenerateResponse streamed;
  int num_messages = 0;
  ASSERT_TRUE(ReadStream(*t->stub, request, &streamed, &num_messages).ok());
  EXPECT_EQ(streamed.text(), unary.text());
  EXPECT_EQ(std::vector<int32_t>(streamed.token_ids().begin(),
                                 streamed.token_ids().end()),
            std::vector<int32_t>(unary.token_ids().begin(),
                                 unary.token_ids().end()));
  EXPECT_EQ(streamed.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_GE(num_messages, 2);

  {  // Token-id and chat inputs, a stop string, the residual trace
    v1::GenerateRequest by_ids;
    for (int32_t id : unary.token_ids()) by_ids.mutable_token_ids()->add_ids(id);
    by_ids.mutable_stopping()->set_max_new_tokens(4);
    by_ids.mutable_response()->set_residual_trace(true);
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    ASSERT_TRUE(t->stub->Generate(&ctx, by_ids, &r).ok());
    EXPECT_EQ(r.usage().generated_tokens(), 4);
    ASSERT_EQ(r.residual_trace_size(), 32 + 3);
    EXPECT_EQ(r.residual_trace(5).position(), 5);
    EXPECT_EQ(r.residual_trace(5).norms_size(), 3 * 16);

    v1::GenerateRequest chat;
    auto* m = chat.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("Speak, friend.");
    chat.mutable_stopping()->set_max_new_tokens(8);
    grpc::ClientContext ctx2;
    ASSERT_TRUE(t->stub->Generate(&ctx2, chat, &r).ok());
  }
  {  // GetResidualStats over the window covers the tokens above
    grpc::ClientContext ctx;
    v1::GetResidualStatsRequest rs;
    v1::ResidualStats stats;
    ASSERT_TRUE(t->stub->GetResidualStats(&ctx, rs, &stats).ok());
    EXPECT_DOUBLE_EQ(stats.window_seconds(), 60.0);
    ASSERT_EQ(stats.sublayers_size(), 16);
    for (const auto& s : stats.sublayers()) {
      EXPECT_GT(s.num_tokens(), 0);
      EXPECT_TRUE(std::isfinite(s.update_to_stream_ratio().mean()));
      EXPECT_GT(s.update_to_stream_ratio().mean(), 0.0);
      EXPECT_GE(s.update_to_stream_ratio().max(),
                s.update_to_stream_ratio().mean());
    }
    EXPECT_EQ(stats.sublayers(7).kind(), v1::LAYER_KIND_FULL_ATTENTION);
    EXPECT_EQ(stats.sublayers(7).sublayer(), v1::SUBLAYER_FFN);
    EXPECT_GT(stats.final_num_tokens(), 0);
  }
  {  // Health on both ports
    grpc::health::v1::HealthCheckRequest hr;
    grpc::health::v1::HealthCheckResponse response;
    grpc::ClientContext ctx;
    ASSERT_TRUE(t->health->Check(&ctx, hr, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    auto api_health = grpc::health::v1::Health::NewStub(t->channel);
    grpc::ClientContext ctx2;
    hr.set_service("tributary.v1.Tributary");
    ASSERT_TRUE(api_health->Check(&ctx2, hr, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  EXPECT_TRUE(t->WaitIdle());
}

TEST(ServerRpcTest, CancellingMidStreamFreesTheSequence) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);
  grpc::ClientContext ctx;
  auto reader = t->stub->GenerateStream(&ctx, GreedyRequest("JULIET:\nO", 900));
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_GT(t->server->engine().counts().num_active, 0);
  ctx.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(t->WaitIdle());
}

TEST(ServerRpcTest, DeadlineEndsTheRequestAndFreesIt) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Milliseconds(150)));
  v1::GenerateResponse response;
  // 1000 tokens take the default model well over 150 ms.
  v1::GenerateRequest request = GreedyRequest("HAMLET:\nTo be", 1000);
  const grpc::Status s = t->stub->Generate(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_TRUE(t->WaitIdle());
}

TEST(ServerRpcTest, FullQueueIsResourceExhausted) {
  ServerConfig config = TestServerConfig();
  config.max_running = 1;
  config.max_waiting = 1;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  // One running (long), then one waiting: the next is refused.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  // A submitted request reaches the engine's published counts only when
  // the engine thread has drained it and scheduled a step: wait for that
  // state before each next submit.
  auto wait_for = [&](int64_t running, int64_t waiting) {
    const absl::Time deadline = absl::Now() + testing_util::kHangGuard;
    while (absl::Now() < deadline) {
      const Engine::Counts c = t->server->engine().counts();
      if (c.num_running == running && c.num_waiting == waiting) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  };
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(t->stub->GenerateStream(
        contexts.back().get(), GreedyRequest("KING RICHARD:\nNow", 1000)));
    ASSERT_TRUE(wait_for(1, i)) << "request " << i;
  }
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  const grpc::Status s =
      t->stub->Generate(&ctx, GreedyRequest("third", 4), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("queue"));
  for (auto& c : contexts) c->TryCancel();
  for (auto& r : readers) {
    v1::GenerateResponse m;
    while (r->Read(&m)) {
    }
    r->Finish();
  }
  EXPECT_TRUE(t->WaitIdle());
}

TEST(ServerRpcTest, ClientThatStopsReadingIsCutOff) {
  ServerConfig config = TestServerConfig();
  config.slow_readers.max_pending_tokens = 16;
  config.metrics_port = 0;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  // gRPC's own client buffers whatever the server sends, so the reader that
  // never reads is a raw HTTP/2 client with a zero stream window.
  auto fd = testing_util::StartNonReadingStream(
      t->server->api_port(), GreedyRequest("MENENIUS:\nWhat work", 1000));
  ASSERT_TRUE(fd.ok()) << fd.status();
  // The engine lets go of the sequence long before 1000 tokens.
  const absl::Time deadline = absl::Now() + testing_util::kHangGuard;
  while (t->server->engine().counts().num_steps == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(t->WaitIdle());
  auto metrics = testing_util::HttpGet(t->server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("tributary_request_errors_total{code="
                                  "\"RESOURCE_EXHAUSTED\"} 1"));
  const size_t at = metrics->find("\ntributary_generation_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  const double generated = std::strtod(
      metrics->c_str() + at + sizeof("\ntributary_generation_tokens_total"),
      nullptr);
  EXPECT_GT(generated, 16);
  EXPECT_LT(generated, 200);
  ::close(*fd);
}

// A stream the drain's grace cannot wait for ends UNAVAILABLE ("draining"):
// the server cut it, the client did not cancel it, and a retry elsewhere
// may succeed.
TEST(ServerRpcTest, StreamCutByTheDrainIsUnavailable) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);
  grpc::ClientContext ctx;
  auto reader = t->stub->GenerateStream(&ctx, GreedyRequest("ROMEO:\nO", 1000));
  v1::GenerateResponse m;
  ASSERT_TRUE(reader->Read(&m));
  std::thread drainer([&] { t->server->Drain(absl::Milliseconds(1)); });
  while (reader->Read(&m)) {
  }
  const grpc::Status s = reader->Finish();
  drainer.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("draining"));
}

// The health service's answers for the server (""), the API's name and an
// unknown name: Check is NOT_FOUND for it, Watch says SERVICE_UNKNOWN.
TEST(ServerRpcTest, HealthKnowsItsServices) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);
  for (const char* name : {"", "tributary.v1.Tributary"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(t->health->Check(&ctx, request, &response).ok()) << name;
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::health::v1::HealthCheckRequest unknown;
  unknown.set_service("no.such.Service");
  {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_EQ(t->health->Check(&ctx, unknown, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  grpc::ClientContext ctx;
  auto watch = t->health->Watch(&ctx, unknown);
  grpc::health::v1::HealthCheckResponse first;
  ASSERT_TRUE(watch->Read(&first));
  EXPECT_EQ(first.status(),
            grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
  ctx.TryCancel();
  while (watch->Read(&first)) {
  }
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST(ServerRpcTest, DrainRefusesNewWorkAndHealthWatchSeesIt) {
  auto t = TestServer::Start(TestServerConfig());
  ASSERT_NE(t, nullptr);
  // Watch health on the health-only port.
  std::vector<int> seen;
  std::mutex seen_mu;
  grpc::ClientContext watch_ctx;
  grpc::health::v1::HealthCheckRequest hr;
  auto watch = t->health->Watch(&watch_ctx, hr);
  std::thread watcher([&] {
    grpc::health::v1::HealthCheckResponse r;
    while (watch->Read(&r)) {
      std::lock_guard<std::mutex> lock(seen_mu);
      seen.push_back(r.status());
    }
  });
  // Work in flight during the drain finishes normally.
  grpc::ClientContext ctx;
  auto reader = t->stub->GenerateStream(&ctx, GreedyRequest("ROMEO:\nO", 300));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  std::thread drainer([&] { t->server->Drain(absl::Seconds(20)); });
  // While draining, new requests are refused.
  grpc::StatusCode refused = grpc::StatusCode::OK;
  for (int i = 0; i < 200 && refused == grpc::StatusCode::OK; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
    if (t->server->health().state() != HealthMonitor::State::kDraining) continue;
    grpc::ClientContext c;
    v1::GenerateResponse r;
    refused = t->stub->Generate(&c, GreedyRequest("late", 2), &r).error_code();
  }
  EXPECT_EQ(refused, grpc::StatusCode::UNAVAILABLE);
  int tokens = first.token_ids_size();
  v1::GenerateResponse m;
  while (reader->Read(&m)) tokens += m.token_ids_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 300);
  drainer.join();
  watch_ctx.TryCancel();
  watcher.join();
  std::lock_guard<std::mutex> lock(seen_mu);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(seen.back(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

TEST(ServerRpcTest, BearerTokenGuardsTheApiButNotHealth) {
  ServerConfig config = TestServerConfig();
  config.auth_token = "s3cret-token";
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  v1::ModelInfo info;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(t->stub->GetModelInfo(&ctx, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer wrong");
    const grpc::Status s = t->stub->GetModelInfo(&ctx, {}, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(s.error_message(), HasSubstr("authorization"));
  }
  // The scheme is case-insensitive (RFC 7235); the token is not.
  for (const char* value :
       {"Bearer s3cret-token", "bearer s3cret-token", "BEARER  s3cret-token"}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", value);
    EXPECT_TRUE(t->stub->GetModelInfo(&ctx, {}, &info).ok()) << value;
  }
  for (const char* value :
       {"Bearer S3CRET-TOKEN", "Basic s3cret-token", "Bearers3cret-token"}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", value);
    EXPECT_EQ(t->stub->GetModelInfo(&ctx, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << value;
  }
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse r;
    EXPECT_EQ(t->stub->Generate(&ctx, GreedyRequest("x", 2), &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(t->health->Check(&ctx, {}, &response).ok());
  EXPECT_TRUE(t->WaitIdle());
}

// Server reflection describes the API, so it needs the token as the API
// does, on both ports; health stays open for probes.
TEST(ServerRpcTest, BearerTokenGuardsReflectionButNotHealth) {
  ServerConfig config = TestServerConfig();
  config.auth_token = "s3cret-token";
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  const std::string reflection =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  // ServerReflectionRequest { list_services: "" } (field 7).
  const std::string list_services("\x3a\x00", 2);
  for (const auto& channel : {t->channel, t->health_channel}) {
    SCOPED_TRACE(channel == t->channel ? "API port" : "health port");
    for (const char* value : {"", "Bearer wrong"}) {
      SCOPED_TRACE(value);
      std::vector<std::pair<std::string, std::string>> metadata;
      if (*value != '\0') metadata.emplace_back("authorization", value);
      const testing_util::RawReply reply =
          testing_util::RawCall(channel, reflection, list_services, metadata);
      EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << reply.status.error_message();
      EXPECT_THAT(reply.status.error_message(), HasSubstr("authorization"));
      EXPECT_TRUE(reply.messages.empty());
    }
    const testing_util::RawReply reply = testing_util::RawCall(
        channel, reflection, list_services,
        {{"authorization", "Bearer s3cret-token"}});
    EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
    ASSERT_EQ(reply.messages.size(), 1u);
    EXPECT_THAT(reply.messages[0], HasSubstr("grpc.health.v1.Health"));
    // Each port lists what it serves.
    EXPECT_EQ(absl::StrContains(reply.messages[0], "tributary.v1.Tributary"),
              channel == t->channel);
  }
  // Health, on both ports, without the token.
  for (const auto& channel : {t->channel, t->health_channel}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(grpc::health::v1::Health::NewStub(channel)
                    ->Check(&ctx, {}, &response)
                    .ok());
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

TEST(ServerRpcTest, InterventionsOverTheApi) {
  // A named direction file, as tributary-direction writes it.
  const std::string path = ::testing::TempDir() + "/tributary_vectors.safetensors";
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 7 == 0) ? 3.0f : -0.5f;
  TensorToWrite tensor;
  tensor.name = "spiky";
  tensor.shape = {256};
  tensor.fill = [&v](uint8_t* dst, size_t bytes) { std::memcpy(dst, v.data(), bytes); };
  ASSERT_TRUE(WriteSafetensors(path, {tensor}).ok());
  ServerConfig config = TestServerConfig();
  config.steering_vectors_file = path;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    ASSERT_TRUE(t->stub->GetModelInfo(&ctx, {}, &info).ok());
    ASSERT_EQ(info.steering_vector_names_size(), 1);
    EXPECT_EQ(info.steering_vector_names(0), "spiky");
  }
  auto generate = [&](const v1::GenerateRequest& request) {
    grpc::ClientContext ctx;
    v1::GenerateResponse response;
    EXPECT_TRUE(t->stub->Generate(&ctx, request, &response).ok());
    return response;
  };
  const v1::GenerateRequest plain = GreedyRequest("ROMEO:\nBut soft", 10);
  const v1::GenerateResponse base = generate(plain);
  v1::GenerateRequest steered = plain;
  auto* s = steered.add_steering();
  s->set_layer(4);
  s->mutable_direction()->set_name("spiky");
  s->set_scale(4.0f);
  steered.mutable_logit_lens()->add_layers(7);
  steered.mutable_logit_lens()->set_top_n(3);
  const v1::GenerateResponse r = generate(steered);
  EXPECT_NE(r.text(), base.text());
  ASSERT_EQ(r.logit_lens_size(), 10);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r.logit_lens(i).layer(), 7);
    ASSERT_EQ(r.logit_lens(i).top_size(), 3);
    // The last layer's lens is the model: its top token is the greedy one.
    EXPECT_EQ(r.logit_lens(i).top(0).token_id(), r.token_ids(i));
    EXPECT_FALSE(r.logit_lens(i).top(0).text().empty());
  }
  // A scale of 0 and skipping nothing change nothing.
  v1::GenerateRequest neutral = plain;
  auto* n = neutral.add_steering();
  n->mutable_direction()->set_name("spiky");
  n->set_scale(0.0f);
  EXPECT_EQ(generate(neutral).text(), base.text());
  EXPECT_TRUE(t->WaitIdle());
}

// --synthetic: a model of a published shape (here the test preset) with
// random weights, no files: token-id prompts in, token ids out.
TEST(ServerRpcTest, SyntheticModelServesTokenIds) {
  ServerConfig config = TestServerConfig();
  config.model_dir.clear();
  config.synthetic_model = "tiny";
  config.synthetic_seed = 5;
  auto server = TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  v1::GenerateRequest request;
  for (int32_t id : {3, 14, 15, 92}) request.mutable_token_ids()->add_ids(id);
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_new_tokens(6);
  request.mutable_response()->set_return_token_ids(true);
  v1::GenerateResponse first, second;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server->stub->Generate(&context, request, &first).ok());
  }
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server->stub->Generate(&context, request, &second).ok());
  }
  ASSERT_EQ(first.token_ids().size(), 6);
  for (int32_t id : first.token_ids()) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 512);
  }
  EXPECT_EQ(std::vector<int32_t>(first.token_ids().begin(), first.token_ids().end()),
            std::vector<int32_t>(second.token_ids().begin(), second.token_ids().end()));
  grpc::ClientContext context;
  v1::GetModelInfoRequest info_request;
  v1::ModelInfo info;
  ASSERT_TRUE(server->stub->GetModelInfo(&context, info_request, &info).ok());
  EXPECT_EQ(info.model_name(), "synthetic:tiny");
  // A text prompt needs a tokenizer, which a synthetic model has not.
  v1::GenerateRequest text = GreedyRequest("hello", 2);
  grpc::ClientContext text_context;
  v1::GenerateResponse unused;
  const grpc::Status status = server->stub->Generate(&text_context, text, &unused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();

  ServerConfig both = TestServerConfig();
  both.synthetic_model = "tiny";
  EXPECT_THAT(std::string(Server::Start(both).status().message()),
              HasSubstr("not both"));
}

TEST(ServerRpcTest, ModelThatFailsToLoadIsAnError) {
  ServerConfig config = TestServerConfig();
  config.model_dir = "/nonexistent/model";
  auto started = Server::Start(config);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("/nonexistent/model"));
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::GreedyRequest;
using testing_util::TestServer;
using testing_util::TestServerConfig;

grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(TestServer& t) {
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse r;
  if (!t.health->Check(&ctx, {}, &r).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return r.status();
}

TEST(ServerHealthTest, HungStepTurnsNotServingUntilItEnds) {
  std::atomic<bool> hang{false};
  ServerConfig config = TestServerConfig();
  config.liveness_timeout = absl::Milliseconds(300);
  config.engine_fault_hook = [&hang]() -> absl::Status {
    // A step that takes 1.5 s, five times the liveness timeout.
    if (hang.exchange(false)) absl::SleepFor(absl::Milliseconds(1500));
    return absl::OkStatus();
  };
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(HealthOf(*t), grpc::health::v1::HealthCheckResponse::SERVING);
  hang = true;
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  std::thread call([&] {
    EXPECT_TRUE(t->stub->Generate(&ctx, GreedyRequest("ROMEO:", 4), &response)
                    .ok());
  });
  bool saw_not_serving = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!saw_not_serving && absl::Now() < deadline) {
    saw_not_serving =
        HealthOf(*t) == grpc::health::v1::HealthCheckResponse::NOT_SERVING;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(saw_not_serving);
  call.join();
  // Progress again: back to SERVING.
  bool serving = false;
  while (!serving && absl::Now() < deadline) {
    serving = HealthOf(*t) == grpc::health::v1::HealthCheckResponse::SERVING;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(serving);
}

TEST(ServerHealthTest, EngineFailureFailsRequestsAndStopsTheServer) {
  ServerConfig config = TestServerConfig();
  config.engine_fault_hook = []() -> absl::Status {
    return absl::UnavailableError("device lost");
  };
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  const grpc::Status s =
      t->stub->Generate(&ctx, GreedyRequest("ROMEO:", 4), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("device lost"));
  // The server asks to stop with an error (main exits non-zero), and
  // health is NOT_SERVING.
  const absl::Status reason = t->server->Wait();
  EXPECT_EQ(reason.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HealthOf(*t), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

}  // namespace
}  // namespace tributary
