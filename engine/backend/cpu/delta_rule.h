// The fast CPU gated delta rule (model-spec §4.5, §4.6): the twins of
// reference::GatedDeltaRuleChunked and reference::GatedDeltaRuleRecurrent
// (reference_ops.h), with the same arguments and results to rounding
// (~1e-6 relative to max |ref|).
//
// Chunked form, per value head and chunk of C tokens, as small dense products
// on contiguous scratch (rows padded to 16 floats): K̂ᵀ [dk, C]; the Gram
// matrices K̂K̂ᵀ and Q̂K̂ᵀ [C, C]; A and P from them with one exp(G_i − G_j) per
// pair; [U | W] = L⁻¹[βV | βe^G K̂] by forward substitution (one pass over
// both); V_new = U − W·S, O = e^G ⊙ (Q̂·S) + P·V_new, and
// S ← e^{G_last} S + (K̂ ⊙ e^{G_last − G})ᵀ·V_new, all as register-tiled
// products vectorised over their output columns. Recurrent form: per token
// and head a read pass over the state (u = Sᵀk̂) and one read-write pass
// (update, and o = Sᵀq̂ from the updated rows).
//
// Subnormal numbers are flushed to zero inside both forms (FTZ and DAZ,
// flush_denormals.h: a fast-forgetting head's decays underflow, and x86 cores
// take ~100 cycles per subnormal operation). Each flushed number is below
// 1.2e−38 in magnitude, far under the kernels' rounding against the
// reference.
//
// Determinism: every output element is a sum in a fixed order (ascending
// over its reduction index, one fused multiply-add per term), set by the
// shapes of the head alone. A value head's results depend only on its own
// inputs and state, so they do not depend on the thread count, the partition
// of heads over threads, or other sequences in the batch; the scalar, AVX2
// and AVX-512 paths give identical bits.
//
// Thread safety: reentrant; calls with a pool serialise on it.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_DELTA_RULE_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_DELTA_RULE_H_

#include <cstddef>
#include <cstdint>

#include "engine/backend/backend_options.h"
#include "engine/backend/cpu/matmul.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {

// The arguments of one delta rule call for one sequence, as in
// reference_ops.h. chunk_size is used by the chunked form only.
struct DeltaRuleCall {
  reference::DeltaRuleDims dims;
  int64_t chunk_size = 64;
  const float* q = nullptr;     // [T, Hk, dk]
  const float* k = nullptr;     // [T, Hk, dk]
  const float* v = nullptr;     // [T, Hv, dv]
  const float* g = nullptr;     // [T, Hv]
  const float* beta = nullptr;  // [T, Hv]
  float* state = nullptr;       // [Hv, dk, dv], in/out
  float* out = nullptr;         // [T, Hv, dv]
  bool recurrent = false;       // the recurrent form instead of the chunked
};


// Whether a sequence with `num_tokens` new tokens from `first_position`
// takes the recurrent form under `form`. kFastest: the recurrent form for a
// token or two, and for any count while a head's state (dk · dv floats)
// stays within 16 KiB, i.e. in L1; the chunked form otherwise. It depends on
// the sequence alone, never on the rest of the batch.
bool DeltaRuleTakesRecurrentForm(DeltaRuleForm form, int64_t num_tokens,
                                 int64_t first_position, int64_t key_dim,
                                 int64_t value_dim);

// Bytes of (64-byte aligned) scratch one head of `call` needs.
size_t DeltaRuleScratchBytes(const DeltaRuleCall& call);

// Runs value head `head` of `call` on path `isa` (kAuto: the best this CPU
// has; an unsupported path falls back to kScalar). `scratch`: at least
// DeltaRuleScratchBytes(call), 64-byte aligned, not shared with a concurrent
// call.
void GatedDeltaRuleHead(const DeltaRuleCall& call, int64_t head, void* scratch,
                        CpuIsa isa = CpuIsa::kAuto);
// Value heads [head_begin, head_end) of `call`, one after another; the
// recurrent form runs several heads at once where their shape allows it
// (the same bits as one by one, their latency chains interleaved).
void GatedDeltaRuleHeads(const DeltaRuleCall& call, int64_t head_begin,
                         int64_t head_end, void* scratch,
                         CpuIsa isa = CpuIsa::kAuto);

// All heads of one call, split over `pool` (static partition of the value
// heads; null: on the calling thread).
void GatedDeltaRule(const DeltaRuleCall& call, ThreadPool* pool,
                    CpuIsa isa = CpuIsa::kAuto);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_DELTA_RULE_H_
