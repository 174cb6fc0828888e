// delta_rule_bench: the fast CPU gated delta rule's two forms side by side,
// on one thread, for a prefill of S sequences of T tokens each (fresh random
// inputs, every head from its own state): the chunked form (what prefill ran
// on until 2026-11-30) against the recurrent form (one token at a time).
// Prints the time per (token, value head) of each, their ratio, and how far
// their outputs are apart (they agree to rounding). The backend's choice
// between them (delta_rule.h, DeltaRuleTakesRecurrentForm) rests on this.
//   delta_rule_bench [--tokens T] [--sequences S] [--key-heads HK]
//                    [--value-heads HV] [--key-dim DK] [--value-dim DV]
//                    [--chunk C] [--rounds R] [--max-log-decay D]
//                    [--isa auto|scalar|avx2|avx512]
// Defaults: the default model's GDN shape (HK 4, HV 8, DK = DV = 32),
// T = 32, S = 16 (the engine's 512-token prefill step), C = 64, R = 9,
// D = 1 (log decays in (−D, 0]: a chunk's decays e^(G_i − G_j) reach
// e^(−64 D), subnormal in f32 from D ≈ 1.4).
// The 27B's shape: --key-heads 16 --value-heads 48 --key-dim 128
// --value-dim 128.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/backend/cpu/matmul.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "tests/engine/backend/delta_rule_inputs.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"tokens", "sequences", "key-heads",
                                   "value-heads", "key-dim", "value-dim",
                                   "chunk", "rounds", "max-log-decay", "isa"},
                                  {}));
  reference::DeltaRuleDims dims;
  ASSIGN_OR_RETURN(dims.num_tokens, args.GetInt("tokens", 32, 1, 1 << 16));
  ASSIGN_OR_RETURN(const int64_t sequences,
                   args.GetInt("sequences", 16, 1, 4096));
  ASSIGN_OR_RETURN(dims.num_key_heads, args.GetInt("key-heads", 4, 1, 1024));
  ASSIGN_OR_RETURN(dims.num_value_heads,
                   args.GetInt("value-heads", 8, 1, 1024));
  ASSIGN_OR_RETURN(dims.key_dim, args.GetInt("key-dim", 32, 1, 1024));
  ASSIGN_OR_RETURN(dims.value_dim, args.GetInt("value-dim", 32, 1, 1024));
  ASSIGN_OR_RETURN(const int64_t chunk, args.GetInt("chunk", 64, 1, 1024));
  ASSIGN_OR_RETURN(const int64_t rounds, args.GetInt("rounds", 9, 1, 1000));
  ASSIGN_OR_RETURN(const int64_t max_log_decay,
                   args.GetInt("max-log-decay", 1, 0, 1000));
  // The instruction-set path (CpuIsaName: auto, scalar, avx2, avx512),
  // so that one machine can time the paths of others (an AVX-512 CPU runs
  // the AVX2 path too).
  const std::string isa_name = args.GetOr("isa", "auto");
  CpuIsa isa = CpuIsa::kAuto;
  bool isa_known = false;
  for (CpuIsa i : {CpuIsa::kAuto, CpuIsa::kScalar, CpuIsa::kAvx2,
                      CpuIsa::kAvx512}) {
    if (isa_name == CpuIsaName(i)) {
      isa = i;
      isa_known = true;
    }
  }
  if (!isa_known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--isa takes auto, scalar, avx2 or avx512, got '", isa_name, "'"));
  }
  if (!CpuIsaSupported(isa)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--isa ", isa_name, ": this CPU does not run it"));
  }
  if (dims.num_value_heads % dims.num_key_heads != 0) {
    return absl::InvalidArgumentError(
        "--value-heads must be a multiple of --key-heads");
  }

  // The delta rule tests' random inputs (q̂ and k̂ L2-normalised as the
  // decoder hands them over, log decays uniform in (−D, 0], β in [0, 1), a
  // random initial state), one seed per sequence.
  std::vector<DeltaRuleInputs> inputs;
  for (int64_t s = 0; s < sequences; ++s) {
    inputs.push_back(MakeDeltaRuleInputs(
        dims.num_tokens, dims.num_key_heads, dims.num_value_heads, dims.key_dim,
        dims.value_dim, static_cast<uint32_t>(s + 1),
        static_cast<float>(max_log_decay)));
  }
  const size_t out_elems = static_cast<size_t>(
      dims.num_tokens * dims.num_value_heads * dims.value_dim);
  std::vector<std::vector<float>> out[2];  // [form][sequence]
  for (auto& o : out)
    o.assign(static_cast<size_t>(sequences), std::vector<float>(out_elems));

  // One prefill of every sequence in `form` (0 chunked, 1 recurrent), from
  // each sequence's initial state; returns its seconds.
  std::vector<float> state;
  const auto prefill = [&](int form) {
    double seconds = 0.0;
    for (int64_t s = 0; s < sequences; ++s) {
      const DeltaRuleInputs& in = inputs[static_cast<size_t>(s)];
      state = in.state;  // outside the timing: the call updates it
      DeltaRuleCall call;
      call.dims = dims;
      call.chunk_size = chunk;
      call.q = in.q.data();
      call.k = in.k.data();
      call.v = in.v.data();
      call.g = in.g.data();
      call.beta = in.beta.data();
      call.state = state.data();
      call.out = out[form][static_cast<size_t>(s)].data();
      call.recurrent = form == 1;
      const auto start = Clock::now();
      GatedDeltaRule(call, /*pool=*/nullptr, isa);
      seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
    return seconds;
  };
  double best[2] = {1e30, 1e30};
  for (int64_t r = 0; r < rounds; ++r) {
    for (int form = 0; form < 2; ++form) {
      best[form] = std::min(best[form], prefill(form));
    }
  }
  double max_diff = 0.0, max_ref = 0.0;
  for (int64_t s = 0; s < sequences; ++s) {
    for (size_t i = 0; i < out_elems; ++i) {
      const double a = out[0][static_cast<size_t>(s)][i];
      const double b = out[1][static_cast<size_t>(s)][i];
      max_diff = std::max(max_diff, std::fabs(a - b));
      max_ref = std::max(max_ref, std::fabs(a));
    }
  }
  const double head_tokens =
      static_cast<double>(sequences * dims.num_tokens * dims.num_value_heads);
  std::printf(
      "%lld sequences x %lld tokens, heads %lld/%lld, dk %lld, dv %lld, "
      "chunk %lld, one thread, %s path, best of %lld\n",
      static_cast<long long>(sequences),
      static_cast<long long>(dims.num_tokens),
      static_cast<long long>(dims.num_key_heads),
      static_cast<long long>(dims.num_value_heads),
      static_cast<long long>(dims.key_dim),
      static_cast<long long>(dims.value_dim), static_cast<long long>(chunk),
      isa_name.c_str(), static_cast<long long>(rounds));
  std::printf("chunked:   %9.1f ns per token-head (%.3f ms)\n",
              best[0] / head_tokens * 1e9, best[0] * 1e3);
  std::printf("recurrent: %9.1f ns per token-head (%.3f ms)\n",
              best[1] / head_tokens * 1e9, best[1] * 1e3);
  std::printf(
      "chunked / recurrent: %.2f; max |difference| %.3g of max |out| "
      "%.3g\n",
      best[0] / best[1], max_diff, max_ref);
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("delta_rule_bench",
                               [&] { return tributary::Run(argc, argv); });
}
