// The OpenAI-compatible HTTP API end to end, on an in-process server and a
// plain-socket HTTP/1.1 client: every endpoint streaming and not (streamed
// text equals non-streamed text for the same seeded request), the
// bad-request catalog (codes and OpenAI error bodies, the server keeps
// serving), auth, the queue limit (429 + Retry-After), a stream written as
// it is generated, and clients that disconnect mid-generation, streaming
// or not (the sequence is cancelled and freed). Over TLS: http_tls_test.cc.
#include <unistd.h>

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using nlohmann::json;
using testing_util::HttpRequest;
using testing_util::HttpResponse;
using testing_util::SseData;

constexpr const char* kModel = "tiny-shakespeare";

ServerConfig HttpConfig() {
  ServerConfig c = testing_util::TestServerConfig();
  c.http_port = 0;
  return c;
}

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing_util::TestServer::Start(HttpConfig());
    ASSERT_NE(server_, nullptr);
    port_ = server_->server->http_port();
    ASSERT_GT(port_, 0);
  }
  HttpResponse Post(const std::string& path, const json& body) {
    absl::StatusOr<HttpResponse> r = HttpRequest(port_, "POST", path, body.dump());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : HttpResponse();
  }
  // The text (and reasoning) of a streamed response; checks the framing.
  void ReadStream(const HttpResponse& r, bool chat, std::string* text,
                  std::string* reasoning, json* usage, std::string* finish) {
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(absl::StrContains(r.headers, "content-type: text/event-stream"));
    const std::vector<std::string> data = SseData(r.body);
    ASSERT_GE(data.size(), 2u) << r.body;
    EXPECT_EQ(data.back(), "[DONE]");
    for (size_t i = 0; i + 1 < data.size(); ++i) {
      const json chunk = json::parse(data[i]);
      EXPECT_EQ(chunk["model"], kModel);
      EXPECT_EQ(chunk["object"], chat ? "chat.completion.chunk" : "text_completion");
      if (chunk.contains("usage")) *usage = chunk["usage"];
      if (chunk["choices"].empty()) continue;
      const json& c = chunk["choices"][0];
      if (chat) {
        if (c["delta"].contains("content")) *text += c["delta"]["content"].get<std::string>();
        if (c["delta"].contains("reasoning_content")) {
          *reasoning += c["delta"]["reasoning_content"].get<std::string>();
        }
      } else {
        *text += c["text"].get<std::string>();
      }
      if (!c["finish_reason"].is_null()) *finish = c["finish_reason"];
    }
  }

  std::unique_ptr<testing_util::TestServer> server_;
  int port_ = -1;
};

TEST_F(HttpApiTest, ListsTheModel) {
  absl::StatusOr<HttpResponse> r = HttpRequest(port_, "GET", "/v1/models", "");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200);
  const json body = json::parse(r->body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], kModel);
  EXPECT_TRUE(absl::StrContains(r->headers, "x-request-id: "));
}

// The SDKs' models.retrieve: GET /v1/models/{id}, 404 model_not_found for
// another id; HEAD on the GET routes answers their headers, no body.
TEST_F(HttpApiTest, RetrievesTheModelAndAnswersHead) {
  absl::StatusOr<HttpResponse> r =
      HttpRequest(port_, "GET", absl::StrCat("/v1/models/", kModel), "");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  const json model = json::parse(r->body);
  EXPECT_EQ(model["id"], kModel);
  EXPECT_EQ(model["object"], "model");
  r = HttpRequest(port_, "GET", "/v1/models/gpt-9", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
  for (const std::string& path :
       {std::string("/v1/models"), absl::StrCat("/v1/models/", kModel),
        std::string("/health")}) {
    SCOPED_TRACE(path);
    r = HttpRequest(port_, "HEAD", path, "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->body.empty()) << r->body;
  }
  r = HttpRequest(port_, "HEAD", "/v1/completions", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 405);
}

// A body's Content-Encoding: one the listener cannot decode is 415 naming
// it (the body unread, the connection closed); a corrupt body in one it can
// decode is 400 naming it.
TEST_F(HttpApiTest, ContentEncodingsAreNamed) {
  const std::string body = json{{"model", kModel}, {"prompt", "a"}}.dump();
  absl::StatusOr<HttpResponse> r = HttpRequest(
      port_, "POST", "/v1/completions", body, "Content-Encoding: zstd\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 415) << r->body;
  EXPECT_TRUE(absl::StrContains(json::parse(r->body)["error"]["message"].get<std::string>(),
                                "zstd"))
      << r->body;
  // The client asked for Connection: close itself: the header once.
  const size_t first = r->headers.find("connection: close");
  ASSERT_NE(first, std::string::npos) << r->headers;
  EXPECT_EQ(r->headers.find("connection: close", first + 1), std::string::npos)
      << r->headers;
  r = HttpRequest(port_, "POST", "/v1/completions", body,
                  "Content-Encoding: br\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_TRUE(absl::StrContains(json::parse(r->body)["error"]["message"].get<std::string>(),
                                "br"))
      << r->body;
  EXPECT_TRUE(server_->WaitIdle());
}

TEST_F(HttpApiTest, CompletionStreamedEqualsNonStreamed) {
  json request{{"model", kModel},   {"prompt", "ROMEO:"}, {"max_tokens", 24},
               {"temperature", 0.8}, {"seed", 7},         {"ignore_eos", true},
               {"top_k", 40},        {"min_p", 0.01},     {"repetition_penalty", 1.1}};
  const HttpResponse whole = Post("/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json body = json::parse(whole.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(absl::StartsWith(body["id"].get<std::string>(), "cmpl-"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 24);
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<int>() + 24,
            body["usage"]["total_tokens"].get<int>());
  const std::string text = body["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  std::string streamed, reasoning, finish;
  json usage;
  ReadStream(Post("/v1/completions", request), false, &streamed, &reasoning,
             &usage, &finish);
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage, body["usage"]);
}

TEST_F(HttpApiTest, ChatStreamedEqualsNonStreamed) {
  for (bool thinking : {false, true}) {
    SCOPED_TRACE(thinking);
    json request{{"model", kModel},
                 {"messages", {{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "Who art thou?"}}}},
                 {"max_tokens", 16},
                 {"temperature", 0.7},
                 {"seed", 3},
                 {"chat_template_kwargs", {{"enable_thinking", thinking}}}};
    const HttpResponse whole = Post("/v1/chat/completions", request);
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json body = json::parse(whole.body);
    EXPECT_EQ(body["object"], "chat.completion");
    const json& message = body["choices"][0]["message"];
    EXPECT_EQ(message["role"], "assistant");
    const std::string content = message["content"];
    const std::string reasoning =
        message.value("reasoning_content", json()).is_string()
            ? message["reasoning_content"].get<std::string>()
            : "";
    if (!thinking) {
      EXPECT_EQ(reasoning, "");
    }
    EXPECT_FALSE(content.empty() && reasoning.empty());
    // The default model's template leaves <think> to the model, which never
    // writes one: with thinking on too, the answer is content, not
    // reasoning_content.
    EXPECT_FALSE(content.empty()) << whole.body;
    EXPECT_EQ(reasoning, "") << whole.body;

    request["stream"] = true;
    std::string s_content, s_reasoning, finish;
    json usage;
    ReadStream(Post("/v1/chat/completions", request), true, &s_content,
               &s_reasoning, &usage, &finish);
    EXPECT_EQ(s_content, content);
    EXPECT_EQ(s_reasoning, reasoning);
    EXPECT_TRUE(usage.is_null());  // not asked
    EXPECT_FALSE(finish.empty());
  }
}

TEST_F(HttpApiTest, LogprobsInBothShapes) {
  const HttpResponse c = Post("/v1/completions",
                              {{"model", kModel}, {"prompt", "KING:"},
                               {"max_tokens", 4}, {"logprobs", 2},
                               {"ignore_eos", true}});
  ASSERT_EQ(c.status, 200) << c.body;
  const json lp = json::parse(c.body)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["token_logprobs"].size(), 4u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  const HttpResponse chat = Post(
      "/v1/chat/completions",
      {{"model", kModel}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
       {"max_tokens", 3}, {"logprobs", true}, {"top_logprobs", 3},
       {"ignore_eos", true}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json content = json::parse(chat.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["logprob"].is_number());
}

struct BadRequest {
  const char* name;
  const char* path;
  std::string body;
  int status;
  const char* param;  // "" = null
};

TEST_F(HttpApiTest, BadRequestCatalog) {
  const std::string c = "/v1/completions", ch = "/v1/chat/completions";
  const std::string m = absl::StrCat("\"model\": \"", kModel, "\"");
  const std::string msgs = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
  const std::vector<BadRequest> catalog = {
      {"malformed JSON", "/v1/completions", "{\"model\": ", 400, ""},
      {"a NUL byte after the JSON", "/v1/completions",
       std::string("{\"prompt\": \"a\"}") + std::string(1, '\0') + "x", 400, ""},
      {"not an object", "/v1/completions", "[1, 2]", 400, ""},
      {"invalid UTF-8", "/v1/completions", "{\"model\": \"\xff\"}", 400, ""},
      {"missing model", "/v1/completions", "{\"prompt\": \"a\"}", 400, "model"},
      {"unknown model", "/v1/completions", "{\"model\": \"gpt-9\", \"prompt\": \"a\"}", 404, "model"},
      {"model not a string", "/v1/completions", "{\"model\": 3, \"prompt\": \"a\"}", 400, "model"},
      {"missing prompt", "/v1/completions", "{" + m + "}", 400, "prompt"},
      {"empty prompt", "/v1/completions", "{" + m + ", \"prompt\": \"\"}", 400, "prompt"},
      {"prompt batch", "/v1/completions", "{" + m + ", \"prompt\": [\"a\", \"b\"]}", 400, "prompt"},
      {"token id out of vocabulary", "/v1/completions", "{" + m + ", \"prompt\": [1, 99999999]}", 400, "prompt[1]"},
      {"n > 1", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"n\": 2}", 400, "n"},
      {"temperature a string", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"temperature\": \"hot\"}", 400, "temperature"},
      {"temperature too high", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"temperature\": 1000}", 400, "temperature"},
      {"top_p 0", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"top_p\": 0}", 400, "top_p"},
      {"max_tokens 0", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"max_tokens\": 0}", 400, "max_tokens"},
      {"max_tokens 2.5", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"max_tokens\": 2.5}", 400, "max_tokens"},
      {"max_tokens above the limit", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"max_tokens\": 100000}", 400, "max_tokens"},
      {"presence_penalty 3", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"presence_penalty\": 3}", 400, "presence_penalty"},
      {"logprobs 50", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"logprobs\": 50}", 400, "logprobs"},
      {"stop not strings", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"stop\": [1]}", 400, "stop"},
      {"empty stop string", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"stop\": [\"\"]}", 400, "stop[0]"},
      {"stream not a bool", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"stream\": 1}", 400, "stream"},
      {"stream_options without stream", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"stream_options\": {\"include_usage\": true}}", 400, "stream_options"},
      {"echo", "/v1/completions", "{" + m + ", \"prompt\": \"a\", \"echo\": true}", 400, "echo"},
      {"missing messages", "/v1/chat/completions", "{" + m + "}", 400, "messages"},
      {"empty messages", "/v1/chat/completions", "{" + m + ", \"messages\": []}", 400, "messages"},
      {"bad role", "/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", 400, "messages[0].role"},
      {"message without role", "/v1/chat/completions", "{" + m + ", \"messages\": [{\"content\": \"x\"}]}", 400, "messages[0].role"},
      {"content a number", "/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": \"user\", \"content\": 5}]}", 400, "messages[0].content"},
      {"top_logprobs without logprobs", "/v1/chat/completions", "{" + m + ", " + msgs + ", \"top_logprobs\": 2}", 400, "top_logprobs"},
      {"enable_thinking not a bool", "/v1/chat/completions", "{" + m + ", " + msgs + ", \"chat_template_kwargs\": {\"enable_thinking\": \"yes\"}}", 400, "chat_template_kwargs.enable_thinking"},
      {"tools", "/v1/chat/completions", "{" + m + ", " + msgs + ", \"tools\": [{\"type\": \"function\"}]}", 400, "tools"},
      {"unknown path", "/v1/embeddings", "{}", 404, ""},
  };
  for (const BadRequest& bad : catalog) {
    SCOPED_TRACE(bad.name);
    absl::StatusOr<HttpResponse> r = HttpRequest(port_, "POST", bad.path, bad.body);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, bad.status) << r->body;
    const json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r->body;
    ASSERT_TRUE(body.contains("error")) << r->body;
    const json& e = body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("code"));
    if (std::string(bad.param).empty()) {
      EXPECT_TRUE(e["param"].is_null()) << r->body;
    } else {
      EXPECT_EQ(e["param"], bad.param) << r->body;
    }
  }
  absl::StatusOr<HttpResponse> wrong_method =
      HttpRequest(port_, "GET", "/v1/completions", "");
  ASSERT_TRUE(wrong_method.ok());
  EXPECT_EQ(wrong_method->status, 405);
  // Still serving.
  const HttpResponse ok = Post("/v1/completions", {{"model", kModel},
                                                   {"prompt", "ROMEO:"},
                                                   {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(server_->WaitIdle());
}

// A client that goes away mid-stream cancels its sequence: its KV blocks and
// state slot are free long before the 1000 tokens it asked for.
TEST(HttpApiDisconnectTest, DisconnectMidStreamFreesTheSequence) {
  ServerConfig config = HttpConfig();
  config.metrics_port = 0;
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  const json request{{"model", kModel}, {"prompt", "ROMEO:"},
                     {"max_tokens", 1000}, {"ignore_eos", true},
                     {"stream", true}};
  absl::StatusOr<int> fd = testing_util::HttpSend(
      server->server->http_port(), "POST", "/v1/completions", request.dump());
  ASSERT_TRUE(fd.ok()) << fd.status();
  std::string seen;
  char buffer[4096];
  while (!absl::StrContains(seen, "data: ")) {
    const ssize_t n = ::read(*fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0);
    seen.append(buffer, static_cast<size_t>(n));
  }
  ::close(*fd);
  EXPECT_TRUE(server->WaitIdle());
  EXPECT_EQ(server->FinishedRequests("cancelled"), 1);
}

// A client that goes away while waiting for a non-streaming answer cancels
// its sequence too (its socket is watched while the answer is generated).
TEST(HttpApiDisconnectTest, NonStreamingDisconnectFreesTheSequence) {
  ServerConfig config = HttpConfig();
  config.metrics_port = 0;
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  for (const char* endpoint : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(endpoint);
    json request{{"model", kModel}, {"max_tokens", 1000}, {"ignore_eos", true}};
    if (absl::StrContains(endpoint, "chat")) {
      request["messages"] = {{{"role", "user"}, {"content", "Speak."}}};
    } else {
      request["prompt"] = "ROMEO:";
    }
    absl::StatusOr<int> fd = testing_util::HttpSend(
        server->server->http_port(), "POST", endpoint, request.dump());
    ASSERT_TRUE(fd.ok()) << fd.status();
    ASSERT_TRUE(server->WaitRunning(1));
    ::close(*fd);
    EXPECT_TRUE(server->WaitIdle());
  }
  EXPECT_EQ(server->FinishedRequests("cancelled"), 2);
  EXPECT_EQ(server->FinishedRequests("length"), 0);
  absl::StatusOr<std::string> metrics =
      testing_util::HttpGet(server->server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(absl::StrContains(*metrics, "tributary_requests_running 0"));
  EXPECT_TRUE(absl::StrContains(*metrics, "tributary_requests_waiting 0"));
}

// Server-Sent Events leave as they are generated, uncompressed even for a
// client that accepts gzip and brotli: the first event arrives while the
// sequence is still running.
TEST(HttpApiStreamTest, EventsLeaveAsTheyAreGenerated) {
  auto server = testing_util::TestServer::Start(HttpConfig());
  ASSERT_NE(server, nullptr);
  const json request{{"model", kModel}, {"prompt", "ROMEO:"},
                     {"max_tokens", 1000}, {"ignore_eos", true},
                     {"stream", true}};
  absl::StatusOr<int> fd = testing_util::HttpSend(
      server->server->http_port(), "POST", "/v1/completions", request.dump(),
      "Accept-Encoding: gzip, deflate, br\r\n");
  ASSERT_TRUE(fd.ok()) << fd.status();
  std::string seen;
  char buffer[4096];
  while (!absl::StrContains(seen, "\"text_completion\"")) {
    const ssize_t n = ::read(*fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0) << seen;
    seen.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(server->server->engine().counts().num_running, 1);
  std::string headers = seen.substr(0, seen.find("\r\n\r\n"));
  for (char& c : headers) c = static_cast<char>(std::tolower(c));
  EXPECT_TRUE(absl::StrContains(headers, "content-type: text/event-stream"));
  EXPECT_TRUE(absl::StrContains(headers, "transfer-encoding: chunked"));
  EXPECT_FALSE(absl::StrContains(headers, "content-encoding")) << headers;
  ::close(*fd);
  EXPECT_TRUE(server->WaitIdle());
}

TEST(HttpApiAuthTest, BearerTokenAndBodyLimit) {
  ServerConfig config = HttpConfig();
  config.auth_token = "s3cret";
  config.max_message_bytes = 4096;
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->server->http_port();
  const std::string body =
      json{{"model", kModel}, {"prompt", "a"}, {"max_tokens", 1}}.dump();
  absl::StatusOr<HttpResponse> r = HttpRequest(port, "POST", "/v1/completions", body);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  r = HttpRequest(port, "POST", "/v1/completions", body,
                  "Authorization: Bearer wrong\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  r = HttpRequest(port, "POST", "/v1/completions", body,
                  "Authorization: Bearer s3cret\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  r = HttpRequest(port, "POST", "/v1/completions", body,
                  "authorization: bearer s3cret\r\n");  // RFC 7235: any case
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  r = HttpRequest(port, "GET", "/health", "");  // exempt
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  const std::string big =
      json{{"model", kModel}, {"prompt", std::string(8000, 'a')}}.dump();
  r = HttpRequest(port, "POST", "/v1/completions", big,
                  "Authorization: Bearer s3cret\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_TRUE(json::parse(r->body)["error"]["message"].is_string());
}

TEST(HttpApiQueueTest, QueueFullIs429WithRetryAfter) {
  ServerConfig config = HttpConfig();
  config.max_running = 1;
  config.max_waiting = 1;
  auto server = testing_util::TestServer::Start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->server->http_port();
  const std::string long_request =
      json{{"model", kModel}, {"prompt", "ROMEO:"}, {"max_tokens", 1000},
           {"ignore_eos", true}, {"stream", true}}
          .dump();
  // One running, then one waiting; neither is read.
  std::vector<int> fds;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<int> fd =
        testing_util::HttpSend(port, "POST", "/v1/completions", long_request);
    ASSERT_TRUE(fd.ok());
    fds.push_back(*fd);
    const absl::Time deadline = absl::Now() + testing_util::kHangGuard;
    while (absl::Now() < deadline) {
      const Engine::Counts c = server->server->engine().counts();
      if (c.num_running == 1 && c.num_waiting == i) break;
      absl::SleepFor(absl::Milliseconds(2));
    }
  }
  absl::StatusOr<HttpResponse> r = HttpRequest(
      port, "POST", "/v1/completions",
      json{{"model", kModel}, {"prompt", "a"}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_TRUE(absl::StrContains(r->headers, "retry-after: 1"));
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "rate_limit_error");
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE(server->WaitIdle());
}

}  // namespace
}  // namespace tributary
