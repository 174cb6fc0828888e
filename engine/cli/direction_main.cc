// tributary-direction: makes a direction in the residual stream from two
// sets of example prompts, for steering and ablation.
//
//   (kUsage below, which --help prints)
//
// Each FILE holds one prompt per line (blank lines are skipped; the two
// characters \n inside a line stand for a newline, so a multi-line speech
// fits on one line). The direction is mean(A) − mean(B) of the stream at
// the point (after layer L's ffn, the default, or its mixer), over each
// prompt's last token or, with --all-tokens, over every token. It is
// written as one f32 tensor NAME (default "direction") of [hidden_size] in
// a safetensors file, with the recipe in the metadata; tributary-server
// --steering-vectors FILE serves it by name.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/decoder/direction_builder.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_locator.h"
#include "engine/model/safetensors_writer.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-direction [--model DIR] --a FILE --b FILE --layer L
                           [--point ffn|mixer] [--all-tokens] --out FILE
                           [--name NAME] [--threads N]
Flags: docs/tools.md.
)";

}  // namespace
namespace {

absl::StatusOr<std::vector<std::vector<int32_t>>> ReadPrompts(
    const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    auto ids = tokenizer.Encode(absl::StrReplaceAll(line, {{"\\n", "\n"}}));
    if (!ids.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", ids.status().message()));
    }
    prompts.push_back(*std::move(ids));
  }
  if (prompts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  }
  return prompts;
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"model", "a", "b", "layer", "point", "out",
                                   "name", "threads"},
                                  {"all-tokens"}));
  for (const char* required : {"a", "b", "layer", "out"}) {
    if (!args.Has(required)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", required, " is required"));
    }
  }
  const std::string point_name = args.GetOr("point", "ffn");
  if (point_name != "ffn" && point_name != "mixer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--point must be ffn or mixer, got ", point_name));
  }
  ASSIGN_OR_RETURN(long long threads, args.GetInt("threads", 0, 0, 1024));
  ASSIGN_OR_RETURN(std::string dir,
                   LocateModelDirectory(MakeModelSearch(
                       args.Get("model"), std::getenv("TRIBUTARY_MODEL"))));
  ASSIGN_OR_RETURN(ModelDirectory model, ModelDirectory::Load(dir));
  const ModelConfig& config = model.config();
  ASSIGN_OR_RETURN(long long layer,
                   args.GetInt("layer", 0, 0, config.num_hidden_layers - 1));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(dir));
  ASSIGN_OR_RETURN(auto a, ReadPrompts(*args.Get("a"), *tokenizer));
  ASSIGN_OR_RETURN(auto b, ReadPrompts(*args.Get("b"), *tokenizer));
  size_t longest = 0;
  for (const auto* set : {&a, &b}) {
    for (const auto& p : *set) longest = std::max(longest, p.size());
  }
  ASSIGN_OR_RETURN(auto backend,
                   CpuBackend::Create({static_cast<int>(threads)}));
  CacheConfig cache;
  cache.kv_block_size = 16;
  cache.num_kv_blocks = static_cast<int64_t>(longest + 15) / 16;
  cache.num_state_slots = 1;
  ASSIGN_OR_RETURN(auto decoder, HybridDecoder::Create(config, model.weights(),
                                                       backend.get(), cache));
  const StreamPoint point{static_cast<int32_t>(layer), point_name == "ffn"};
  const bool all_tokens = args.Has("all-tokens");
  ASSIGN_OR_RETURN(std::vector<float> mean_a,
                   MeanStream(*decoder, a, point, all_tokens));
  ASSIGN_OR_RETURN(std::vector<float> mean_b,
                   MeanStream(*decoder, b, point, all_tokens));
  std::vector<float> direction(mean_a.size());
  double sq = 0.0;
  for (size_t i = 0; i < direction.size(); ++i) {
    direction[i] = mean_a[i] - mean_b[i];
    sq += static_cast<double>(direction[i]) * direction[i];
  }
  const std::string name = args.GetOr("name", "direction");
  TensorToWrite tensor;
  tensor.name = name;
  tensor.dtype = DType::kF32;
  tensor.shape = {config.hidden_size};
  tensor.fill = [&direction](uint8_t* dst, size_t bytes) {
    std::memcpy(dst, direction.data(), bytes);
  };
  RETURN_IF_ERROR(WriteSafetensors(
      *args.Get("out"), {tensor},
      {{"tributary.recipe", "mean(A) - mean(B) of the residual stream"},
       {"tributary.layer", std::to_string(layer)},
       {"tributary.point", point_name},
       {"tributary.tokens", all_tokens ? "all" : "last"},
       {"tributary.prompts", absl::StrCat(a.size(), " A, ", b.size(), " B")}}));
  std::cout << name << ": layer " << layer << " after the " << point_name
            << ", " << a.size() << " A and " << b.size() << " B prompts, norm "
            << std::sqrt(sq) << " -> " << *args.Get("out") << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-direction", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}
