// step_ops_bench: where a decode step's time goes, op by op, on the CPU
// backend. The real HybridDecoder runs over a Backend that forwards every
// call to a CpuBackend and times it (the CPU backend is synchronous, so the
// wall time of a call is its cost, thread hand-offs included). Prints, for
// decode steps of --batch sequences, the time per step of each op and weight
// shape, largest first, against the whole forward: the mean over the steps
// and the best step (the machine is shared: the best is the least
// disturbed). With --prefill, each timed step is instead one prefill of
// all B sequences' P-token prompts from position 0 (B · P tokens; the
// engine's prefill steps of bench/engine/batching_gain.sh's load are
// --batch 16 --prompt 32, its 512-token step budget), each slot reset
// first, as the engine does (outside the timing). A step of several
// sequences runs in parts, one per thread (Backend::StepParts), whose ops
// are timed only as their whole; --one-piece runs every step in one piece,
// op by op on all the threads, for the breakdown (and the comparison).
//   step_ops_bench [--model DIR] [--batch B] [--prompt P] [--steps N]
//                  [--threads T] [--cpu-matmul f32|bf16] [--prefill]
//                  [--one-piece]
// Defaults: the default model, B = 32, P = 32, N = 64, T = 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/timing_backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"model", "batch", "prompt", "steps",
                                   "threads", "cpu-matmul"},
                                  {"prefill", "one-piece"}));
  const bool prefill = args.Has("prefill");
  const std::string model_dir = args.GetOr("model", "models/tiny-shakespeare");
  ASSIGN_OR_RETURN(const int64_t batch, args.GetInt("batch", 32, 1, 256));
  ASSIGN_OR_RETURN(const int64_t prompt, args.GetInt("prompt", 32, 1, 512));
  ASSIGN_OR_RETURN(const int64_t steps, args.GetInt("steps", 64, 1, 512));
  ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 2, 1, 64));

  ASSIGN_OR_RETURN(ModelDirectory model, ModelDirectory::Load(model_dir));
  const ModelConfig& config = model.config();
  if (prompt + (prefill ? 0 : steps) > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        prefill ? "--prompt exceeds the context"
                : "--prompt + --steps exceeds the context");
  }
  ASSIGN_OR_RETURN(const MatMulPrecision precision,
                   ParseMatMulPrecision(args.GetOr("cpu-matmul", "f32")));
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = static_cast<int>(threads);
  cpu_options.matmul_precision = precision;
  cpu_options.step_in_parts = !args.Has("one-piece");
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> cpu, CpuBackend::Create(cpu_options));
  TimingBackend timed(cpu.get());
  constexpr int64_t kBlockSize = 16;
  const int64_t blocks_per_seq = (prompt + steps + kBlockSize - 1) / kBlockSize;
  ASSIGN_OR_RETURN(
      std::unique_ptr<HybridDecoder> decoder,
      HybridDecoder::Create(config, model.weights(), &timed,
                            {batch * blocks_per_seq, kBlockSize, batch}));
  BatchLayout layout;
  for (int64_t s = 0; s < batch; ++s) {
    SequenceSlice& slice = layout.sequences.emplace_back();
    slice.state_slot = static_cast<int32_t>(s);
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      slice.block_table.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    }
  }
  // Prefill each sequence alone (fixed pseudo-random ids), then decode all.
  std::vector<int32_t> ids;
  for (int64_t s = 0; s < batch; ++s) {
    BatchLayout one;
    one.sequences.push_back(layout.sequences[s]);
    one.sequences[0].num_tokens = prompt;
    ids.clear();
    for (int64_t i = 0; i < prompt; ++i) {
      ids.push_back(
          static_cast<int32_t>((s * 7919 + i * 104729) % config.vocab_size));
    }
    RETURN_IF_ERROR(decoder->Forward(one, ids, {false, false}).status());
  }
  ForwardOptions options;  // residual statistics on, as the engine runs
  const int64_t tokens_per_seq = prefill ? prompt : 1;
  for (int64_t s = 0; s < batch; ++s) {
    layout.sequences[s].token_offset = s * tokens_per_seq;
    layout.sequences[s].first_position = prefill ? 0 : prompt;
    layout.sequences[s].num_tokens = tokens_per_seq;
  }
  const int64_t tokens_per_step = batch * tokens_per_seq;
  timed.totals().clear();
  double forward_seconds = 0.0, best_forward = 1e30;
  std::map<std::string, double> best;  // the least time of an op in a step
  for (int64_t step = 0; step < steps; ++step) {
    const std::map<std::string, double> before = timed.totals();
    ids.assign(static_cast<size_t>(tokens_per_step), 0);
    for (int64_t t = 0; t < tokens_per_step; ++t) {
      ids[t] = static_cast<int32_t>((t + step * 31) % config.vocab_size);
    }
    if (prefill) {
      for (int64_t s = 0; s < batch; ++s) {
        RETURN_IF_ERROR(decoder->ResetStateSlot(static_cast<int32_t>(s)));
      }
    }
    const auto start = Clock::now();
    RETURN_IF_ERROR(decoder->Forward(layout, ids, options).status());
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    forward_seconds += seconds;
    best_forward = std::min(best_forward, seconds);
    for (const auto& [key, total] : timed.totals()) {
      auto it = before.find(key);
      const double in_step = total - (it == before.end() ? 0.0 : it->second);
      auto [b, fresh] = best.emplace(key, in_step);
      if (!fresh) b->second = std::min(b->second, in_step);
    }
    if (!prefill) {
      for (SequenceSlice& s : layout.sequences) ++s.first_position;
    }
  }
  std::vector<std::pair<double, std::string>> rows;
  double sum = 0.0, best_sum = 0.0;
  for (const auto& [key, seconds] : timed.totals()) {
    rows.emplace_back(seconds, key);
    sum += seconds;
    best_sum += best[key];
  }
  std::sort(rows.rbegin(), rows.rend());
  const double per_step_ms = 1e3 / static_cast<double>(steps);
  const std::string what =
      prefill ? absl::StrCat("prefill steps of ", prompt, "-token prompts")
              : absl::StrCat("decode steps after a ", prompt, "-token prompt");
  std::printf("batch %lld, %lld %s, %lld threads, %s\n",
              static_cast<long long>(batch), static_cast<long long>(steps),
              what.c_str(), static_cast<long long>(threads),
              cpu->StepParts(layout) > 1
                  ? absl::StrCat("in ", cpu->StepParts(layout), " parts").c_str()
                  : "in one piece");
  std::printf(
      "forward: mean %.3f ms/step (%.1f tok/s), best %.3f ms "
      "(%.1f tok/s); ops: mean %.3f, sum of bests %.3f ms\n",
      forward_seconds * per_step_ms,
      static_cast<double>(tokens_per_step * steps) / forward_seconds,
      best_forward * 1e3, static_cast<double>(tokens_per_step) / best_forward,
      sum * per_step_ms, best_sum * 1e3);
  std::printf("  %-24s %9s %9s %6s\n", "op", "mean ms", "best ms", "mean %");
  for (const auto& [seconds, key] : rows) {
    std::printf("  %-24s %9.3f %9.3f %5.1f%%\n", key.c_str(),
                seconds * per_step_ms, best[key] * 1e3,
                100.0 * seconds / forward_seconds);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("step_ops_bench",
                               [&] { return tributary::Run(argc, argv); });
}
