// tributary-gpu-bench: the CUDA backend against the device's own ceilings,
// measured in the same run (design.md §8, the device tool's METHOD.md).
//
//   tributary-gpu-bench [--preset qwen3.5-27b] [--seed S] [--device D]
//                       [--prefill-tokens 8192] [--context 1024]
//                       [--batches 1,8,32,64] [--steps 10] [--json FILE]
//                       [--copy-mib 2048] [--matmul-size 8192]
//
// 1. Ceilings: device-to-device copy bandwidth (cudaMemcpyAsync of 2 GiB,
//    bytes read + written, median of 10) and the bf16 matrix rate (the
//    backend's MatMul, i.e. cublasGemmEx with f32 compute, 8192³, random
//    data, median of 10).
// 2. A synthetic model of the preset's shapes (random weights made on the
//    device): one prefill of --prefill-tokens tokens (tokens/s, and its FLOPs
//    over the measured matrix rate), then decode steps at each batch size
//    with every sequence holding --context tokens, greedy (only the argmax
//    ids come back; ms/step, median of
//    --steps, against the floor: the bytes a step must read and write over
//    the measured bandwidth), and where a step's time goes (three more
//    steps with every op synchronized and timed; --json has every op).
// 3. Peer runs, side by side: the prefill again on the straightforward
//    kernels (CudaBackend::set_straightforward_kernels); every
//    decode step interleaved with one without CUDA graphs and one on the
//    straightforward kernels without graphs, same model, same shapes: what
//    the graphs and what the fast kernels gain; and one with programmatic
//    dependent launch (CudaBackend::set_programmatic_launch, off in the
//    service until measured): what starting each kernel while the one
//    before it finishes gains; and one with the GEMM tuner
//    (CudaBackend::set_tune_gemms, off in the service until measured):
//    what the algorithms measured fastest for batched decode's cuBLAS
//    products gain (they are tuned in the warm-up steps; --json lists every
//    shape's cublasGemmEx and best times and the choice).
// Times are host clocks around Synchronize (the backend has no events; a
// step is long enough that the launch latency of the last op is noise).
// A table goes to stdout; --json writes the numbers.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/common/timing_backend.h"
#include "engine/backend/cuda/cuda_api.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/decoder/forward_work.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_weights.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// Device-to-device copy bandwidth in bytes/s (read + write), over
// `bytes`-sized buffers.
absl::StatusOr<double> CopyBandwidth(Backend& backend, int64_t bytes) {
  const int64_t elements = bytes / 4;
  ASSIGN_OR_RETURN(Tensor a, backend.Allocate(ElementType::kF32, Shape{elements}));
  ASSIGN_OR_RETURN(Tensor b, backend.Allocate(ElementType::kF32, Shape{elements}));
  backend.FillRandom(a, 1, -1.0f, 1.0f, ElementType::kF32);  // never time on zeros
  RETURN_IF_ERROR(backend.Synchronize());
  std::vector<double> times;
  for (int i = 0; i < 13; ++i) {
    const auto start = Clock::now();
    RETURN_IF_ERROR(Cuda(cudaMemcpy(b.data, a.data, a.size_bytes(),
                                    cudaMemcpyDeviceToDevice),
                         "cudaMemcpy"));
    RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    if (i >= 3) times.push_back(Seconds(start, Clock::now()));
  }
  backend.Free(a);
  backend.Free(b);
  return 2.0 * static_cast<double>(a.size_bytes()) / Median(times);
}

// bf16 matrix rate in FLOP/s through the backend's MatMul, n × n × n.
absl::StatusOr<double> MatMulRate(Backend& backend, int64_t n) {
  ASSIGN_OR_RETURN(Tensor x, backend.Allocate(ElementType::kBF16, Shape{n, n}));
  ASSIGN_OR_RETURN(Tensor w, backend.Allocate(ElementType::kBF16, Shape{n, n}));
  ASSIGN_OR_RETURN(Tensor y, backend.Allocate(ElementType::kBF16, Shape{n, n}));
  backend.FillRandom(x, 2, -1.0f, 1.0f, ElementType::kBF16);
  backend.FillRandom(w, 3, -1.0f, 1.0f, ElementType::kBF16);
  RETURN_IF_ERROR(backend.Synchronize());
  std::vector<double> times;
  for (int i = 0; i < 13; ++i) {
    const auto start = Clock::now();
    backend.MatMul(x, w, y);
    RETURN_IF_ERROR(backend.Synchronize());
    if (i >= 3) times.push_back(Seconds(start, Clock::now()));
  }
  backend.Free(x);
  backend.Free(w);
  backend.Free(y);
  return 2.0 * static_cast<double>(n) * n * n / Median(times);
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"preset", "seed", "device", "prefill-tokens",
                                   "context", "batches", "steps", "json",
                                   "copy-mib", "matmul-size"},
                                  {}));
  const std::string preset = args.Get("preset").value_or("qwen3.5-27b");
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t device, args.GetInt("device", 0, 0, 1023));
  ASSIGN_OR_RETURN(int64_t prefill_tokens,
                   args.GetInt("prefill-tokens", 8192, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t context, args.GetInt("context", 1024, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t steps, args.GetInt("steps", 10, 1, 10000));
  ASSIGN_OR_RETURN(int64_t copy_mib, args.GetInt("copy-mib", 2048, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t matmul_size,
                   args.GetInt("matmul-size", 8192, 16, 65536));
  std::vector<int64_t> batches;
  for (absl::string_view piece :
       absl::StrSplit(args.Get("batches").value_or("1,8,32,64"), ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(piece, &b) || b < 1 || b > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: '", piece, "' is not a batch size"));
    }
    batches.push_back(b);
  }
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());

  BackendOptions bo;
  bo.kind = BackendKind::kCuda;
  bo.cuda.device = static_cast<int>(device);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(bo));
  CudaBackend* cuda = dynamic_cast<CudaBackend*>(backend.get());
  if (cuda == nullptr) return absl::InternalError("not the CUDA backend");

  nlohmann::json report;
  // The report so far, written after every phase: a run stopped by its time
  // limit still leaves what it measured.
  auto save = [&]() -> absl::Status {
    if (!args.Has("json")) return absl::OkStatus();
    std::ofstream out(*args.Get("json"));
    out << report.dump(2) << '\n';
    if (!out) return absl::PermissionDeniedError("cannot write --json file");
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const double bandwidth,
                   CopyBandwidth(*backend, copy_mib << 20));
  ASSIGN_OR_RETURN(const double matmul_rate, MatMulRate(*backend, matmul_size));
  report["copy_bandwidth_bytes_per_s"] = bandwidth;
  report["bf16_matmul_flops_per_s"] = matmul_rate;
  LogInfo("ceilings: copy ", bandwidth / 1e12, " TB/s, bf16 matmul ",
          matmul_rate / 1e12, " TFLOP/s");
  RETURN_IF_ERROR(save());

  ASSIGN_OR_RETURN(ModelDirectory model, ModelDirectory::Synthetic(preset));
  const ModelConfig& c = model.config();
  // The least a step does (its bf16 weights, KV and conv windows as the
  // CUDA backend stores them), and every weight's bytes for the init report.
  const ForwardWork work = ForwardWorkOf(c, model.weights(), 2);
  double all_weight_bytes = 0;
  for (const TensorView* v : AllViews(model.weights())) {
    all_weight_bytes += static_cast<double>(v->size_bytes);
  }
  const int64_t block = 16;
  // Positions a sequence reaches: the prefill, or the context plus every
  // decode step (two warm-up steps and the timed ones, each in the six
  // variants, and three for the per-op breakdown).
  const int64_t kBreakdownSteps = 3;
  const int64_t kVariants = 6;
  const int64_t decode_steps = kVariants * (steps + 2) + 2 * kBreakdownSteps;
  const int64_t blocks_per_seq =
      (std::max(context + decode_steps, prefill_tokens) + block - 1) / block;
  CacheConfig cache{blocks_per_seq * (max_batch + 1), block, max_batch + 1};
  WeightLoadOptions load;
  load.random_seed = static_cast<uint64_t>(seed);
  load.progress = WeightLoadOptions::LogEveryTenth();
  const auto load_start = Clock::now();
  // The decoder runs over a timing wrapper, off except for the per-op
  // breakdown at the end (then every op waits for its own work).
  TimingBackend timed(backend.get(), /*synchronize=*/true);
  timed.set_enabled(false);
  ASSIGN_OR_RETURN(std::unique_ptr<HybridDecoder> decoder,
                   HybridDecoder::Create(c, model.weights(), &timed, cache,
                                         load));
  RETURN_IF_ERROR(backend->Synchronize());
  report["model"] = preset;
  report["weight_bytes"] = all_weight_bytes;
  report["weights_init_seconds"] = Seconds(load_start, Clock::now());

  auto table_of = [&](int64_t seq) {
    std::vector<int32_t> table;
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      table.push_back(static_cast<int32_t>(seq * blocks_per_seq + b));
    }
    return table;
  };
  auto ids = [&](int64_t n, int64_t salt) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<int32_t>((i * 7919 + salt * 104729) % c.vocab_size);
    }
    return v;
  };
  ForwardOptions options;  // residual statistics on, as the service runs

  // Prefill: one sequence (slot max_batch), on the fast kernels and, as the
  // peer, on the straightforward ones. Each is run once untimed at the full
  // length first: the first prefill of a length grows the decoder's step
  // buffers and the delta rule's workspace (cudaFree synchronizes) and is
  // cuBLAS's first product of those shapes, costs the service pays once.
  {
    BatchLayout warm;
    SequenceSlice& s = warm.sequences.emplace_back();
    s.num_tokens = prefill_tokens;
    s.state_slot = static_cast<int32_t>(max_batch);
    s.block_table = table_of(max_batch);
    auto prefill = [&](bool straightforward) -> absl::StatusOr<double> {
      RETURN_IF_ERROR(decoder->ResetStateSlot(static_cast<int32_t>(max_batch)));
      cuda->set_straightforward_kernels(straightforward);
      const auto start = Clock::now();
      absl::Status status =
          decoder->Forward(warm, ids(prefill_tokens, 1), options).status();
      const double seconds = Seconds(start, Clock::now());
      cuda->set_straightforward_kernels(false);
      RETURN_IF_ERROR(status);
      return seconds;
    };
    RETURN_IF_ERROR(prefill(false).status());
    RETURN_IF_ERROR(prefill(true).status());
    ASSIGN_OR_RETURN(const double seconds, prefill(false));
    ASSIGN_OR_RETURN(const double peer_seconds, prefill(true));
    // 2 · parameters per token, the head once, attention's two products over
    // the causal triangle and the delta rule's state work (ForwardWork).
    const double t = static_cast<double>(prefill_tokens);
    StepShape shape;
    shape.sequences = 1;
    shape.tokens = prefill_tokens;
    shape.logit_rows = 1;
    shape.attended_keys = prefill_tokens * (prefill_tokens + 1) / 2;
    shape.context_tokens = prefill_tokens;
    const double flops = work.Flops(shape);
    report["prefill"] = {{"tokens", prefill_tokens},
                         {"seconds", seconds},
                         {"tokens_per_s", t / seconds},
                         {"straightforward_seconds", peer_seconds},
                         {"flops", flops},
                         {"fraction_of_matmul_rate", flops / seconds / matmul_rate}};
    LogInfo("prefill of ", prefill_tokens, " tokens: ", seconds, " s (",
            peer_seconds, " s on the straightforward kernels)");
    RETURN_IF_ERROR(save());
  }

  // Decode at each batch size, every sequence at `context` cached tokens.
  nlohmann::json decode = nlohmann::json::array();
  for (int64_t batch : batches) {
    for (int64_t q = 0; q < batch; ++q) {
      RETURN_IF_ERROR(decoder->ResetStateSlot(static_cast<int32_t>(q)));
    }
    // Fill the contexts, packing sequences into steps of at most 8192 tokens.
    BatchLayout fill;
    std::vector<int32_t> fill_ids;
    for (int64_t q = 0; q < batch; ++q) {
      SequenceSlice s;
      s.token_offset = static_cast<int64_t>(fill_ids.size());
      s.num_tokens = context;
      s.state_slot = static_cast<int32_t>(q);
      s.block_table = table_of(q);
      const std::vector<int32_t> prompt = ids(context, q + 2);
      fill_ids.insert(fill_ids.end(), prompt.begin(), prompt.end());
      fill.sequences.push_back(s);
      if (static_cast<int64_t>(fill_ids.size()) + context > 8192 || q + 1 == batch) {
        RETURN_IF_ERROR(decoder->Forward(fill, fill_ids, options).status());
        fill.sequences.clear();
        fill_ids.clear();
      }
    }
    // The decode steps run as the service runs greedy requests: residual
    // statistics on, only the argmax ids copied back (ForwardOptions::
    // device_choice), in every variant.
    ForwardOptions decode_options = options;
    decode_options.device_choice.assign(static_cast<size_t>(batch), true);
    // The fourth variant draws every row on the device as a sampled request
    // without penalties or logprobs does (Backend::ChooseTokens).
    ForwardOptions sampled_options = decode_options;
    sampled_options.token_choices.assign(static_cast<size_t>(batch),
                                         TokenChoice{0.8f, 0, 0.95f, 0.0f, 0.5});
    BatchLayout step;
    for (int64_t q = 0; q < batch; ++q) {
      SequenceSlice s;
      s.token_offset = q;
      s.num_tokens = 1;
      s.first_position = context;
      s.state_slot = static_cast<int32_t>(q);
      s.block_table = table_of(q);
      step.sequences.push_back(s);
    }
    // Steps rotate through the variants (fast kernels with graphs, the
    // service's; without graphs; the straightforward kernels without
    // graphs; fast with graphs drawing sampled tokens; fast with graphs and
    // programmatic dependent launch; fast with graphs and tuned GEMMs), so
    // that a slow phase of the device hits all six. The two warm-up rounds
    // capture the graphs (and tune the tuned variant's products).
    std::vector<double> times[kVariants];
    // The programmatic variant's steps that ran as plain launches (a capture
    // refused): its time would then not be the graphs'.
    int64_t programmatic_eager = 0;
    bool programmatic_took = true;  // not refused (a device before Hopper)
    int64_t position = context;
    for (int64_t i = 0; i < steps + 2; ++i) {
      for (int64_t variant = 0; variant < kVariants; ++variant) {
        for (SequenceSlice& s : step.sequences) s.first_position = position;
        ++position;
        // Graphs for the service's two step kinds (variants 0 and 3), and
        // for programmatic launch (4).
        cuda->set_graphs(variant == 0 || variant == 3 || variant == 4 ||
                         variant == 5);
        cuda->set_straightforward_kernels(variant == 2);
        cuda->set_programmatic_launch(variant == 4);
        RETURN_IF_ERROR(cuda->set_tune_gemms(variant == 5));
        const int64_t eager_before = cuda->graph_stats().eager;
        const auto start = Clock::now();
        absl::Status status =
            decoder->Forward(step, ids(batch, 1000 + i),
                             variant == 3 ? sampled_options : decode_options)
                .status();
        const double seconds = Seconds(start, Clock::now());
        cuda->set_graphs(true);
        cuda->set_straightforward_kernels(false);
        if (variant == 4) {
          programmatic_eager += cuda->graph_stats().eager - eager_before;
          programmatic_took = programmatic_took && cuda->programmatic_launch();
        }
        cuda->set_programmatic_launch(false);
        RETURN_IF_ERROR(cuda->set_tune_gemms(false));
        RETURN_IF_ERROR(status);
        if (i >= 2) times[variant].push_back(seconds);
      }
    }
    const double ms = 1e3 * Median(times[0]);
    const double no_graphs_ms = 1e3 * Median(times[1]);
    const double peer_ms = 1e3 * Median(times[2]);
    const double sampled_ms = 1e3 * Median(times[3]);
    const double programmatic_ms = 1e3 * Median(times[4]);
    const double tuned_ms = 1e3 * Median(times[5]);
    // Where a step's time goes: three more steps, each op synchronized and
    // timed (slower in all than the steps above: the sum is a breakdown,
    // not a step time).
    // Once on the fast kernels, once on the straightforward ones: op by
    // op, what the fast kernels gain.
    auto breakdown_of = [&](bool straightforward) -> absl::StatusOr<nlohmann::json> {
      timed.totals().clear();
      timed.set_enabled(true);
      cuda->set_straightforward_kernels(straightforward);
      absl::Status status;
      for (int64_t i = 0; i < kBreakdownSteps && status.ok(); ++i) {
        for (SequenceSlice& s : step.sequences) s.first_position = position;
        ++position;
        status =
            decoder->Forward(step, ids(batch, 2000 + i), decode_options).status();
      }
      timed.set_enabled(false);
      cuda->set_straightforward_kernels(false);
      RETURN_IF_ERROR(status);
      std::vector<std::pair<double, std::string>> ops;
      for (const auto& [key, seconds] : timed.totals()) {
        ops.emplace_back(1e3 * seconds / kBreakdownSteps, key);
      }
      std::sort(ops.rbegin(), ops.rend());
      nlohmann::json result = nlohmann::json::array();
      for (const auto& [op_ms, key] : ops) {
        result.push_back({{"op", key}, {"ms_per_step", op_ms}});
      }
      return result;
    };
    ASSIGN_OR_RETURN(nlohmann::json breakdown, breakdown_of(false));
    ASSIGN_OR_RETURN(nlohmann::json peer_breakdown, breakdown_of(true));
    // The weights once; every sequence's GDN state read and written and its
    // context's KV read (ForwardWork).
    StepShape shape;
    shape.sequences = batch;
    shape.tokens = batch;
    shape.logit_rows = batch;
    shape.attended_keys = batch * (context + 1);
    shape.context_tokens = batch * (context + 1);
    const double floor_bytes = work.Bytes(shape);
    const double floor_ms = 1e3 * floor_bytes / bandwidth;
    decode.push_back({{"batch", batch},
                      {"context", context},
                      {"ms_per_step", ms},
                      {"floor_ms", floor_ms},
                      {"floor_over_measured", floor_ms / ms},
                      {"no_graphs_ms_per_step", no_graphs_ms},
                      {"straightforward_ms_per_step", peer_ms},
                      {"sampled_ms_per_step", sampled_ms},
                      {"programmatic_launch_ms_per_step", programmatic_ms},
                      {"programmatic_launch_took", programmatic_took},
                      {"programmatic_launch_eager_steps", programmatic_eager},
                      {"tuned_gemms_ms_per_step", tuned_ms},
                      {"graphs_captured", cuda->graph_stats().captured},
                      {"graphs_replayed", cuda->graph_stats().replayed},
                      {"ops_synchronized", breakdown},
                      {"ops_synchronized_straightforward", peer_breakdown}});
    report["decode"] = decode;
    nlohmann::json tunings = nlohmann::json::array();
    for (const GemmTuning& t : cuda->gemm_tunings()) {
      tunings.push_back({{"out_features", t.out_features},
                         {"tokens", t.tokens},
                         {"in_features", t.in_features},
                         {"f32_output", t.f32_output},
                         {"candidates", t.candidates},
                         {"gemm_ex_ms", t.default_ms},
                         {"best_candidate_ms", t.best_ms},
                         {"chosen_rank", t.chosen}});
    }
    report["gemm_tunings"] = tunings;
    LogInfo("decode at batch ", batch, ": ", ms, " ms/step (floor ", floor_ms,
            " ms)");
    RETURN_IF_ERROR(save());
  }
  report["decode"] = decode;

  std::cout << absl::StrFormat(
      "\nceilings: copy %.2f TB/s (read + write), bf16 matmul %.0f TFLOP/s\n",
      bandwidth / 1e12, matmul_rate / 1e12);
  std::cout << absl::StrFormat(
      "model %s, %.2f GB of weights (random, made on the device in %.1f s)\n",
      preset, all_weight_bytes / 1e9, report["weights_init_seconds"].get<double>());
  const auto& p = report["prefill"];
  std::cout << absl::StrFormat(
      "prefill %d tokens: %.3f s, %.0f tokens/s, %.0f TFLOP/s = %.1f%% of the "
      "matmul rate\n",
      prefill_tokens, p["seconds"].get<double>(), p["tokens_per_s"].get<double>(),
      p["flops"].get<double>() / p["seconds"].get<double>() / 1e12,
      100.0 * p["fraction_of_matmul_rate"].get<double>());
  std::cout << absl::StrFormat(
      "prefill on the straightforward kernels: %.3f s (fast kernels %.2fx)\n",
      p["straightforward_seconds"].get<double>(),
      p["straightforward_seconds"].get<double>() / p["seconds"].get<double>());
  for (const auto& d : decode) {
    for (const char* which : {"ops_synchronized", "ops_synchronized_straightforward"}) {
      std::cout << absl::StrFormat(
          "\nbatch %d, %s kernels: the five costliest ops of a step, each "
          "synchronized (ms):",
          d["batch"].get<int64_t>(),
          std::string(which) == "ops_synchronized" ? "fast" : "straightforward");
      int shown = 0;
      for (const auto& op : d[which]) {
        if (shown++ == 5) break;
        std::cout << absl::StrFormat("  %s %.2f", op["op"].get<std::string>(),
                                     op["ms_per_step"].get<double>());
      }
    }
    std::cout << "\n";
  }
  std::cout << "\nbatch  context  ms/step  floor ms  floor/measured"
               "  no graphs ms  straightforward ms  graphs gain  fast-kernel gain"
               "  sampled ms  programmatic ms  tuned ms\n";
  for (const auto& d : decode) {
    const double ms = d["ms_per_step"].get<double>();
    const double no_graphs = d["no_graphs_ms_per_step"].get<double>();
    const double straightforward = d["straightforward_ms_per_step"].get<double>();
    std::cout << absl::StrFormat(
        "%5d  %7d  %7.2f  %8.2f  %13.1f%%  %12.2f  %18.2f  %10.2fx  %15.2fx"
        "  %10.2f  %15.2f  %8.2f\n",
        d["batch"].get<int64_t>(), d["context"].get<int64_t>(), ms,
        d["floor_ms"].get<double>(),
        100.0 * d["floor_over_measured"].get<double>(), no_graphs,
        straightforward, no_graphs / ms, straightforward / no_graphs,
        d["sampled_ms_per_step"].get<double>(),
        d["programmatic_launch_ms_per_step"].get<double>(),
        d["tuned_gemms_ms_per_step"].get<double>());
  }
  // The tuner's shapes: how much faster than cublasGemmEx the best
  // cuBLASLt algorithm ran, and how many it kept.
  int kept = 0;
  double gain_sum = 0.0;
  int compared = 0;
  for (const auto& t : report["gemm_tunings"]) {
    if (t["chosen_rank"].get<int>() >= 0) ++kept;
    const double best = t["best_candidate_ms"].get<double>();
    if (best > 0.0) {
      gain_sum += t["gemm_ex_ms"].get<double>() / best;
      ++compared;
    }
  }
  std::cout << absl::StrFormat(
      "\ngemm tuner: %d shapes tuned, %d kept a cuBLASLt algorithm; "
      "cublasGemmEx / best candidate %.2fx on average\n",
      static_cast<int>(report["gemm_tunings"].size()), kept,
      compared > 0 ? gain_sum / compared : 0.0);
  return save();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-gpu-bench",
                               [&] { return tributary::Run(argc, argv); });
}
