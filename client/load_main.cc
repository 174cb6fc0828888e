// tributary-load: a bounded load generator on GenerateStream.
//
//   (kUsage below, which --help prints)
//
// See client/README.md. Stdout carries the report (with --json: one JSON
// object, the readable report going to stderr); failures print `tributary-load:
// reason` and exit 1.
#include <grpcpp/client_context.h>
#include <sched.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/channel_options.h"
#include "client/load_generator.h"
#include "client/load_report.h"
#include "client/status_names.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-load [--target HOST:PORT] [--token T] [--tls-ca F ...]
                      [--concurrency N | --rate R [--arrival poisson|constant]
                                                   [--max-in-flight M]]
                      [--num-requests N] [--duration SECONDS]
                      [--prompt TEXT | --prompt-tokens P] [--max-new-tokens O]
                      [--temperature T] [--stop-at-eos] [--seed S]
                      [--warmup W] [--timeout SECONDS] [--cpu LIST] [--json]
Flags: client/README.md.
)";

}  // namespace
namespace {

// Pins the process to the listed cores before gRPC starts any thread, so
// that every thread it creates later (pollers, callback executors) inherits
// the mask: benches keep the generator off the engine's cores this way.
absl::Status PinToCpus(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int cpu = -1;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &cpu) || cpu < 0 ||
        cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --cpu must be a comma-separated list of core numbers, got '",
          list, "'"));
    }
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --cpu: cannot pin to cores ", list,
                     " (not on this machine, or not allowed)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> GetDouble(const CliArgs& args, const std::string& name,
                                 double fallback, double min) {
  auto text = args.Get(name);
  if (!text) return fallback;
  double value = 0.0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value) ||
      value < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", name, " must be a number >= ", min, ", got '", *text, "'"));
  }
  return value;
}

absl::Status Run(int argc, char** argv) {
  std::set<std::string> value_flags = ChannelFlagNames();
  // One request id for thousands of calls would only confuse the logs.
  value_flags.erase("request-id");
  value_flags.insert({"concurrency", "rate", "arrival", "max-in-flight",
                      "num-requests", "duration", "prompt", "prompt-tokens",
                      "max-new-tokens", "temperature", "seed", "warmup",
                      "cpu"});
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv, value_flags,
                                  {"json", "ignore-eos", "stop-at-eos"}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  if (auto cpus = args.Get("cpu")) RETURN_IF_ERROR(PinToCpus(*cpus));

  LoadOptions load;
  ASSIGN_OR_RETURN(load.call_options, ParseChannelOptions(args));
  if (args.Has("rate") && args.Has("concurrency")) {
    return absl::InvalidArgumentError(
        "give at most one of --concurrency N and --rate R");
  }
  ASSIGN_OR_RETURN(load.concurrency, args.GetInt("concurrency", 1, 1, 1 << 20));
  ASSIGN_OR_RETURN(load.rate_per_second, GetDouble(args, "rate", 0.0, 0.0));
  if (args.Has("rate") && !(load.rate_per_second > 0.0)) {
    return absl::InvalidArgumentError("flag --rate must be positive");
  }
  // Open-loop flags without --rate would be silently ignored.
  for (const char* flag : {"arrival", "max-in-flight"}) {
    if (args.Has(flag) && !args.Has("rate")) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", flag, " needs --rate"));
    }
  }
  const std::string arrival = args.GetOr("arrival", "poisson");
  if (arrival != "poisson" && arrival != "constant") {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --arrival must be poisson or constant, got '", arrival, "'"));
  }
  load.poisson = arrival == "poisson";
  ASSIGN_OR_RETURN(load.max_in_flight,
                   args.GetInt("max-in-flight", 256, 1, 1 << 20));
  if (args.Has("duration")) {
    ASSIGN_OR_RETURN(load.duration_seconds,
                     ParsePositiveDouble("duration", *args.Get("duration")));
  }
  if (args.Has("num-requests") || !args.Has("duration")) {
    ASSIGN_OR_RETURN(load.num_requests,
                     args.GetInt("num-requests", 64, 1, int64_t{1} << 40));
  }
  ASSIGN_OR_RETURN(long long seed, args.GetInt("seed", 1, 0, INT64_MAX));
  load.seed = static_cast<uint64_t>(seed);
  RETURN_IF_ERROR(load.Validate());

  if (args.Has("prompt") && args.Has("prompt-tokens")) {
    return absl::InvalidArgumentError(
        "give at most one of --prompt TEXT and --prompt-tokens N");
  }
  const std::string prompt = args.GetOr("prompt", "");
  if (args.Has("prompt") && prompt.empty()) {
    return absl::InvalidArgumentError("flag --prompt must not be empty");
  }
  ASSIGN_OR_RETURN(long long prompt_tokens,
                   args.GetInt("prompt-tokens", 32, 1, 1 << 24));
  ASSIGN_OR_RETURN(long long max_new_tokens,
                   args.GetInt("max-new-tokens", 64, 1, INT32_MAX));
  ASSIGN_OR_RETURN(double temperature,
                   GetDouble(args, "temperature", 0.0, 0.0));
  ASSIGN_OR_RETURN(long long warmup, args.GetInt("warmup", 1, 0, 1 << 20));
  if (args.Has("ignore-eos") && args.Has("stop-at-eos")) {
    return absl::InvalidArgumentError(
        "give at most one of --ignore-eos (the default) and --stop-at-eos");
  }
  const bool ignore_eos = !args.Has("stop-at-eos");

  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   CreateClientChannel(load.call_options));
  // The model's vocabulary bounds the synthetic ids; asking first also fails
  // fast, with the server's own reason, when it cannot be reached.
  v1::ModelInfo info;
  {
    auto stub = v1::Tributary::NewStub(channel);
    grpc::ClientContext context;
    ConfigureClientContext(load.call_options, &context);
    RETURN_IF_ERROR(RpcError(
        stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info)));
  }
  if (prompt.empty() && info.vocab_size() < 1) {
    return absl::FailedPreconditionError("the server reports no vocabulary");
  }

  std::mt19937_64 rng(load.seed);
  std::uniform_int_distribution<int32_t> id_dist(0, info.vocab_size() - 1);
  auto factory = [&](int64_t index) {
    v1::GenerateRequest request;
    if (prompt.empty()) {
      for (long long i = 0; i < prompt_tokens; ++i) {
        request.mutable_token_ids()->add_ids(id_dist(rng));
      }
    } else {
      request.set_text(prompt);
    }
    request.mutable_sampling()->set_temperature(
        static_cast<float>(temperature));
    // Distinct but reproducible draws per request when sampling.
    request.mutable_sampling()->set_seed(load.seed +
                                         static_cast<uint64_t>(index));
    request.mutable_stopping()->set_max_new_tokens(
        static_cast<int32_t>(max_new_tokens));
    request.mutable_stopping()->set_ignore_eos(ignore_eos);
    return request;
  };

  if (warmup > 0) {
    LoadOptions warm = load;
    warm.rate_per_second = 0.0;
    warm.concurrency = 1;
    warm.num_requests = warmup;
    warm.duration_seconds.reset();
    LoadResult result = RunLoad(channel, warm, factory);
    if (result.num_ok < result.num_started) {
      const auto& [code, message] = *result.first_error_messages.begin();
      return absl::UnavailableError(
          absl::StrCat("warm-up request failed: ", code, ": ", message));
    }
  }
  LoadResult result = RunLoad(channel, load, factory);

  LoadDescription description;
  description.target = load.call_options.target;
  description.model = info.model_name();
  description.backend = info.backend();
  description.mode =
      load.rate_per_second > 0.0
          ? absl::StrFormat("rate %g/s %s, max in flight %d",
                            load.rate_per_second, arrival, load.max_in_flight)
          : absl::StrCat("concurrency ", load.concurrency);
  if (load.num_requests) {
    absl::StrAppend(&description.mode, ", ", *load.num_requests, " requests");
  }
  if (load.duration_seconds) {
    absl::StrAppend(&description.mode,
                    absl::StrFormat(", %g s", *load.duration_seconds));
  }
  description.prompt_tokens = prompt.empty() ? prompt_tokens : 0;
  description.prompt_text = prompt;
  description.max_new_tokens = max_new_tokens;
  // With --json stdout is exactly one JSON object (for scripts); the
  // readable report moves to stderr.
  std::fputs(LoadReportText(description, result).c_str(),
             args.Has("json") ? stderr : stdout);
  if (args.Has("json")) {
    std::printf("%s\n", LoadReportJson(description, result).dump().c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-load", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}
