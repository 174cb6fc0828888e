// tributary-bench: offline throughput of the engine (no server).
//
//   (kUsage below, which --help prints)
//
// --synthetic runs a model of a published shape (synthetic_model.h, e.g.
// qwen3.5-27b) with random weights made on the backend from --seed: no
// checkpoint needed.
// N requests, each with a synthetic prompt of P token ids (deterministic from
// --seed) and exactly O generated tokens (greedy, ignore_eos; or sampled with
// --temperature T > 0, --top-k, --top-p, seeded from --seed; penalized with
// --repetition-penalty R; where they draw is EngineOptions::device_sampling:
// the backend's default, or forced on or off). They are
// submitted all at once (the default), or keeping at most C in flight (a new
// one is submitted when one finishes), or at R requests/s with Poisson
// arrivals (exponential gaps drawn from --seed). Before the measurement W
// warm-up requests run, submitted at once (not counted). W defaults to the
// width of the measured load: C with --concurrency, min(N, --max-running)
// all at once, 1 with --rate. A batch's first steps touch for the first
// time the KV blocks, state slots and step buffers of that many sequences
// (a 32-wide first wave of the default model: ~3,700 page faults, its two
// 512-token prefill steps up to ~50 % slower), a cost of the process's first
// such burst, not of serving that load; --warmup 1 keeps it in. (On a
// 2-core AVX-512 VM a batch-1 step also runs 7–17 % faster while the
// machine is in the state that both cores reading its shared cache at once
// raise, which a 32-wide warm-up does and idling ~100 ms undoes:
// bench/journal/batch1-two-speeds.md.)
// --cpu-matmul bf16 rounds the CPU matmuls' inputs to bf16
// (CpuBackendOptions::matmul_precision).
// --cpu-one-piece runs every CPU step in one piece, each op on all the
// threads, rather than a step of several sequences in parts, one per thread
// (CpuBackendOptions::step_in_parts): the same tokens, for an A/B.
//
// --residual-stats computes every sublayer's residual statistics, as the
// server does unless --no-residual-stats (off by default here, so that
// the figures are the forward's alone; bench/engine/stats_cost.sh counts
// what they add).
// --peak-gflops and --read-gbps give the machine's ceilings, measured by
// the caller in the same run (bench/cpu/cpu_ceilings_bench --sections=r): a
// FLOP rate and a read rate. Every step's work (ForwardWork: the FLOPs of
// its products, attention and delta rule; the bytes of the weights, the GDN
// state read and written, the KV read) then gives its floor, the larger of
// FLOPs / rate and bytes / rate, and the report adds the roofline: the
// generated tokens over the sum of the floors (the ceiling tokens/s) and
// the run's tokens/s as a fraction of it. --step-work adds every measured
// step's FLOPs and bytes to the JSON ("step_work"), so that a script can
// take the floors against ceilings it measures around the run
// (bench/engine/batching_gain.sh).
// Reports requests/s and generated tokens/s over the wall time from the first
// submit to the last final event, TTFT (the engine's timing) and inter-token
// latency (gaps between token arrivals at the sink, absl::Now) percentiles,
// the mean batch size (sequences per step) and the engine-loop overhead (time
// outside the forward pass as a fraction of the step), both from the
// EngineObserver, and the failures per status code. Human-readable on stdout,
// or one JSON object with --json. Engine logs go to stderr.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/runtime/engine.h"
#include "engine/decoder/forward_work.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_locator.h"
#include "engine/runtime/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-bench [--model DIR] [--num-requests N] [--prompt-tokens P]
                       [--output-tokens O]
                       [--concurrency C | --rate R]
                       [--threads T] [--seed S] [--max-running M]
                       [--max-tokens-per-step K] [--cache-mib MIB]
                       [--warmup W] [--tokenizer] [--json]
                       [--backend cpu|cuda] [--device D] [--no-cuda-graphs]
                       [--cuda-programmatic-launch] [--cuda-tune-gemms]
                       [--synthetic PRESET]
                       [--temperature T] [--top-k K] [--top-p P]
                       [--repetition-penalty R]
                       [--device-sampling | --no-device-sampling]
                       [--cpu-matmul f32|bf16] [--cpu-one-piece]
                       [--peak-gflops G --read-gbps B] [--step-work]
                       [--residual-stats]
Flags and what is measured: bench/README.md.
)";

}  // namespace
namespace {

using Json = nlohmann::json;

// What one request's sink records. Written on the engine thread under `mu`
// (an append or a copy: never blocks for long), read by main after the final.
struct RequestRecord {
  std::mutex mu;
  std::vector<absl::Time> token_times;
  bool done = false;
  absl::Status status;
  int64_t num_generated = 0;
  RequestTiming timing;
};

// Completion notifications for the driver.
class Completions {
 public:
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++num_done_;
      last_done_ = absl::Now();
    }
    cv_.notify_all();
  }
  // Waits until at least `n` requests have finished.
  void WaitFor(int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return num_done_ >= n; });
  }
  int64_t num_done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return num_done_;
  }
  absl::Time last_done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_done_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t num_done_ = 0;
  absl::Time last_done_ = absl::InfinitePast();
};

class BenchSink : public TokenSink {
 public:
  BenchSink(RequestRecord* record, Completions* completions)
      : record_(record), completions_(completions) {}

  void OnEvent(const TokenEvent& event) override {
    const absl::Time now = absl::Now();
    {
      std::lock_guard<std::mutex> lock(record_->mu);
      if (event.has_token) record_->token_times.push_back(now);
      if (event.is_final) {
        record_->done = true;
        record_->status = event.status;
        record_->num_generated = event.usage.num_generated_tokens;
        record_->timing = event.timing;
      }
    }
    if (event.is_final) completions_->Notify();
  }

 private:
  RequestRecord* record_;
  Completions* completions_;
};

// Nearest-rank percentile of sorted `v` (0 when empty).
double Percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t i = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return v[std::min(i, v.size() - 1)];
}

// The ceilings a run's roofline divides by (--peak-gflops, --read-gbps).
struct Ceilings {
  double flops_per_second = 0.0;
  double bytes_per_second = 0.0;
};

// A step's work: its FLOPs and bytes (ForwardWork).
struct StepWork {
  double flops = 0.0;
  double bytes = 0.0;
};

// The roofline of `steps` at `ceilings`: the least time they could take,
// each the larger of its FLOPs and its bytes over their rates (design.md
// §8), and how many were bound by their FLOPs.
struct Roofline {
  double floor_seconds = 0.0;
  int64_t flop_bound_steps = 0;
};
Roofline RooflineOf(const std::vector<StepWork>& steps,
                    const Ceilings& ceilings) {
  Roofline r;
  for (const StepWork& step : steps) {
    const double flop_seconds = step.flops / ceilings.flops_per_second;
    const double byte_seconds = step.bytes / ceilings.bytes_per_second;
    r.floor_seconds += std::max(flop_seconds, byte_seconds);
    if (flop_seconds >= byte_seconds) ++r.flop_bound_steps;
  }
  return r;
}

// Sums of the per-step statistics and of each step's work (ForwardWork),
// and, when asked, every step's work.
class BenchObserver : public EngineObserver {
 public:
  // Before the first step. keep_step_work: keep every step's work
  // (StepWorks).
  void SetWork(const ForwardWork& work, bool keep_step_work) {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = work;
    keep_step_work_ = keep_step_work;
  }
  // Every measured step's work, in step order (empty unless kept).
  std::vector<StepWork> StepWorks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return step_work_;
  }
  void OnStep(const StepStats& stats) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++num_steps_;
    StepShape shape;
    shape.sequences = stats.num_sequences;
    shape.tokens = stats.num_tokens;
    shape.logit_rows = stats.num_sampled;
    shape.attended_keys = stats.attended_keys;
    shape.context_tokens = stats.context_tokens;
    const StepWork step{work_.Flops(shape), work_.Bytes(shape)};
    sum_flops_ += step.flops;
    sum_bytes_ += step.bytes;
    if (keep_step_work_) step_work_.push_back(step);
    sum_sequences_ += stats.num_sequences;
    sum_tokens_ += stats.num_tokens;
    sum_step_ += stats.step_seconds;
    sum_forward_ += stats.forward_seconds;
    sum_outside_ += stats.outside_forward_seconds;
    if (stats.step_seconds > 0) {
      sum_fraction_ += stats.outside_forward_seconds / stats.step_seconds;
    }
    // Steps of decode tokens alone, and steps with a prompt chunk.
    const int kind = stats.num_tokens == stats.num_sequences ? 0 : 1;
    kind_forward_[kind].push_back(stats.forward_seconds);
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    num_steps_ = sum_sequences_ = sum_tokens_ = 0;
    sum_step_ = sum_forward_ = sum_outside_ = sum_fraction_ = 0.0;
    sum_flops_ = sum_bytes_ = 0.0;
    step_work_.clear();
    kind_forward_[0].clear();
    kind_forward_[1].clear();
  }
  Json Summary() const {
    std::lock_guard<std::mutex> lock(mu_);
    const double n = num_steps_ > 0 ? static_cast<double>(num_steps_) : 1.0;
    Json out;
    out["num_steps"] = num_steps_;
    out["mean_batch_size"] = sum_sequences_ / n;
    out["mean_tokens_per_step"] = sum_tokens_ / n;
    out["mean_step_ms"] = 1e3 * sum_step_ / n;
    out["mean_forward_ms"] = 1e3 * sum_forward_ / n;
    out["mean_outside_forward_ms"] = 1e3 * sum_outside_ / n;
    // Total time outside the forward over total step time, and the mean of
    // the per-step fractions.
    out["overhead_fraction"] = sum_step_ > 0 ? sum_outside_ / sum_step_ : 0.0;
    out["mean_step_overhead_fraction"] = sum_fraction_ / n;
    out["total_step_seconds"] = sum_step_;
    out["flops"] = sum_flops_;
    out["bytes"] = sum_bytes_;
    const char* kinds[2] = {"decode", "prefill"};
    for (int k = 0; k < 2; ++k) {
      std::vector<double> sorted = kind_forward_[k];
      double seconds = 0.0;
      for (double t : sorted) seconds += t;
      out[absl::StrCat(kinds[k], "_steps")] = sorted.size();
      out[absl::StrCat(kinds[k], "_forward_seconds")] = seconds;
      std::sort(sorted.begin(), sorted.end());
      out[absl::StrCat(kinds[k], "_forward_ms_p10_p50_p90")] = {
          1e3 * Percentile(sorted, 10), 1e3 * Percentile(sorted, 50),
          1e3 * Percentile(sorted, 90)};
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  int64_t num_steps_ = 0;
  int64_t sum_sequences_ = 0;
  int64_t sum_tokens_ = 0;
  double sum_step_ = 0.0;
  double sum_forward_ = 0.0;
  double sum_outside_ = 0.0;
  double sum_fraction_ = 0.0;
  ForwardWork work_;
  double sum_flops_ = 0.0;
  double sum_bytes_ = 0.0;
  bool keep_step_work_ = false;
  std::vector<StepWork> step_work_;
  // Each step's forward seconds: [0] steps of decode tokens only, [1] steps
  // with a prefill chunk.
  std::vector<double> kind_forward_[2];
};

Json Percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0.0;
  for (double x : v) sum += x;
  Json out;
  out["count"] = v.size();
  out["mean_ms"] = v.empty() ? 0.0 : 1e3 * sum / static_cast<double>(v.size());
  out["p50_ms"] = 1e3 * Percentile(v, 50);
  out["p90_ms"] = 1e3 * Percentile(v, 90);
  out["p99_ms"] = 1e3 * Percentile(v, 99);
  return out;
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(
      CliArgs args,
      CliArgs::Parse(argc, argv,
                     {"model", "num-requests", "prompt-tokens", "output-tokens",
                      "concurrency", "rate", "threads", "seed", "max-running",
                      "max-tokens-per-step", "cache-mib", "warmup",
                      "backend", "device", "synthetic", "temperature",
                      "top-k", "top-p", "repetition-penalty", "cpu-matmul",
                      "peak-gflops", "read-gbps"},
                     {"json", "tokenizer", "no-cuda-graphs", "cuda-programmatic-launch",
                      "cuda-tune-gemms",
                      "device-sampling", "no-device-sampling", "cpu-one-piece",
                      "residual-stats", "step-work"}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  ASSIGN_OR_RETURN(int64_t num_requests,
                   args.GetInt("num-requests", 64, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t prompt_tokens,
                   args.GetInt("prompt-tokens", 32, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t output_tokens,
                   args.GetInt("output-tokens", 64, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t concurrency,
                   args.GetInt("concurrency", 0, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0, 0, 1024));
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t max_running,
                   args.GetInt("max-running", 64, 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t max_tokens_per_step,
                   args.GetInt("max-tokens-per-step", 512, 1, 1 << 24));
  ASSIGN_OR_RETURN(int64_t cache_mib, args.GetInt("cache-mib", 256, 1, 1 << 24));
  // The warm-up defaults to the measured load's width.
  const int64_t default_warmup =
      args.Has("rate")  ? 1
      : concurrency > 0 ? concurrency
                        : std::min(num_requests, max_running);
  ASSIGN_OR_RETURN(const int64_t warmup,
                   args.GetInt("warmup", default_warmup, 0, 1 << 20));
  double rate = 0.0;
  if (args.Has("rate")) {
    const std::string text = *args.Get("rate");
    char* end = nullptr;
    rate = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(rate > 0.0) || !std::isfinite(rate)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rate: '", text, "' is not a positive number of requests/s"));
    }
  }
  // Sampling settings: validated by the engine per request (SamplingParams).
  auto number = [&](const std::string& name, double fallback) -> absl::StatusOr<double> {
    if (!args.Has(name)) return fallback;
    const std::string text = *args.Get(name);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", text, "' is not a number"));
    }
    return value;
  };
  ASSIGN_OR_RETURN(const double temperature, number("temperature", 0.0));
  ASSIGN_OR_RETURN(const double top_p, number("top-p", 1.0));
  ASSIGN_OR_RETURN(const double repetition_penalty,
                   number("repetition-penalty", 1.0));
  ASSIGN_OR_RETURN(int64_t top_k, args.GetInt("top-k", 0, 0, 1 << 30));
  // The roofline's ceilings: both or neither, each a positive rate.
  std::optional<Ceilings> ceilings;
  if (args.Has("peak-gflops") != args.Has("read-gbps")) {
    return absl::InvalidArgumentError(
        "give both --peak-gflops and --read-gbps, or neither");
  }
  if (args.Has("peak-gflops")) {
    ASSIGN_OR_RETURN(const double gflops, number("peak-gflops", 0.0));
    ASSIGN_OR_RETURN(const double gbps, number("read-gbps", 0.0));
    if (!(gflops > 0.0) || !(gbps > 0.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          gflops > 0.0 ? "--read-gbps" : "--peak-gflops",
          " must be a positive rate"));
    }
    ceilings = Ceilings{gflops * 1e9, gbps * 1e9};
  }
  if (args.Has("device-sampling") && args.Has("no-device-sampling")) {
    return absl::InvalidArgumentError(
        "give at most one of --device-sampling and --no-device-sampling");
  }
  if (args.Has("rate") && args.Has("concurrency")) {
    return absl::InvalidArgumentError(
        "give at most one of --concurrency C and --rate R");
  }
  const bool json_output = args.Has("json");
  ASSIGN_OR_RETURN(BackendKind backend,
                   ParseBackendKind(args.Get("backend").value_or("cpu")));
  ASSIGN_OR_RETURN(int64_t device, args.GetInt("device", 0, 0, 1023));
  if (args.Has("synthetic") && args.Has("tokenizer")) {
    return absl::InvalidArgumentError(
        "--synthetic takes no --tokenizer (a synthetic model has no files)");
  }
  ASSIGN_OR_RETURN(ModelDirectory model,
                   OpenModel(args.Get("synthetic"),
                             MakeModelSearch(args.Get("model"),
                                             std::getenv("TRIBUTARY_MODEL"))));
  LogInfo("loaded model ", model.dir());
  const std::string& model_dir = model.dir();
  for (const std::string& warning : model.warnings()) LogWarning(warning);
  const ModelConfig& config = model.config();
  if (prompt_tokens + output_tokens > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt-tokens ", prompt_tokens, " + --output-tokens ", output_tokens,
        " exceeds the model's context of ", config.max_position_embeddings));
  }
  std::unique_ptr<Tokenizer> tokenizer;
  if (args.Has("tokenizer")) {
    ASSIGN_OR_RETURN(tokenizer, Tokenizer::Load(model_dir));
  }

  BenchObserver observer;
  EngineOptions options;
  options.model = &model;
  options.tokenizer = tokenizer.get();
  options.backend.cpu.num_threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(options.backend.cpu.matmul_precision,
                   ParseMatMulPrecision(args.GetOr("cpu-matmul", "f32")));
  options.backend.cpu.step_in_parts = !args.Has("cpu-one-piece");
  options.backend.kind = backend;
  options.backend.cuda.device = static_cast<int>(device);
  options.backend.cuda.graphs = !args.Has("no-cuda-graphs");
  options.backend.cuda.programmatic_launch = args.Has("cuda-programmatic-launch");
  options.backend.cuda.tune_gemms = args.Has("cuda-tune-gemms");
  options.device_sampling =
      args.Has("device-sampling")      ? EngineOptions::DeviceSampling::kOn
      : args.Has("no-device-sampling") ? EngineOptions::DeviceSampling::kOff
                                       : EngineOptions::DeviceSampling::kAuto;
  options.synthetic_seed = static_cast<uint64_t>(seed);
  options.scheduler.max_running_sequences = max_running;
  options.scheduler.max_tokens_per_step = max_tokens_per_step;
  options.scheduler.max_waiting = std::max<int64_t>(1024, num_requests);
  options.cache_memory_budget_bytes = cache_mib << 20;
  options.max_new_tokens_limit =
      static_cast<int32_t>(std::max<int64_t>(4096, output_tokens));
  options.residual_stats = args.Has("residual-stats");
  options.seed_generator_seed = static_cast<uint64_t>(seed);
  options.observer = &observer;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(options));
  observer.SetWork(engine->forward_work(),
                   ceilings.has_value() || args.Has("step-work"));

  // Synthetic prompts: uniform ids in the vocabulary, deterministic.
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::uniform_int_distribution<int32_t> id_dist(
      0, static_cast<int32_t>(config.vocab_size - 1));
  auto make_request = [&]() {
    GenerateRequest request;
    request.prompt_ids.resize(static_cast<size_t>(prompt_tokens));
    for (int32_t& id : request.prompt_ids) id = id_dist(rng);
    request.sampling.temperature = static_cast<float>(temperature);  // 0: greedy
    request.sampling.top_k = static_cast<int32_t>(top_k);
    request.sampling.top_p = static_cast<float>(top_p);
    request.sampling.repetition_penalty =
        static_cast<float>(repetition_penalty);
    request.sampling.max_new_tokens = static_cast<int32_t>(output_tokens);
    request.sampling.ignore_eos = true;
    return request;
  };

  // Warm-up (not measured).
  if (warmup > 0) {
    std::vector<std::unique_ptr<RequestRecord>> records;
    Completions completions;
    for (int64_t i = 0; i < warmup; ++i) {
      records.push_back(std::make_unique<RequestRecord>());
      ASSIGN_OR_RETURN(
          uint64_t id,
          engine->Submit(make_request(), std::make_shared<BenchSink>(
                                             records.back().get(), &completions)));
      (void)id;
    }
    completions.WaitFor(warmup);
    for (const auto& r : records) {
      if (!r->status.ok()) return r->status;
    }
  }
  observer.Reset();

  // Arrival times for --rate (offsets from the start).
  std::vector<absl::Duration> arrivals;
  if (rate > 0.0) {
    std::mt19937_64 arrival_rng(static_cast<uint64_t>(seed) ^
                                0x9e3779b97f4a7c15ULL);
    std::exponential_distribution<double> gap(rate);
    double t = 0.0;
    for (int64_t i = 0; i < num_requests; ++i) {
      arrivals.push_back(absl::Seconds(t));
      t += gap(arrival_rng);
    }
  }
  std::vector<GenerateRequest> requests;
  requests.reserve(static_cast<size_t>(num_requests));
  for (int64_t i = 0; i < num_requests; ++i) requests.push_back(make_request());

  std::vector<std::unique_ptr<RequestRecord>> records;
  for (int64_t i = 0; i < num_requests; ++i) {
    records.push_back(std::make_unique<RequestRecord>());
  }
  Completions completions;
  std::map<std::string, int64_t> errors;  // status code name -> count
  int64_t num_accepted = 0;
  auto submit = [&](int64_t i) {
    auto result = engine->Submit(
        std::move(requests[static_cast<size_t>(i)]),
        std::make_shared<BenchSink>(records[static_cast<size_t>(i)].get(),
                                    &completions));
    if (result.ok()) {
      ++num_accepted;
    } else {
      ++errors[absl::StatusCodeToString(result.status().code())];
      LogWarning("submit failed: ", result.status().ToString());
      records[static_cast<size_t>(i)]->status = result.status();
    }
  };

  const absl::Time start = absl::Now();
  std::string mode;
  if (rate > 0.0) {
    mode = absl::StrFormat("rate %g/s", rate);
    for (int64_t i = 0; i < num_requests; ++i) {
      const absl::Duration wait =
          start + arrivals[static_cast<size_t>(i)] - absl::Now();
      if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
      submit(i);
    }
  } else if (concurrency > 0) {
    mode = absl::StrCat("concurrency ", concurrency);
    // Keep at most `concurrency` in flight: request i waits until at least
    // i - concurrency + 1 have finished. A failed submit frees its place.
    int64_t failed = 0;
    for (int64_t i = 0; i < num_requests; ++i) {
      const int64_t need = i - concurrency + 1 - failed;
      if (need > 0) completions.WaitFor(need);
      const int64_t before = num_accepted;
      submit(i);
      if (num_accepted == before) ++failed;
    }
  } else {
    mode = "all at once";
    for (int64_t i = 0; i < num_requests; ++i) submit(i);
  }
  completions.WaitFor(num_accepted);
  const absl::Time end = num_accepted > 0 ? completions.last_done() : absl::Now();
  const double wall = absl::ToDoubleSeconds(end - start);
  engine->Shutdown(absl::Now() + absl::Seconds(10));

  int64_t num_ok = 0, num_generated = 0;
  std::vector<double> ttft, itl, queue, e2e;
  for (const auto& r : records) {
    std::lock_guard<std::mutex> lock(r->mu);
    if (!r->done) continue;  // failed at submit (counted already)
    num_generated += r->num_generated;
    if (!r->status.ok()) {
      ++errors[absl::StatusCodeToString(r->status.code())];
      continue;
    }
    ++num_ok;
    ttft.push_back(r->timing.time_to_first_token_seconds);
    queue.push_back(r->timing.queue_seconds);
    e2e.push_back(r->timing.total_seconds);
    for (size_t t = 1; t < r->token_times.size(); ++t) {
      itl.push_back(absl::ToDoubleSeconds(r->token_times[t] -
                                          r->token_times[t - 1]));
    }
  }

  Json out;
  out["model"] = model_dir;
  out["mode"] = mode;
  out["num_requests"] = num_requests;
  out["prompt_tokens"] = prompt_tokens;
  out["output_tokens"] = output_tokens;
  out["threads"] = threads;
  out["cpu_matmul"] = MatMulPrecisionName(options.backend.cpu.matmul_precision);
  out["cpu_step_in_parts"] = options.backend.cpu.step_in_parts;
  out["residual_stats"] = options.residual_stats;
  out["max_running"] = max_running;
  out["max_tokens_per_step"] = max_tokens_per_step;
  out["warmup_requests"] = warmup;
  out["seed"] = seed;
  out["num_ok"] = num_ok;
  out["errors"] = errors;
  out["wall_seconds"] = wall;
  out["requests_per_second"] = wall > 0 ? num_ok / wall : 0.0;
  out["generated_tokens"] = num_generated;
  out["generated_tokens_per_second"] = wall > 0 ? num_generated / wall : 0.0;
  out["ttft"] = Percentiles(ttft);
  out["inter_token_latency"] = Percentiles(itl);
  out["queue"] = Percentiles(queue);
  out["end_to_end"] = Percentiles(e2e);
  out["steps"] = observer.Summary();
  // Time the engine spent inside steps over the wall time: the rest is
  // between steps (waking up, the inbox) or idle.
  out["steps"]["busy_fraction"] =
      wall > 0 ? out["steps"]["total_step_seconds"].get<double>() / wall : 0.0;
  // The roofline: the generated tokens over the least time the steps could
  // take at the ceilings (the engine's work between steps counted as none),
  // and the run's tokens/s as a fraction of that.
  const std::vector<StepWork> step_works = observer.StepWorks();
  if (ceilings) {
    const Roofline roofline = RooflineOf(step_works, *ceilings);
    // The least time the steps could take at the ceilings, and how many
    // were bound by their FLOPs rather than their bytes.
    out["steps"]["floor_seconds"] = roofline.floor_seconds;
    out["steps"]["flop_bound_steps"] = roofline.flop_bound_steps;
    const double ceiling_tps = roofline.floor_seconds > 0
                                   ? num_generated / roofline.floor_seconds
                                   : 0.0;
    out["roofline"] = {
        {"peak_gflops", ceilings->flops_per_second / 1e9},
        {"read_gbps", ceilings->bytes_per_second / 1e9},
        {"ceiling_tokens_per_second", ceiling_tps},
        {"fraction_of_ceiling",
         ceiling_tps > 0 ? out["generated_tokens_per_second"].get<double>() /
                               ceiling_tps
                         : 0.0}};
  }
  out["weight_bytes"] = engine->forward_work().weight_bytes;
  if (args.Has("step-work")) {
    // [[FLOPs, bytes], …], a pair a step, in step order.
    Json& steps = out["step_work"] = Json::array();
    for (const StepWork& step : step_works) {
      steps.push_back({step.flops, step.bytes});
    }
  }

  if (json_output) {
    std::cout << out.dump(2) << std::endl;
  } else {
    auto lat = [&](const char* name, const Json& p) {
      std::cout << absl::StrFormat(
          "%-22s p50 %9.3f ms  p90 %9.3f ms  p99 %9.3f ms  (mean %.3f ms, n=%d)\n",
          name, p["p50_ms"].get<double>(), p["p90_ms"].get<double>(),
          p["p99_ms"].get<double>(), p["mean_ms"].get<double>(),
          p["count"].get<int64_t>());
    };
    const Json& s = out["steps"];
    std::cout << absl::StrFormat(
        "%d requests (%s), prompt %d, output %d, threads %d, cpu matmul %s, "
        "%d warm-up requests\n",
        num_requests, mode, prompt_tokens, output_tokens, threads,
        MatMulPrecisionName(options.backend.cpu.matmul_precision), warmup);
    std::cout << absl::StrFormat("wall                   %.3f s\n", wall);
    std::cout << absl::StrFormat("requests/s             %.3f\n",
                                 out["requests_per_second"].get<double>());
    std::cout << absl::StrFormat(
        "generated tokens/s     %.1f  (%d tokens)\n",
        out["generated_tokens_per_second"].get<double>(), num_generated);
    lat("TTFT", out["ttft"]);
    lat("inter-token latency", out["inter_token_latency"]);
    lat("queue", out["queue"]);
    lat("end to end", out["end_to_end"]);
    std::cout << absl::StrFormat(
        "steps                  %d, mean batch size %.2f, mean tokens/step "
        "%.2f\n",
        s["num_steps"].get<int64_t>(), s["mean_batch_size"].get<double>(),
        s["mean_tokens_per_step"].get<double>());
    std::cout << absl::StrFormat(
        "step                   mean %.3f ms = forward %.3f ms + outside %.3f "
        "ms; overhead %.1f%% of step time (mean per step %.1f%%); in steps %.1f%% "
        "of wall\n",
        s["mean_step_ms"].get<double>(), s["mean_forward_ms"].get<double>(),
        s["mean_outside_forward_ms"].get<double>(),
        100.0 * s["overhead_fraction"].get<double>(),
        100.0 * s["mean_step_overhead_fraction"].get<double>(),
        100.0 * s["busy_fraction"].get<double>());
    if (out.contains("roofline")) {
      const Json& r = out["roofline"];
      std::cout << absl::StrFormat(
          "roofline               %.1f tokens/s at %.1f GFLOP/s and %.2f GB/s "
          "(%d of %d steps FLOP-bound); this run %.1f%% of it\n",
          r["ceiling_tokens_per_second"].get<double>(),
          r["peak_gflops"].get<double>(), r["read_gbps"].get<double>(),
          s["flop_bound_steps"].get<int64_t>(), s["num_steps"].get<int64_t>(),
          100.0 * r["fraction_of_ceiling"].get<double>());
    }
    if (errors.empty()) {
      std::cout << "errors                 none\n";
    } else {
      for (const auto& [code, count] : errors) {
        std::cout << absl::StrFormat("errors                 %s: %d\n", code,
                                     count);
      }
    }
  }
  if (num_ok == 0) {
    return absl::InternalError(
        absl::StrCat("no request succeeded (", num_requests, " submitted)"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-bench", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}
