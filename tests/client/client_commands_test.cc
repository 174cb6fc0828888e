// The commands of `tributary` against the in-process fake service, and the
// pure renderings of their replies.
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include "client/generate_command.h"
#include "client/generate_flags.h"
#include "client/health_command.h"
#include "client/model_commands.h"
#include "client/status_names.h"
#include "fake_tributary_service.h"

namespace tributary {
namespace {

using std::chrono::milliseconds;

struct Outcome {
  absl::Status status;
  std::string out;
  std::string err;
};

// Parses `args` as a `tributary` command line aimed at `server` and runs it,
// capturing stdout and stderr.
Outcome RunCommand(const FakeServer& server, std::vector<const char*> args) {
  const std::string target = server.target();
  args.insert(args.begin(), {"tributary", "--target", target.c_str()});
  auto line = CommandLine::Parse(
      static_cast<int>(args.size()), args.data(), ChannelFlagNames(), {},
      {GenerateCommandSpec(), ChatCommandSpec(), TokenizeCommandSpec(),
       InfoCommandSpec(), StatsCommandSpec(), HealthCommandSpec()});
  EXPECT_TRUE(line.ok()) << line.status();
  auto options = ParseChannelOptions(line->args());
  EXPECT_TRUE(options.ok()) << options.status();
  auto channel = CreateClientChannel(*options);
  EXPECT_TRUE(channel.ok());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  Outcome outcome;
  const std::string& command = line->command();
  if (command == "generate" || command == "chat") {
    outcome.status = RunGenerateCommand(*line, *options, *channel);
  } else if (command == "tokenize") {
    outcome.status = RunTokenizeCommand(*line, *options, *channel);
  } else if (command == "info") {
    outcome.status = RunInfoCommand(*line, *options, *channel);
  } else if (command == "stats") {
    outcome.status = RunStatsCommand(*line, *options, *channel);
  } else {
    outcome.status = RunHealthCommand(*line, *options, *channel);
  }
  outcome.out = testing::internal::GetCapturedStdout();
  outcome.err = testing::internal::GetCapturedStderr();
  return outcome;
}

TEST(StatusNamesTest, NamesAndRpcError) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::INVALID_ARGUMENT),
            "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED),
            "UNAUTHENTICATED");
  // 20: outside the named codes but inside the enum's range (0..31), so
  // that the cast itself is defined.
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(20)), "CODE_20");
  EXPECT_TRUE(RpcError(grpc::Status::OK).ok());
  absl::Status error = RpcError(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sampling.top_p bad"));
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.message(), "INVALID_ARGUMENT: sampling.top_p bad");
  EXPECT_EQ(RpcError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "")).message(),
            "UNAVAILABLE");
}

TEST(RenderingTest, ModelInfoAndTokens) {
  v1::ModelInfo info;
  info.set_model_name("m");
  for (const char* type :
       {"linear_attention", "linear_attention", "linear_attention",
        "full_attention", "linear_attention"}) {
    info.add_layer_types(type);
  }
  info.set_state_slot_bytes(3 << 20);
  const std::string text = RenderModelInfo(info);
  EXPECT_NE(text.find("model_name: m\n"), std::string::npos);
  EXPECT_NE(text.find("layer_types: 0-2 linear_attention, 3 full_attention, "
                      "4 linear_attention\n"),
            std::string::npos);
  EXPECT_NE(text.find("state_slot_bytes: 3145728 (3.0 MiB)\n"),
            std::string::npos);
  EXPECT_NE(text.find("steering_vector_names: -\n"), std::string::npos);

  v1::TokenizeResponse tokens;
  tokens.add_token_ids(9707);
  tokens.add_token_ids(1879);
  tokens.add_pieces("Hello");
  tokens.add_pieces("\xc4\xa0world\n");
  EXPECT_EQ(RenderTokens(tokens, false), "9707,1879\n");
  const std::string pieces = RenderTokens(tokens, true);
  EXPECT_NE(pieces.find("9707  \"Hello\""), std::string::npos);
  // UTF-8 kept, the newline escaped.
  EXPECT_NE(pieces.find("1879  \"\xc4\xa0world\\n\""), std::string::npos)
      << pieces;
}

TEST(ClientCommandsTest, GenerateStreamsTextAndSendsMetadata) {
  FakeServer server(milliseconds(1));
  Outcome outcome = RunCommand(
      server, {"generate", "hello", "--max-new-tokens", "3", "--verbose",
               "--token", "tok", "--request-id", "rid-1"});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.out, "t0 t1 t2 \n");
  EXPECT_NE(outcome.err.find("finish_reason: LENGTH"), std::string::npos);
  EXPECT_NE(outcome.err.find("usage: 2 prompt tokens, 3 generated tokens"),
            std::string::npos);
  EXPECT_NE(outcome.err.find("request_id: rid-1"), std::string::npos);
  EXPECT_EQ(server.service().last_authorization(), "Bearer tok");
  EXPECT_EQ(server.service().last_request_id(), "rid-1");
}

TEST(ClientCommandsTest, UnaryAndChat) {
  FakeServer server(milliseconds(1));
  Outcome unary = RunCommand(
      server, {"generate", "--unary", "hello", "--max-new-tokens", "2"});
  ASSERT_TRUE(unary.status.ok()) << unary.status;
  EXPECT_EQ(unary.out, "t0 t1 \n");
  EXPECT_TRUE(unary.err.empty());  // no --verbose
  Outcome chat = RunCommand(server, {"chat", "hi", "--system", "brief"});
  ASSERT_TRUE(chat.status.ok()) << chat.status;
  EXPECT_EQ(chat.out, "t0 t1 t2 t3 \n");
}

TEST(ClientCommandsTest, FailedRpcNamesTheCode) {
  FakeServer server(milliseconds(1));
  Outcome outcome = RunCommand(server, {"generate", "fail"});
  EXPECT_EQ(outcome.status.message(), "RESOURCE_EXHAUSTED: queue full");
  EXPECT_EQ(outcome.out, "");  // nothing streamed: no stray empty line
}

TEST(ClientCommandsTest, TokenizeInfoStats) {
  FakeServer server(milliseconds(1));
  Outcome tokens = RunCommand(server, {"tokenize", "ab"});
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  EXPECT_EQ(tokens.out, "97,98\n");
  Outcome info = RunCommand(server, {"info"});
  ASSERT_TRUE(info.status.ok()) << info.status;
  EXPECT_NE(info.out.find("model_name: fake\n"), std::string::npos);
  EXPECT_NE(info.out.find("steering_vector_names: romeo, calm\n"),
            std::string::npos);
  Outcome stats = RunCommand(server, {"stats", "--window", "30"});
  ASSERT_TRUE(stats.status.ok()) << stats.status;
  EXPECT_NE(stats.out.find("window: 30 s"), std::string::npos);
  EXPECT_NE(stats.out.find("1.00e-02"), std::string::npos);
  Outcome bad = RunCommand(server, {"stats", "--window", "-1"});
  EXPECT_NE(bad.status.message().find("--window"), std::string::npos);
}

TEST(ClientCommandsTest, InterventionsReachTheServer) {
  FakeServer server(milliseconds(1));
  Outcome outcome =
      RunCommand(server, {"generate", "hello", "--max-new-tokens", "2",
                          "--steer", "3:romeo:2:mixer:generated", "--ablate",
                          "calm", "--skip-layers", "1,2"});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.out, "t0 t1 \n");  // no --lens: no table
  const v1::GenerateRequest request = server.service().last_generate_request();
  ASSERT_EQ(request.steering_size(), 1);
  EXPECT_EQ(request.steering(0).layer(), 3);
  EXPECT_EQ(request.steering(0).direction().name(), "romeo");
  EXPECT_FLOAT_EQ(request.steering(0).scale(), 2.0f);
  EXPECT_EQ(request.steering(0).point(), v1::STREAM_POINT_AFTER_MIXER);
  EXPECT_EQ(request.steering(0).tokens(), v1::TOKEN_SCOPE_GENERATED);
  ASSERT_EQ(request.ablate_size(), 1);
  EXPECT_EQ(request.ablate(0).name(), "calm");
  EXPECT_EQ(request.skip_layers_size(), 2);
  EXPECT_FALSE(request.has_logit_lens());
}

TEST(ClientCommandsTest, LensTableFollowsTheText) {
  FakeServer server(milliseconds(1));
  const std::string expected =
      "t0 t1 \n"
      "\n"
      "logit lens: top-1 token and probability after each layer (row: "
      "position, the token that came next)\n"
      "pos  next  layer 1    layer 3\n"
      "  1  t0    t0    50%  t0   100%\n"
      "  2  t1    t1    50%  t1   100%\n";
  for (const char* mode : {"--verbose", "--unary"}) {
    SCOPED_TRACE(mode);
    Outcome outcome =
        RunCommand(server, {"generate", "hello", "--max-new-tokens", "2",
                            "--lens", "1,3", "--lens-top", "1", mode});
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_EQ(outcome.out, expected);
    const v1::GenerateRequest request =
        server.service().last_generate_request();
    EXPECT_EQ(request.logit_lens().layers_size(), 2);
    EXPECT_EQ(request.logit_lens().top_n(), 1);
    EXPECT_TRUE(request.response().return_token_ids());
  }
}

TEST(ClientCommandsTest, HealthSucceedsOnlyWhenServing) {
  FakeServer server(milliseconds(1));
  Outcome serving = RunCommand(server, {"health"});
  ASSERT_TRUE(serving.status.ok()) << serving.status;
  EXPECT_EQ(serving.out, "SERVING\n");
  server.server().GetHealthCheckService()->SetServingStatus(false);
  Outcome down = RunCommand(server, {"health"});
  EXPECT_FALSE(down.status.ok());
  EXPECT_EQ(down.out, "NOT_SERVING\n");
  EXPECT_EQ(down.status.message(), "the server is NOT_SERVING");
  Outcome unknown =
      RunCommand(server, {"health", "--service", "no.such.Service"});
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status.message().rfind("NOT_FOUND", 0), 0u);
  // A watch bounded by --timeout reports the last status.
  server.server().GetHealthCheckService()->SetServingStatus(true);
  Outcome watch = RunCommand(server, {"health", "--watch", "--timeout", "0.3"});
  EXPECT_TRUE(watch.status.ok()) << watch.status;
  EXPECT_EQ(watch.out, "SERVING\n");
}

}  // namespace
}  // namespace tributary
