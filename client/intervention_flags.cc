#include "client/intervention_flags.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr char kSteerSyntax[] = "LAYER:DIRECTION[:SCALE][:mixer][:generated]";

absl::Status SteerError(const std::string& spec, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("flag --steer '", spec,
                                                 "': ", problem, " (expected ",
                                                 kSteerSyntax, ")"));
}

absl::StatusOr<std::string> ReadFile(const std::string& flag,
                                     const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": cannot read vector file '", path,
                     "': ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace

void AddInterventionFlags(CommandSpec* spec) {
  spec->value_flags.insert({"skip-layers", "lens", "lens-top", "lens-width"});
  spec->bool_flags.insert("lens-prompt");
  spec->repeated_flags.insert({"steer", "ablate"});
}

absl::StatusOr<std::vector<float>> ParseFloatList(const std::string& flag,
                                                  const std::string& source,
                                                  const std::string& text) {
  std::vector<float> values;
  for (absl::string_view item :
       absl::StrSplit(text, absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty())) {
    double value = 0.0;
    if (!absl::SimpleAtod(item, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --", flag, ": '", item.substr(0, 32), "' in '", source,
          "' (value ", values.size() + 1, ") is not a finite number"));
    }
    values.push_back(static_cast<float>(value));
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '", source, "' holds no numbers"));
  }
  return values;
}

absl::StatusOr<v1::Direction> ParseDirection(const std::string& flag,
                                             const std::string& text) {
  v1::Direction direction;
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", flag, ": empty DIRECTION (a vector name or @FILE)"));
  }
  if (text[0] != '@') {
    direction.set_name(text);
    return direction;
  }
  const std::string path = text.substr(1);
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '@' needs a file name (@FILE)"));
  }
  ASSIGN_OR_RETURN(std::string contents, ReadFile(flag, path));
  ASSIGN_OR_RETURN(std::vector<float> values,
                   ParseFloatList(flag, path, contents));
  direction.mutable_inline_vector()->mutable_values()->Add(values.begin(),
                                                           values.end());
  return direction;
}

absl::StatusOr<v1::Steering> ParseSteerSpec(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() < 2) return SteerError(spec, "needs LAYER:DIRECTION");
  v1::Steering steering;
  int64_t layer = 0;
  if (!absl::SimpleAtoi(parts[0], &layer) || layer < 0 || layer > kInt32Max) {
    return SteerError(
        spec, absl::StrCat("LAYER '", parts[0], "' is not a layer index"));
  }
  steering.set_layer(static_cast<int32_t>(layer));
  if (parts[1].empty()) return SteerError(spec, "empty DIRECTION");
  ASSIGN_OR_RETURN(*steering.mutable_direction(),
                   ParseDirection("steer", parts[1]));
  bool point_set = false, scope_set = false;
  for (size_t i = 2; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    double scale = 0.0;
    if (part == "mixer" || part == "ffn") {
      if (point_set) return SteerError(spec, "the stream point given twice");
      point_set = true;
      steering.set_point(part == "mixer" ? v1::STREAM_POINT_AFTER_MIXER
                                         : v1::STREAM_POINT_AFTER_FFN);
    } else if (part == "generated" || part == "all") {
      if (scope_set) return SteerError(spec, "the token scope given twice");
      scope_set = true;
      steering.set_tokens(part == "generated" ? v1::TOKEN_SCOPE_GENERATED
                                              : v1::TOKEN_SCOPE_ALL);
    } else if (absl::SimpleAtod(part, &scale)) {
      if (!std::isfinite(scale)) {
        return SteerError(spec,
                          absl::StrCat("SCALE '", part, "' is not finite"));
      }
      if (steering.has_scale()) return SteerError(spec, "SCALE given twice");
      steering.set_scale(static_cast<float>(scale));
    } else {
      return SteerError(spec, absl::StrCat("'", part,
                                           "' is not a SCALE, mixer, ffn, "
                                           "generated or all"));
    }
  }
  return steering;
}

absl::StatusOr<std::vector<int32_t>> ParseLayerList(const std::string& flag,
                                                    const std::string& text) {
  std::vector<int32_t> layers;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int64_t layer = 0;
    if (!absl::SimpleAtoi(item, &layer) || layer < 0 || layer > kInt32Max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --", flag, " must be a comma-separated list of layers, got '",
          item, "' in '", text, "'"));
    }
    layers.push_back(static_cast<int32_t>(layer));
  }
  return layers;
}

absl::StatusOr<int> LensTableWidth(const CliArgs& args) {
  ASSIGN_OR_RETURN(long long width, args.GetInt("lens-width", 120, 40, 100000));
  return static_cast<int>(width);
}

absl::Status SetInterventions(const CommandLine& line,
                              v1::GenerateRequest* request) {
  const CliArgs& args = line.args();
  for (const std::string& spec : line.Repeated("steer")) {
    ASSIGN_OR_RETURN(*request->add_steering(), ParseSteerSpec(spec));
  }
  for (const std::string& text : line.Repeated("ablate")) {
    ASSIGN_OR_RETURN(*request->add_ablate(), ParseDirection("ablate", text));
  }
  if (auto skip = args.Get("skip-layers")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> layers,
                     ParseLayerList("skip-layers", *skip));
    request->mutable_skip_layers()->Add(layers.begin(), layers.end());
  }
  const std::optional<std::string> lens = args.Get("lens");
  if (!lens) {
    for (const char* flag : {"lens-top", "lens-prompt", "lens-width"}) {
      if (args.Has(flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", flag, " needs --lens"));
      }
    }
    return absl::OkStatus();
  }
  v1::LogitLens* logit_lens = request->mutable_logit_lens();
  if (*lens != "all") {
    ASSIGN_OR_RETURN(std::vector<int32_t> layers,
                     ParseLayerList("lens", *lens));
    logit_lens->mutable_layers()->Add(layers.begin(), layers.end());
  }
  if (args.Has("lens-top")) {
    ASSIGN_OR_RETURN(long long top, args.GetInt("lens-top", 5, 1, kInt32Max));
    logit_lens->set_top_n(static_cast<int32_t>(top));
  }
  logit_lens->set_include_prompt(args.Has("lens-prompt"));
  RETURN_IF_ERROR(LensTableWidth(args).status());
  // The table labels each row with the token that came next.
  request->mutable_response()->set_return_token_ids(true);
  return absl::OkStatus();
}

}  // namespace tributary
