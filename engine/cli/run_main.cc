// tributary-run: one prompt through the engine, no server.
//
//   (kUsage below, which --help prints)
//
// Greedy decoding. Stdout carries the generated text only, streamed as it is
// produced (complete UTF-8 characters); diagnostics go to stderr. With
// --dump, FILE.json gets the layout of the reference fixtures
// (tests/fixtures/README.md): prompt_ids, generated_ids, the raw f32 logits
// at every prompt position, the residual norms of every sublayer for every
// prompt token, and final_stream_norm. Without --dump the prefill computes
// logits for the last position only.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/backend/backend_factory.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_locator.h"
#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-run [--model DIR | --synthetic PRESET [--seed N]]
                     (--prompt TEXT | --prompt-ids 1,2,3)
                     [--max-new-tokens N] [--ignore-eos] [--threads N]
                     [--cpu-matmul f32|bf16]
                     [--backend cpu|cuda] [--device N] [--no-cuda-graphs]
                     [--cuda-programmatic-launch] [--cuda-tune-gemms]
                     [--dump FILE.json]
Flags: docs/tools.md.
)";

}  // namespace
namespace {

using Json = nlohmann::json;

constexpr int64_t kBlockSize = 16;

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(piece, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: '", piece, "' is not a token id (expected 1,2,3)"));
    }
    ids.push_back(id);
  }
  return ids;
}

// The residual norms of the prompt, in the fixtures' layout.
Json ResidualJson(const ModelConfig& config, const ForwardOutput& out,
                  int64_t num_tokens) {
  Json residual = Json::array();
  for (int64_t s = 0; s < 2 * config.num_hidden_layers; ++s) {
    Json stream = Json::array(), update = Json::array(), sum = Json::array();
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* row =
          out.residual_stats.data() + (s * num_tokens + t) * kResidualStatsColumns;
      stream.push_back(row[kStatStreamNorm]);
      update.push_back(row[kStatUpdateNorm]);
      sum.push_back(row[kStatSumNorm]);
    }
    const int64_t layer = s / 2;
    residual.push_back(
        {{"layer", layer},
         {"sublayer", s % 2 == 0 ? "mixer" : "ffn"},
         {"kind", std::string(LayerKindName(config.layer_types[layer]))},
         {"stream_norm", std::move(stream)},
         {"update_norm", std::move(update)},
         {"sum_norm", std::move(sum)}});
  }
  return residual;
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(
      CliArgs args,
      CliArgs::Parse(argc, argv,
                     {"model", "prompt", "prompt-ids", "max-new-tokens",
                      "threads", "dump", "backend", "device", "synthetic",
                      "seed", "cpu-matmul"},
                     {"ignore-eos", "no-cuda-graphs", "cuda-programmatic-launch",
                      "cuda-tune-gemms"}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  if (args.Has("prompt") == args.Has("prompt-ids")) {
    return absl::InvalidArgumentError(
        "give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  }
  ASSIGN_OR_RETURN(int64_t max_new_tokens,
                   args.GetInt("max-new-tokens", 32, 0, 1 << 20));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0, 0, 1024));
  BackendOptions backend_options;
  ASSIGN_OR_RETURN(backend_options.kind,
                   ParseBackendKind(args.Get("backend").value_or("cpu")));
  ASSIGN_OR_RETURN(int64_t device, args.GetInt("device", 0, 0, 1023));
  backend_options.cpu.num_threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(backend_options.cpu.matmul_precision,
                   ParseMatMulPrecision(args.GetOr("cpu-matmul", "f32")));
  backend_options.cuda.device = static_cast<int>(device);
  backend_options.cuda.graphs = !args.Has("no-cuda-graphs");
  backend_options.cuda.programmatic_launch = args.Has("cuda-programmatic-launch");
  backend_options.cuda.tune_gemms = args.Has("cuda-tune-gemms");
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));

  const absl::Time load_start = absl::Now();
  const bool synthetic = args.Has("synthetic");
  ASSIGN_OR_RETURN(ModelDirectory model,
                   OpenModel(args.Get("synthetic"),
                             MakeModelSearch(args.Get("model"),
                                             std::getenv("TRIBUTARY_MODEL"))));
  LogInfo("loaded model ", model.dir());
  for (const std::string& warning : model.warnings()) LogWarning(warning);
  const ModelConfig& config = model.config();
  const std::string& model_dir = model.dir();

  // A synthetic model has no tokenizer: token ids in, token ids out.
  std::unique_ptr<Tokenizer> tokenizer;
  if (synthetic) {
    if (args.Has("prompt")) {
      return absl::InvalidArgumentError(
          "a synthetic model has no tokenizer: give --prompt-ids 1,2,3");
    }
  } else if (auto loaded = Tokenizer::Load(model_dir); loaded.ok()) {
    tokenizer = std::move(*loaded);
  } else if (args.Has("prompt")) {
    return loaded.status();
  } else {
    LogWarning("no tokenizer (", loaded.status().message(),
               "): printing token ids");
  }

  std::vector<int32_t> prompt;
  if (args.Has("prompt")) {
    ASSIGN_OR_RETURN(prompt, tokenizer->Encode(*args.Get("prompt")));
  } else {
    ASSIGN_OR_RETURN(prompt, ParseIds(*args.Get("prompt-ids")));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_new_tokens;
  if (total > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt.size(), " tokens) + --max-new-tokens ", max_new_tokens,
        " exceeds the model's context of ", config.max_position_embeddings));
  }

  // Stop ids: the model's, resolving a tokenizer_config eos text if needed.
  const std::vector<int32_t> stop_ids = ResolveStopTokenIds(
      model.stop_tokens(), [&](absl::string_view text) -> std::optional<int32_t> {
        if (!tokenizer) return std::nullopt;
        return tokenizer->TokenToId(text);
      });
  const bool ignore_eos = args.Has("ignore-eos");

  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(backend_options));
  const int64_t num_blocks = (total + kBlockSize - 1) / kBlockSize;
  WeightLoadOptions load;
  if (synthetic) load.random_seed = static_cast<uint64_t>(seed);
  if (backend_options.kind != BackendKind::kCpu) {
    load.progress = WeightLoadOptions::LogEveryTenth();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HybridDecoder> decoder,
                   HybridDecoder::Create(config, model.weights(), backend.get(),
                                         {num_blocks, kBlockSize, 1}, load));
  LogInfo("model loaded in ", absl::FormatDuration(absl::Now() - load_start),
          ": ", config.num_hidden_layers, " layers, hidden ", config.hidden_size,
          ", vocab ", config.vocab_size, ", backend ", backend->name());

  BatchLayout layout;
  SequenceSlice& slice = layout.sequences.emplace_back();
  for (int64_t b = 0; b < num_blocks; ++b) {
    slice.block_table.push_back(static_cast<int32_t>(b));
  }
  slice.num_tokens = static_cast<int64_t>(prompt.size());
  const bool dump = args.Has("dump");
  const absl::Time prefill_start = absl::Now();
  ASSIGN_OR_RETURN(ForwardOutput prefill,
                   decoder->Forward(layout, prompt,
                                    {/*residual_stats=*/dump,
                                     /*logits_for_all_tokens=*/dump}));
  const absl::Duration prefill_time = absl::Now() - prefill_start;

  std::optional<StreamDecoder> text;
  if (tokenizer) text.emplace(*tokenizer, /*skip_special_tokens=*/false);
  auto emit = [&](int32_t id) -> absl::Status {
    if (text) {
      ASSIGN_OR_RETURN(std::string piece, text->Add(id));
      std::cout << piece << std::flush;
    } else {
      std::cout << id << ' ' << std::flush;
    }
    return absl::OkStatus();
  };

  const int64_t vocab = config.vocab_size;
  std::vector<float> last(prefill.logits.end() - vocab, prefill.logits.end());
  std::vector<int32_t> generated;
  const absl::Time decode_start = absl::Now();
  while (static_cast<int64_t>(generated.size()) < max_new_tokens) {
    const int32_t next = static_cast<int32_t>(
        std::max_element(last.begin(), last.end()) - last.begin());
    generated.push_back(next);
    const bool is_stop =
        std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end();
    if (is_stop && !ignore_eos) break;
    RETURN_IF_ERROR(emit(next));
    if (static_cast<int64_t>(generated.size()) == max_new_tokens) break;
    slice.first_position = slice.first_position + slice.num_tokens;
    slice.num_tokens = 1;
    ASSIGN_OR_RETURN(ForwardOutput step,
                     decoder->Forward(layout, {next}, ForwardOptions{false, false}));
    last = std::move(step.logits);
  }
  if (text) std::cout << text->Finish();
  std::cout << std::endl;
  const absl::Duration decode_time = absl::Now() - decode_start;
  LogInfo("prefill ", prompt.size(), " tokens in ",
          absl::FormatDuration(prefill_time), "; ", generated.size(),
          " tokens generated in ", absl::FormatDuration(decode_time));

  if (dump) {
    Json out;
    out["prompt_ids"] = prompt;
    out["generated_ids"] = generated;
    Json logits = Json::array();
    for (size_t t = 0; t < prompt.size(); ++t) {
      logits.push_back(std::vector<float>(prefill.logits.begin() + t * vocab,
                                          prefill.logits.begin() + (t + 1) * vocab));
    }
    out["logits"] = std::move(logits);
    const int64_t num_prompt = static_cast<int64_t>(prompt.size());
    out["residual"] = ResidualJson(config, prefill, num_prompt);
    out["final_stream_norm"] = prefill.final_stream_norm;
    const std::string path = *args.Get("dump");
    std::ofstream file(path);
    file << out.dump() << '\n';
    file.close();
    if (!file) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
    }
    LogInfo("wrote ", path);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-run", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}
