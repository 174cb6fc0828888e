#include "client/generate_flags.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/intervention_flags.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Sampling, stopping and response flags common to both commands.
CommandSpec SharedSpec(const std::string& name) {
  CommandSpec spec;
  spec.name = name;
  spec.value_flags = {"max-new-tokens",
                      "temperature",
                      "top-k",
                      "top-p",
                      "min-p",
                      "seed",
                      "repetition-penalty",
                      "presence-penalty",
                      "frequency-penalty",
                      "stop-token-ids",
                      "priority"};
  spec.bool_flags = {"ignore-eos",
                     "include-stop-string",
                     "include-special-tokens",
                     "unary",
                     "verbose",
                     "residual"};
  spec.repeated_flags = {"stop"};
  AddInterventionFlags(&spec);
  return spec;
}

// A float flag: nullopt when absent. Any finite number: ranges are the
// server's to check.
absl::StatusOr<std::optional<float>> GetFloat(const CliArgs& args,
                                              const std::string& name) {
  auto text = args.Get(name);
  if (!text) return std::nullopt;
  double value = 0.0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", name, " must be a number, got '", *text, "'"));
  }
  return static_cast<float>(value);
}

}  // namespace

absl::Status BuildChatInput(const CliArgs& args, const std::string& message,
                            v1::ChatInput* chat) {
  if (auto system = args.Get("system")) {
    v1::ChatMessage* turn = chat->add_messages();
    turn->set_role("system");
    turn->set_content(*system);
  }
  v1::ChatMessage* turn = chat->add_messages();
  turn->set_role("user");
  turn->set_content(message);
  if (auto thinking = args.Get("enable-thinking")) {
    if (*thinking != "true" && *thinking != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --enable-thinking must be true or false, got '",
                       *thinking, "'"));
    }
    chat->set_enable_thinking(*thinking == "true");
  }
  return absl::OkStatus();
}

namespace {

absl::Status SetInput(const CommandLine& line, v1::GenerateRequest* request) {
  const CliArgs& args = line.args();
  const std::vector<std::string>& positional = args.positional();
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(line.command(), ": one argument expected (quote the ",
                     line.command() == "chat" ? "message" : "prompt", "), got ",
                     positional.size()));
  }
  if (line.command() == "chat") {
    if (positional.empty()) {
      return absl::InvalidArgumentError("chat: missing MESSAGE");
    }
    return BuildChatInput(args, positional[0], request->mutable_chat());
  }
  if (auto ids = args.Get("ids")) {
    if (!positional.empty()) {
      return absl::InvalidArgumentError(
          "generate: give a PROMPT or --ids, not both");
    }
    ASSIGN_OR_RETURN(std::vector<int32_t> parsed, ParseIdList("ids", *ids));
    request->mutable_token_ids()->mutable_ids()->Add(parsed.begin(),
                                                     parsed.end());
    return absl::OkStatus();
  }
  if (positional.empty()) {
    return absl::InvalidArgumentError("generate: missing PROMPT (or --ids)");
  }
  request->set_text(positional[0]);
  return absl::OkStatus();
}

}  // namespace

CommandSpec GenerateCommandSpec() {
  CommandSpec spec = SharedSpec("generate");
  spec.value_flags.insert("ids");
  return spec;
}

CommandSpec ChatCommandSpec() {
  CommandSpec spec = SharedSpec("chat");
  spec.value_flags.insert({"system", "enable-thinking"});
  return spec;
}

absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& flag,
                                                 const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int64_t id = 0;
    if (!absl::SimpleAtoi(item, &id) || id < 0 || id > kInt32Max) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", flag,
                       " must be a comma-separated list of token ids, got '",
                       item, "' in '", text, "'"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(
    const CommandLine& line) {
  const CliArgs& args = line.args();
  v1::GenerateRequest request;
  RETURN_IF_ERROR(SetInput(line, &request));

  v1::SamplingOptions* sampling = request.mutable_sampling();
  ASSIGN_OR_RETURN(std::optional<float> temperature,
                   GetFloat(args, "temperature"));
  if (temperature) sampling->set_temperature(*temperature);
  ASSIGN_OR_RETURN(std::optional<float> top_p, GetFloat(args, "top-p"));
  if (top_p) sampling->set_top_p(*top_p);
  ASSIGN_OR_RETURN(std::optional<float> min_p, GetFloat(args, "min-p"));
  if (min_p) sampling->set_min_p(*min_p);
  ASSIGN_OR_RETURN(std::optional<float> repetition,
                   GetFloat(args, "repetition-penalty"));
  if (repetition) sampling->set_repetition_penalty(*repetition);
  ASSIGN_OR_RETURN(std::optional<float> presence,
                   GetFloat(args, "presence-penalty"));
  if (presence) sampling->set_presence_penalty(*presence);
  ASSIGN_OR_RETURN(std::optional<float> frequency,
                   GetFloat(args, "frequency-penalty"));
  if (frequency) sampling->set_frequency_penalty(*frequency);
  if (args.Has("top-k")) {
    ASSIGN_OR_RETURN(long long top_k, args.GetInt("top-k", 0, 0, kInt32Max));
    sampling->set_top_k(static_cast<int32_t>(top_k));
  }
  if (args.Has("seed")) {
    ASSIGN_OR_RETURN(
        long long seed,
        args.GetInt("seed", 0, 0, std::numeric_limits<long long>::max()));
    sampling->set_seed(static_cast<uint64_t>(seed));
  }

  v1::StoppingOptions* stopping = request.mutable_stopping();
  if (args.Has("max-new-tokens")) {
    ASSIGN_OR_RETURN(long long max_new,
                     args.GetInt("max-new-tokens", 0, 1, kInt32Max));
    stopping->set_max_new_tokens(static_cast<int32_t>(max_new));
  }
  for (const std::string& stop : line.Repeated("stop")) {
    if (stop.empty()) {
      return absl::InvalidArgumentError("flag --stop must not be empty");
    }
    stopping->add_stop(stop);
  }
  if (auto ids = args.Get("stop-token-ids")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> parsed,
                     ParseIdList("stop-token-ids", *ids));
    stopping->mutable_stop_token_ids()->Add(parsed.begin(), parsed.end());
  }
  stopping->set_include_stop_string_in_output(args.Has("include-stop-string"));
  stopping->set_ignore_eos(args.Has("ignore-eos"));

  v1::ResponseOptions* response = request.mutable_response();
  response->set_include_special_tokens(args.Has("include-special-tokens"));
  response->set_residual_summary(args.Has("residual"));
  if (args.Has("priority")) {
    ASSIGN_OR_RETURN(long long priority,
                     args.GetInt("priority", 0, -1000, 1000));
    request.set_priority(static_cast<int32_t>(priority));
  }
  RETURN_IF_ERROR(SetInterventions(line, &request));
  return request;
}

}  // namespace tributary
