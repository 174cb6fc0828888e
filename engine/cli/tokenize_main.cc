// tributary-tokenize: JSON Lines in, JSON Lines out (kUsage below, which
// --help prints).
//
// Reads JSON Lines on stdin and writes exactly one line per input line, in
// order:
//   encode (default): {"text": "..."}  ->  {"ids": [...]}
//   --decode:         {"ids": [...]}   ->  {"text": "..."}
// A line that cannot be taken (not JSON, missing field, empty line, invalid
// UTF-8, unknown id) gives {"error": "..."} and the tool goes on. Output is
// raw UTF-8 JSON. Startup errors (bad flags, unreadable tokenizer) exit 1
// with one line on stderr.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-tokenize --tokenizer PATH [--decode [--skip-special-tokens]]
Reads JSON Lines on stdin ({"text": ...} or, with --decode, {"ids": [...]}), one
line out per line in. Flags: docs/tools.md.
)";

}  // namespace
namespace {

using Json = nlohmann::json;

absl::StatusOr<Json> ParseLine(const std::string& line, const char* field) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty line: expected a JSON object with \"", field, "\""));
  }
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError("not valid JSON (or not valid UTF-8)");
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError("expected a JSON object");
  }
  auto it = json.find(field);
  if (it == json.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing field \"", field, "\""));
  }
  return std::move(*it);
}

absl::StatusOr<Json> EncodeLine(const Tokenizer& tokenizer,
                                const std::string& line) {
  ASSIGN_OR_RETURN(Json text, ParseLine(line, "text"));
  if (!text.is_string()) {
    return absl::InvalidArgumentError("field \"text\" is not a string");
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                   tokenizer.Encode(text.get_ref<const std::string&>()));
  return Json{{"ids", ids}};
}

absl::StatusOr<Json> DecodeLine(const Tokenizer& tokenizer,
                                const std::string& line, bool skip_special) {
  ASSIGN_OR_RETURN(Json list, ParseLine(line, "ids"));
  if (!list.is_array()) {
    return absl::InvalidArgumentError("field \"ids\" is not an array");
  }
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const Json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"ids\" holds ", id.dump(), ", not a token id"));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(ids, skip_special));
  return Json{{"text", std::move(text)}};
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv, {"tokenizer"},
                                  {"decode", "skip-special-tokens"}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0],
                     "' (usage: --tokenizer PATH [--decode "
                     "[--skip-special-tokens]] < input.jsonl)"));
  }
  auto path = args.Get("tokenizer");
  if (!path) {
    return absl::InvalidArgumentError("--tokenizer PATH is required");
  }
  const bool decode = args.Has("decode");
  const bool skip_special = args.Has("skip-special-tokens");
  if (skip_special && !decode) {
    return absl::InvalidArgumentError("--skip-special-tokens needs --decode");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(*path));

  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    absl::StatusOr<Json> result = decode
                                      ? DecodeLine(*tokenizer, line, skip_special)
                                      : EncodeLine(*tokenizer, line);
    Json out = result.ok() ? *std::move(result)
                           : Json{{"error", std::string(result.status().message())}};
    std::cout << out.dump(-1, ' ', /*ensure_ascii=*/false,
                          Json::error_handler_t::replace)
              << '\n';
    // One line out per line in, promptly, so that the tool can be driven
    // interactively through pipes.
    if (std::cin.rdbuf()->in_avail() <= 0) std::cout.flush();
  }
  std::cout.flush();
  if (!std::cout) return absl::DataLossError("cannot write to stdout");
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-tokenize", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}
