// engine_bench: prefill and decode throughput of the CPU engine on one model.
//
//   engine_bench --model DIR [--prefill-tokens 512] [--decode-tokens 64]
//                [--decode-context 16] [--threads N] [--repeat 3] [--json]
//                [--cpu-matmul f32|bf16]
//
// Prefill: one sequence of --prefill-tokens new tokens in one step (logits
// for the last token only), best of --repeat, with and without the residual
// statistics. Decode: batch 1, after a prefill of --decode-context tokens,
// 2 × --decode-tokens single-token steps alternating with and without the
// statistics; the median step time of each. Also prints the bytes of weights a decode step reads and
// the FLOPs of a prefill token (2 × the matrix parameters it touches), so
// that bench/engine/run.sh can put them against the machine's ceilings.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/element_type.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "engine/decoder/forward_work.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_weights.h"

namespace tributary {
namespace {

constexpr int64_t kBlockSize = 16;

struct Measured {
  double prefill_seconds = 0, prefill_seconds_no_stats = 0;
  double decode_step_seconds = 0, decode_step_seconds_no_stats = 0;
};

std::vector<int32_t> Tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  return ids;
}

BatchLayout OneSequence(int64_t num_tokens, int64_t first_position,
                        int64_t num_blocks) {
  BatchLayout layout;
  SequenceSlice& s = layout.sequences.emplace_back();
  s.num_tokens = num_tokens;
  s.first_position = first_position;
  for (int64_t b = 0; b < num_blocks; ++b) s.block_table.push_back(static_cast<int32_t>(b));
  return layout;
}

// Prefill with and without the statistics, alternating, best of `repeat`
// each: alternating keeps slow phases of a shared machine from landing on
// one side only.
absl::Status TimePrefill(HybridDecoder& decoder, int64_t tokens,
                         int64_t num_blocks, int repeat, Measured* m) {
  const std::vector<int32_t> ids = Tokens(tokens, decoder.config().vocab_size);
  m->prefill_seconds = m->prefill_seconds_no_stats = 1e30;
  for (int r = 0; r < repeat; ++r) {
    for (bool stats : {true, false}) {
      RETURN_IF_ERROR(decoder.ResetStateSlot(0));
      const absl::Time start = absl::Now();
      ASSIGN_OR_RETURN(ForwardOutput out,
                       decoder.Forward(OneSequence(tokens, 0, num_blocks), ids,
                                       {stats, false}));
      double& best = stats ? m->prefill_seconds : m->prefill_seconds_no_stats;
      best = std::min(best, absl::ToDoubleSeconds(absl::Now() - start));
    }
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Batch-1 decode after a prefill of `context` tokens; steps alternate with
// and without the statistics; the median step time of each.
absl::Status TimeDecode(HybridDecoder& decoder, int64_t context, int64_t steps,
                        int64_t num_blocks, Measured* m) {
  const std::vector<int32_t> ids = Tokens(context + steps, decoder.config().vocab_size);
  RETURN_IF_ERROR(decoder.ResetStateSlot(0));
  ASSIGN_OR_RETURN(ForwardOutput out,
                   decoder.Forward(OneSequence(context, 0, num_blocks),
                                   absl::MakeConstSpan(ids).subspan(0, context),
                                   {true, false}));
  std::vector<double> with_stats, without_stats;
  for (int64_t i = 0; i < steps; ++i) {
    const bool stats = i % 2 == 0;
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(out, decoder.Forward(OneSequence(1, context + i, num_blocks),
                                          {ids[context + i]}, {stats, false}));
    (stats ? with_stats : without_stats)
        .push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  m->decode_step_seconds = Median(with_stats);
  m->decode_step_seconds_no_stats = Median(without_stats);
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"model", "prefill-tokens", "decode-tokens",
                                   "decode-context", "threads", "repeat",
                                   "only-statistics", "cpu-matmul"},
                                  {"json"}));
  auto dir = args.Get("model");
  if (!dir) return absl::InvalidArgumentError("--model DIR is required");
  ASSIGN_OR_RETURN(int64_t prefill, args.GetInt("prefill-tokens", 512, 1, 1 << 16));
  ASSIGN_OR_RETURN(int64_t decode, args.GetInt("decode-tokens", 64, 1, 1 << 16));
  ASSIGN_OR_RETURN(int64_t context, args.GetInt("decode-context", 16, 1, 1 << 16));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0, 0, 1024));
  ASSIGN_OR_RETURN(int64_t repeat, args.GetInt("repeat", 3, 1, 100));

  ASSIGN_OR_RETURN(ModelDirectory model, ModelDirectory::Load(*dir));
  const ModelConfig& c = model.config();
  ASSIGN_OR_RETURN(const MatMulPrecision precision,
                   ParseMatMulPrecision(args.GetOr("cpu-matmul", "f32")));
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend,
                   CpuBackend::Create({static_cast<int>(threads), precision}));
  const int64_t max_tokens = std::max(prefill + decode, context + 2 * decode);
  const int64_t num_blocks = (max_tokens + kBlockSize - 1) / kBlockSize;
  ASSIGN_OR_RETURN(std::unique_ptr<HybridDecoder> decoder,
                   HybridDecoder::Create(c, model.weights(), backend.get(),
                                         {num_blocks, kBlockSize, 1}));

  // Weight bytes a decode step reads (every matrix and vector except the
  // embedding, of which it reads one row), and the prefill FLOPs per token
  // (2 × the matrix parameters a non-final token touches: not lm_head).
  const ForwardWork work = ForwardWorkOf(
      c, model.weights(),
      static_cast<int64_t>(ElementTypeSizeBytes(backend->activation_type())));
  const int64_t decode_bytes = work.weight_bytes;
  const int64_t matrix_params = work.layer_matrix_params;

  // --only-statistics on|off: one prefill and --decode-tokens decode steps
  // with the statistics fixed, untimed: for counting instructions under
  // callgrind (bench/engine/stats_cost.sh), which unlike a clock is exact.
  if (auto only = args.Get("only-statistics")) {
    if (*only != "on" && *only != "off") {
      return absl::InvalidArgumentError("--only-statistics takes on or off");
    }
    const bool stats = *only == "on";
    const std::vector<int32_t> ids = Tokens(prefill + decode, c.vocab_size);
    RETURN_IF_ERROR(decoder->ResetStateSlot(0));
    ASSIGN_OR_RETURN(ForwardOutput out,
                     decoder->Forward(OneSequence(prefill, 0, num_blocks),
                                      absl::MakeConstSpan(ids).subspan(0, prefill),
                                      {stats, false}));
    for (int64_t i = 0; i < decode; ++i) {
      ASSIGN_OR_RETURN(out, decoder->Forward(OneSequence(1, prefill + i, num_blocks),
                                             {ids[prefill + i]}, {stats, false}));
    }
    return absl::OkStatus();
  }

  Measured m;
  RETURN_IF_ERROR(TimePrefill(*decoder, prefill, num_blocks,
                              static_cast<int>(repeat), &m));
  RETURN_IF_ERROR(TimeDecode(*decoder, context, 2 * decode, num_blocks, &m));

  const double prefill_flops = 2.0 * static_cast<double>(matrix_params) * prefill;
  if (args.Has("json")) {
    std::printf(
        "{\"model\": \"%s\", \"threads\": %d, \"prefill_tokens\": %lld, "
        "\"prefill_seconds\": %.6f, \"prefill_seconds_no_stats\": %.6f, "
        "\"prefill_matrix_flops\": %.0f, \"decode_context\": %lld, "
        "\"decode_step_seconds\": %.6f, \"decode_step_seconds_no_stats\": %.6f, "
        "\"decode_weight_bytes\": %lld}\n",
        dir->c_str(), backend->num_threads(), static_cast<long long>(prefill),
        m.prefill_seconds, m.prefill_seconds_no_stats, prefill_flops,
        static_cast<long long>(context), m.decode_step_seconds,
        m.decode_step_seconds_no_stats, static_cast<long long>(decode_bytes));
    return absl::OkStatus();
  }
  std::printf("model %s, %d threads\n", dir->c_str(), backend->num_threads());
  std::printf("prefill %lld tokens: %.1f tokens/s (%.1f GFLOP/s of matmul), "
              "statistics cost %+.2f %%\n",
              static_cast<long long>(prefill), prefill / m.prefill_seconds,
              prefill_flops / m.prefill_seconds / 1e9,
              100.0 * (m.prefill_seconds / m.prefill_seconds_no_stats - 1.0));
  std::printf("decode batch 1: %.2f ms/step (%.1f tokens/s, %.2f GB/s of "
              "weights), statistics cost %+.2f %%\n",
              1e3 * m.decode_step_seconds, 1.0 / m.decode_step_seconds,
              decode_bytes / m.decode_step_seconds / 1e9,
              100.0 * (m.decode_step_seconds / m.decode_step_seconds_no_stats - 1.0));
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("engine_bench",
                               [&] { return tributary::Run(argc, argv); });
}
