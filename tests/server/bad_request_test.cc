// The catalog of bad requests (design.md §6): each gets the documented
// status code and a message naming the field, through both Generate and
// GenerateStream, and afterwards the server still serves and holds no
// sequence, block or slot. Bytes that are no request at all (not protobuf,
// cut short, a string that is not UTF-8) are INVALID_ARGUMENT too, logged
// and counted as the other errors are.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::GreedyRequest;
using testing_util::RawCall;
using testing_util::RawReply;
using testing_util::TestServer;
using testing_util::TestServerConfig;

struct BadRequest {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  grpc::StatusCode code;
  std::string field;  // must appear in the message
  std::string request_id;  // sent as x-request-id when not empty
};

v1::GenerateRequest Base() { return GreedyRequest("ROMEO:\nBut soft", 8); }

// An inline direction of the default model's hidden size (256), 0.1
// everywhere but a NaN at `nan_at` (none when negative).
void FillDirection(v1::Direction* d, int nan_at = -1) {
  for (int i = 0; i < 256; ++i) {
    d->mutable_inline_vector()->add_values(i == nan_at ? NAN : 0.1f);
  }
}

// Whether `path` ("steering[0].direction.inline_vector.values[5]") names a
// field of `message`: each part a field (or oneof) of the message before
// it, indexed only where repeated.
bool IsProtoPath(absl::string_view path,
                 const google::protobuf::Descriptor& message) {
  const google::protobuf::Descriptor* d = &message;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (d == nullptr) return false;  // a part after a scalar
    const size_t bracket = part.find('[');
    const std::string name(part.substr(0, bracket));
    const google::protobuf::FieldDescriptor* f = d->FindFieldByName(name);
    if (f == nullptr) {
      // A oneof ("input") ends the path.
      return d->FindOneofByName(name) != nullptr && part == path;
    }
    if (bracket != absl::string_view::npos &&
        (!f->is_repeated() || part.back() != ']')) {
      return false;
    }
    d = f->message_type();
  }
  return !path.empty();
}

std::vector<BadRequest> Catalog() {
  using C = grpc::StatusCode;
  const C kInvalid = C::INVALID_ARGUMENT;
  auto ids = [](std::vector<int32_t> v) {
    return [v](v1::GenerateRequest& r) {
      r.mutable_token_ids()->mutable_ids()->Assign(v.begin(), v.end());
    };
  };
  std::vector<BadRequest> c = {
      {"no input", [](auto& r) { r.clear_input(); }, kInvalid, "input", ""},
      {"empty text", [](auto& r) { r.set_text(""); }, kInvalid, "text", ""},
      {"empty token ids", ids({}), kInvalid, "token_ids", ""},
      {"negative token id", ids({-1}), kInvalid, "token_ids.ids[0]", ""},
      {"token id past the vocabulary", ids({5, 3008}), kInvalid,
       "token_ids.ids[1]", ""},
      {"prompt over max_prompt_tokens", ids(std::vector<int32_t>(65, 7)),
       kInvalid, "max_prompt_tokens", ""},
      {"text prompt over max_prompt_tokens",
       [](auto& r) {
         std::string text;
         for (int i = 0; i < 200; ++i) text += "word ";
         r.set_text(text);
       },
       kInvalid, "max_prompt_tokens", ""},
      {"chat without messages", [](auto& r) { r.mutable_chat(); }, kInvalid,
       "chat.messages", ""},
      {"chat with a bad role",
       [](auto& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("wizard");
         m->set_content("hi");
       },
       kInvalid, "chat.messages[0].role", ""},
      {"chat with too many messages",
       [](auto& r) {
         for (int i = 0; i < 257; ++i) {
           auto* m = r.mutable_chat()->add_messages();
           m->set_role("user");
           m->set_content("a");
         }
       },
       kInvalid, "chat.messages", ""},
      {"temperature below 0",
       [](auto& r) { r.mutable_sampling()->set_temperature(-0.5f); }, kInvalid,
       "sampling.temperature", ""},
      {"temperature too high",
       [](auto& r) { r.mutable_sampling()->set_temperature(1000.0f); },
       kInvalid, "sampling.temperature", ""},
      {"temperature NaN",
       [](auto& r) { r.mutable_sampling()->set_temperature(NAN); }, kInvalid,
       "sampling.temperature", ""},
      {"top_p 0", [](auto& r) { r.mutable_sampling()->set_top_p(0.0f); },
       kInvalid, "sampling.top_p", ""},
      {"top_p above 1", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); },
       kInvalid, "sampling.top_p", ""},
      {"top_k below 0", [](auto& r) { r.mutable_sampling()->set_top_k(-1); },
       kInvalid, "sampling.top_k", ""},
      {"min_p above 1", [](auto& r) { r.mutable_sampling()->set_min_p(1.5f); },
       kInvalid, "sampling.min_p", ""},
      {"min_p below 0", [](auto& r) { r.mutable_sampling()->set_min_p(-0.1f); },
       kInvalid, "sampling.min_p", ""},
      {"repetition_penalty 0",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); },
       kInvalid, "sampling.repetition_penalty", ""},
      {"presence_penalty above 2",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(3.0f); },
       kInvalid, "sampling.presence_penalty", ""},
      {"frequency_penalty below -2",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(-3.0f); },
       kInvalid, "sampling.frequency_penalty", ""},
      {"max_new_tokens 0",
       [](auto& r) { r.mutable_stopping()->set_max_new_tokens(0); }, kInvalid,
       "stopping.max_new_tokens", ""},
      {"max_new_tokens negative",
       [](auto& r) { r.mutable_stopping()->set_max_new_tokens(-5); }, kInvalid,
       "stopping.max_new_tokens", ""},
      {"max_new_tokens huge",
       [](auto& r) { r.mutable_stopping()->set_max_new_tokens(1 << 30); },
       kInvalid, "stopping.max_new_tokens", ""},
      {"prompt + max_new_tokens over the context",
       [](auto& r) { r.mutable_stopping()->set_max_new_tokens(1023); },
       kInvalid, "stopping.max_new_tokens = 1023", ""},
      {"too many stop strings",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.mutable_stopping()->add_stop("x");
       },
       kInvalid, "stopping.stop", ""},
      {"empty stop string", [](auto& r) { r.mutable_stopping()->add_stop(""); },
       kInvalid, "stopping.stop[0]", ""},
      {"stop string too long",
       [](auto& r) { r.mutable_stopping()->add_stop(std::string(300, 'a')); },
       kInvalid, "stopping.stop[0]", ""},
      {"too many stop token ids",
       [](auto& r) {
         for (int i = 0; i < 65; ++i) r.mutable_stopping()->add_stop_token_ids(i);
       },
       kInvalid, "stopping.stop_token_ids", ""},
      {"stop token id past the vocabulary",
       [](auto& r) { r.mutable_stopping()->add_stop_token_ids(99999); },
       kInvalid, "stopping.stop_token_ids[0]", ""},
      {"top_logprobs above 20",
       [](auto& r) {
         r.mutable_response()->set_logprobs(true);
         r.mutable_response()->set_top_logprobs(21);
       },
       kInvalid, "response.top_logprobs", ""},
      {"top_logprobs negative",
       [](auto& r) {
         r.mutable_response()->set_logprobs(true);
         r.mutable_response()->set_top_logprobs(-1);
       },
       kInvalid, "response.top_logprobs", ""},
      {"top_logprobs without logprobs",
       [](auto& r) { r.mutable_response()->set_top_logprobs(3); }, kInvalid,
       "response.top_logprobs", ""},
      {"priority out of range", [](auto& r) { r.set_priority(5000); }, kInvalid,
       "priority", ""},
      {"steering by an unknown name",
       [](auto& r) {
         auto* st = r.add_steering();
         st->mutable_direction()->set_name("no-such-vector");
       },
       kInvalid, "steering[0].direction.name", ""},
      {"steering vector of the wrong length",
       [](auto& r) {
         auto* st = r.add_steering();
         st->mutable_direction()->mutable_inline_vector()->add_values(1.0f);
       },
       kInvalid, "steering[0].direction.inline_vector", ""},
      {"steering layer out of range",
       [](auto& r) {
         auto* st = r.add_steering();
         st->set_layer(8);
         FillDirection(st->mutable_direction());
       },
       kInvalid, "steering[0].layer", ""},
      {"steering at an unknown stream point",
       [](auto& r) {
         auto* st = r.add_steering();
         st->set_point(static_cast<v1::StreamPoint>(7));
         FillDirection(st->mutable_direction());
       },
       kInvalid, "steering[0].point", ""},
      {"steering over an unknown token scope",
       [](auto& r) {
         auto* st = r.add_steering();
         st->set_tokens(static_cast<v1::TokenScope>(9));
         FillDirection(st->mutable_direction());
       },
       kInvalid, "steering[0].tokens", ""},
      {"steering vector with a NaN",
       [](auto& r) {
         auto* st = r.add_steering();
         FillDirection(st->mutable_direction(), /*nan_at=*/5);
       },
       kInvalid, "steering[0].direction.inline_vector.values[5]", ""},
      {"ablation with a NaN",
       [](auto& r) {
         FillDirection(r.add_ablate(), /*nan_at=*/0);
       },
       kInvalid, "ablate[0].inline_vector.values[0]", ""},
      {"ablation without a direction",
       [](auto& r) { r.add_ablate(); }, kInvalid, "ablate[0]", ""},
      {"skip layer out of range", [](auto& r) { r.add_skip_layers(12); },
       kInvalid, "skip_layers[0]", ""},
      {"logit lens top_n too large",
       [](auto& r) { r.mutable_logit_lens()->set_top_n(50); }, kInvalid,
       "logit_lens.top_n", ""},
      {"oversized message",
       [](auto& r) { r.set_text(std::string(100000, 'a')); },
       C::RESOURCE_EXHAUSTED, "larger than max", ""},
      {"request id with a space", [](auto&) {}, kInvalid, "x-request-id",
       "has space"},
      {"request id too long", [](auto&) {}, kInvalid, "x-request-id",
       std::string(200, 'r')},
  };
  return c;
}

TEST(BadRequestTest, CatalogGetsDocumentedCodesAndFieldNames) {
  ServerConfig config = TestServerConfig();
  config.max_prompt_tokens = 64;
  config.max_message_bytes = 64 << 10;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  const std::vector<BadRequest> catalog = Catalog();
  ASSERT_GE(catalog.size(), 30u);
  for (const BadRequest& bad : catalog) {
    SCOPED_TRACE(bad.name);
    v1::GenerateRequest request = Base();
    bad.mutate(request);
    for (bool stream : {false, true}) {
      grpc::ClientContext ctx;
      if (!bad.request_id.empty()) ctx.AddMetadata("x-request-id", bad.request_id);
      grpc::Status s;
      if (stream) {
        auto reader = t->stub->GenerateStream(&ctx, request);
        v1::GenerateResponse m;
        EXPECT_FALSE(reader->Read(&m)) << "a message before the error";
        s = reader->Finish();
      } else {
        v1::GenerateResponse response;
        s = t->stub->Generate(&ctx, request, &response);
      }
      EXPECT_EQ(s.error_code(), bad.code)
          << (stream ? "stream: " : "unary: ") << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(bad.field))
          << (stream ? "stream" : "unary");
      // A validation message starts with the field it is about, named by
      // its path in the proto (not the engine's own names).
      if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
          bad.request_id.empty()) {
        const std::string& message = s.error_message();
        const std::string path = message.substr(0, message.find_first_of(" :="));
        EXPECT_TRUE(IsProtoPath(path, *v1::GenerateRequest::descriptor()))
            << "\"" << path << "\" (from \"" << message
            << "\") is not a field path of GenerateRequest";
      }
    }
  }
  // Tokenize and GetResidualStats validate too.
  {
    grpc::ClientContext ctx;
    v1::TokenizeResponse r;
    const grpc::Status s = t->stub->Tokenize(&ctx, {}, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("input"));
  }
  for (double window : {-1.0, 1e9, static_cast<double>(NAN)}) {
    grpc::ClientContext ctx;
    v1::GetResidualStatsRequest request;
    request.set_window_seconds(window);
    v1::ResidualStats r;
    const grpc::Status s = t->stub->GetResidualStats(&ctx, request, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("window_seconds"));
  }
  // Still serving, nothing held.
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  EXPECT_TRUE(t->stub->Generate(&ctx, Base(), &response).ok());
  EXPECT_EQ(response.token_ids_size(), 8);
  EXPECT_TRUE(t->WaitIdle());
}

// Request bytes that do not parse as the method's request message.
struct Undecodable {
  std::string name;
  std::string bytes;
};

std::vector<Undecodable> UndecodableRequests() {
  std::string truncated = Base().SerializeAsString();
  truncated.pop_back();
  return {
      // text = "RO\xffME\xc3" (not UTF-8, which a proto3 string must be),
      // stopping { max_new_tokens: 4 }.
      {"a string that is not UTF-8",
       std::string("\x0a\x06RO\xff" "ME\xc3\x2a\x02\x08\x04", 12)},
      {"a request cut short", truncated},
      {"not protobuf", std::string("\xff\xff\xff\xff", 4)},
  };
}

// The "request_finished" log lines of `method` with status `code` in `log`.
int CountFinishedLines(const std::string& log, const std::string& method,
                       const std::string& code) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "\"event\":\"request_finished\"") &&
        absl::StrContains(line, "\"method\":\"" + method + "\"") &&
        absl::StrContains(line, "\"status\":\"" + code + "\"")) {
      ++n;
    }
  }
  return n;
}

TEST(BadRequestTest, UndecodableGenerateRequestsAreInvalidArgument) {
  ServerConfig config = TestServerConfig();
  config.metrics_port = 0;
  auto t = TestServer::Start(config);
  ASSERT_NE(t, nullptr);
  const std::string errors =
      "tributary_request_errors_total{code=\"INVALID_ARGUMENT\"}";
  for (const Undecodable& bad : UndecodableRequests()) {
    for (const char* method : {"Generate", "GenerateStream"}) {
      SCOPED_TRACE(bad.name + " through " + method);
      const int64_t before = std::max<int64_t>(0, t->Sample(errors));
      ::testing::internal::CaptureStderr();
      const RawReply reply = RawCall(
          t->channel, absl::StrCat("/tributary.v1.Tributary/", method),
          bad.bytes);
      const std::string log = ::testing::internal::GetCapturedStderr();
      EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << reply.status.error_message();
      EXPECT_THAT(reply.status.error_message(),
                  HasSubstr("not a valid tributary.v1.GenerateRequest"));
      EXPECT_TRUE(reply.messages.empty());
      EXPECT_EQ(CountFinishedLines(log, method, "INVALID_ARGUMENT"), 1) << log;
      EXPECT_EQ(t->Sample(errors), before + 1);
    }
  }
  // The other methods answer the same status for their own request types.
  const std::vector<std::pair<std::string, std::string>> others = {
      {"Tokenize", "tributary.v1.TokenizeRequest"},
      {"GetModelInfo", "tributary.v1.GetModelInfoRequest"},
      {"GetResidualStats", "tributary.v1.GetResidualStatsRequest"},
  };
  for (const auto& [method, type] : others) {
    SCOPED_TRACE(method);
    const RawReply reply =
        RawCall(t->channel, "/tributary.v1.Tributary/" + method,
                std::string("\xff\xff\xff\xff", 4));
    EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << reply.status.error_message();
    EXPECT_THAT(reply.status.error_message(),
                HasSubstr("not a valid " + type));
  }
  // Still serving, nothing held.
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  EXPECT_TRUE(t->stub->Generate(&ctx, Base(), &response).ok());
  EXPECT_EQ(response.token_ids_size(), 8);
  EXPECT_TRUE(t->WaitIdle());
}

}  // namespace
}  // namespace tributary
