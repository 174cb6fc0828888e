// Argument parsing of `tributary`: the command line, the generate/chat flags
// and the common channel flags. No network.
#include "client/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/channel_options.h"
#include "client/generate_flags.h"
#include "client/health_command.h"
#include "client/model_commands.h"

namespace tributary {
namespace {

absl::StatusOr<CommandLine> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "tributary");
  return CommandLine::Parse(
      static_cast<int>(args.size()), args.data(), ChannelFlagNames(), {},
      {GenerateCommandSpec(), ChatCommandSpec(), TokenizeCommandSpec(),
       InfoCommandSpec(), StatsCommandSpec(), HealthCommandSpec()});
}

std::string Error(const absl::StatusOr<CommandLine>& line) {
  return line.ok() ? "" : std::string(line.status().message());
}

TEST(CommandLineTest, CommonFlagsBeforeOrAfterTheCommand) {
  auto line = Parse({"--target", "host:1", "generate", "hello", "--seed", "3"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->command(), "generate");
  EXPECT_EQ(line->args().GetOr("target", ""), "host:1");
  ASSERT_EQ(line->args().positional().size(), 1u);
  EXPECT_EQ(line->args().positional()[0], "hello");
  auto after = Parse({"info", "--target=host:2"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->args().GetOr("target", ""), "host:2");
}

TEST(CommandLineTest, AFlagValueIsNeverTheCommand) {
  // "info" is the value of --system, not the command.
  auto line = Parse({"chat", "--system", "info", "hi"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->command(), "chat");
  EXPECT_EQ(line->args().GetOr("system", ""), "info");
  EXPECT_EQ(line->args().positional()[0], "hi");
  // After `--` a prompt may start with dashes.
  auto dashes = Parse({"generate", "--", "--not-a-flag"});
  ASSERT_TRUE(dashes.ok()) << dashes.status();
  EXPECT_EQ(dashes->args().positional()[0], "--not-a-flag");
}

TEST(CommandLineTest, Errors) {
  EXPECT_NE(Error(Parse({})).find("missing command"), std::string::npos);
  EXPECT_NE(Error(Parse({"--target", "h:1"})).find("missing command"),
            std::string::npos);
  const std::string unknown = Error(Parse({"frobnicate"}));
  EXPECT_NE(unknown.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_NE(unknown.find("generate, chat"), std::string::npos);
  // A flag of another command.
  EXPECT_EQ(Error(Parse({"info", "--temperature", "1"})),
            "info: unknown flag --temperature");
  EXPECT_EQ(Error(Parse({"info", "--stop", "x"})), "info: unknown flag --stop");
  EXPECT_EQ(Error(Parse({"generate", "hi", "--bogus"})),
            "generate: unknown flag --bogus");
  EXPECT_EQ(Error(Parse({"generate", "hi", "--seed"})),
            "generate: flag --seed needs a value");
  EXPECT_EQ(Error(Parse({"generate", "hi", "--stop"})),
            "flag --stop needs a value");
}

TEST(CommandLineTest, RepeatedStopKeepsOrder) {
  auto line = Parse(
      {"generate", "--stop", "\n\n", "hi", "--stop=END", "--stop", "--stop"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->Repeated("stop"),
            (std::vector<std::string>{"\n\n", "END", "--stop"}));
  EXPECT_TRUE(line->Repeated("absent").empty());
}

TEST(GenerateFlagsTest, BuildsTheRequest) {
  auto line = Parse({"generate",
                     "Once upon",
                     "--max-new-tokens",
                     "12",
                     "--temperature",
                     "0.7",
                     "--top-k",
                     "40",
                     "--top-p",
                     "0.9",
                     "--min-p",
                     "0.05",
                     "--seed",
                     "42",
                     "--stop",
                     "a",
                     "--stop",
                     "b",
                     "--ignore-eos",
                     "--stop-token-ids",
                     "5, 6",
                     "--priority",
                     "-3",
                     "--residual"});
  ASSERT_TRUE(line.ok()) << line.status();
  auto request = BuildGenerateRequest(*line);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->text(), "Once upon");
  EXPECT_FLOAT_EQ(request->sampling().temperature(), 0.7f);
  EXPECT_EQ(request->sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(request->sampling().top_p(), 0.9f);
  EXPECT_FLOAT_EQ(request->sampling().min_p(), 0.05f);
  EXPECT_EQ(request->sampling().seed(), 42u);
  EXPECT_FALSE(request->sampling().has_repetition_penalty());
  EXPECT_EQ(request->stopping().max_new_tokens(), 12);
  ASSERT_EQ(request->stopping().stop_size(), 2);
  EXPECT_EQ(request->stopping().stop(1), "b");
  EXPECT_TRUE(request->stopping().ignore_eos());
  ASSERT_EQ(request->stopping().stop_token_ids_size(), 2);
  EXPECT_EQ(request->stopping().stop_token_ids(1), 6);
  EXPECT_EQ(request->priority(), -3);
  EXPECT_TRUE(request->response().residual_summary());
}

TEST(GenerateFlagsTest, UnsetOptionsStayUnset) {
  auto line = Parse({"generate", "x"});
  ASSERT_TRUE(line.ok());
  auto request = BuildGenerateRequest(*line);
  ASSERT_TRUE(request.ok());
  // The server's defaults apply, not the client's idea of them.
  EXPECT_FALSE(request->sampling().has_temperature());
  EXPECT_FALSE(request->sampling().has_seed());
  EXPECT_FALSE(request->stopping().has_max_new_tokens());
}

TEST(GenerateFlagsTest, IdsAndChatInputs) {
  auto ids = Parse({"generate", "--ids", "1,2, 3"});
  ASSERT_TRUE(ids.ok());
  auto request = BuildGenerateRequest(*ids);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->has_token_ids());
  EXPECT_EQ(request->token_ids().ids_size(), 3);
  EXPECT_EQ(request->token_ids().ids(2), 3);

  auto chat = Parse({"chat", "Hi there", "--system", "Be brief",
                     "--enable-thinking", "false"});
  ASSERT_TRUE(chat.ok());
  auto chat_request = BuildGenerateRequest(*chat);
  ASSERT_TRUE(chat_request.ok()) << chat_request.status();
  ASSERT_EQ(chat_request->chat().messages_size(), 2);
  EXPECT_EQ(chat_request->chat().messages(0).role(), "system");
  EXPECT_EQ(chat_request->chat().messages(1).role(), "user");
  EXPECT_EQ(chat_request->chat().messages(1).content(), "Hi there");
  EXPECT_FALSE(chat_request->chat().enable_thinking());
  EXPECT_TRUE(chat_request->chat().has_enable_thinking());
}

TEST(GenerateFlagsTest, ErrorsNameTheFlag) {
  auto error_of = [](std::vector<const char*> args) -> std::string {
    auto line = Parse(std::move(args));
    if (!line.ok()) return std::string(line.status().message());
    auto request = BuildGenerateRequest(*line);
    return request.ok() ? "" : std::string(request.status().message());
  };
  EXPECT_NE(
      error_of({"generate", "x", "--temperature", "hot"}).find("--temperature"),
      std::string::npos);
  EXPECT_NE(error_of({"generate", "x", "--top-p", "nan"}).find("--top-p"),
            std::string::npos);
  EXPECT_NE(error_of({"generate", "x", "--max-new-tokens", "0"})
                .find("--max-new-tokens"),
            std::string::npos);
  EXPECT_NE(
      error_of({"generate", "x", "--priority", "5000"}).find("--priority"),
      std::string::npos);
  EXPECT_NE(error_of({"generate", "--ids", "1,,2"}).find("--ids"),
            std::string::npos);
  EXPECT_NE(error_of({"generate", "--ids", "1,-2"}).find("--ids"),
            std::string::npos);
  EXPECT_NE(error_of({"generate", "x", "--ids", "1"}).find("not both"),
            std::string::npos);
  EXPECT_NE(error_of({"generate"}).find("missing PROMPT"), std::string::npos);
  EXPECT_NE(error_of({"generate", "a", "b"}).find("one argument"),
            std::string::npos);
  EXPECT_NE(error_of({"chat"}).find("missing MESSAGE"), std::string::npos);
  EXPECT_NE(error_of({"chat", "x", "--enable-thinking", "yes"})
                .find("--enable-thinking"),
            std::string::npos);
  EXPECT_NE(error_of({"generate", "x", "--stop", ""}).find("--stop"),
            std::string::npos);
  EXPECT_EQ(error_of({"chat", "x", "--ids", "1"}), "chat: unknown flag --ids");
}

TEST(ChannelOptionsTest, DefaultsAndErrors) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "tool");
    auto cli = CliArgs::Parse(static_cast<int>(args.size()), args.data(),
                              ChannelFlagNames(), {});
    EXPECT_TRUE(cli.ok());
    return ParseChannelOptions(*cli);
  };
  auto defaults = parse({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->target, "127.0.0.1:50051");
  EXPECT_FALSE(defaults->timeout_seconds.has_value());
  auto full =
      parse({"--timeout", "2.5", "--token", "s3cret", "--request-id", "abc-1"});
  ASSERT_TRUE(full.ok());
  EXPECT_DOUBLE_EQ(*full->timeout_seconds, 2.5);
  EXPECT_EQ(full->token, "s3cret");
  EXPECT_NE(parse({"--timeout", "0"}).status().message().find("--timeout"),
            std::string::npos);
  EXPECT_NE(parse({"--timeout", "soon"}).status().message().find("--timeout"),
            std::string::npos);
  EXPECT_NE(parse({"--tls-cert", "c.pem"}).status().message().find("--tls-key"),
            std::string::npos);
  EXPECT_NE(parse({"--tls-cert", "c.pem", "--tls-key", "k.pem"})
                .status()
                .message()
                .find("--tls-ca"),
            std::string::npos);
  EXPECT_NE(parse({"--request-id", "has space"})
                .status()
                .message()
                .find("--request-id"),
            std::string::npos);
  EXPECT_FALSE(parse({"--target", ""}).ok());
}

TEST(ChannelOptionsTest, UnreadableCaFileIsNamed) {
  ChannelOptions options;
  options.tls_ca_file = "/nonexistent/ca.pem";
  auto channel = CreateClientChannel(options);
  ASSERT_FALSE(channel.ok());
  EXPECT_NE(channel.status().message().find("--tls-ca"), std::string::npos);
  EXPECT_NE(channel.status().message().find("/nonexistent/ca.pem"),
            std::string::npos);
}

}  // namespace
}  // namespace tributary
