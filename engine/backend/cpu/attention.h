// The fast CPU paged attention: the twin of reference::PagedAttention
// (reference_ops.h), with the same arguments and results to rounding.
//
// The work unit is one query token × one KV head: the query heads of that
// GQA group are done together, so each cached key row is read once for the
// group. Per unit: the key rows' offsets are resolved once through the block
// table; scores q·k (16 lane-wise fma chains over head_dim, then a fixed
// lane tree) scaled, max, exp (vec16.inc's ExpF: e^x in f64, rounded to
// f32, 16 keys at a time) and an f32 sum in ascending key order; then
// o = (Σ_p e_p v_p) / Σ e with one fma per key in ascending order,
// vectorised over head_dim. Units are spread over the pool by a static
// partition, tokens interleaved from both ends of the sequence so the causal
// triangle's work is balanced.
//
// Subnormal numbers are flushed to zero inside a unit (FTZ and DAZ,
// flush_denormals.h): keys scoring 87–103 below the maximum would get
// subnormal weights, ~100 cycles an operation on x86.
//
// Determinism: a query's output depends only on its own q and keys/values
// 0 … position, through orders fixed by position and head_dim: not on the
// thread count, the other tokens or sequences of the call, or on how a
// prefill is split into calls (a token at position p gets the same bits in a
// prefill, a continuation or a decode step). The scalar, AVX2 and AVX-512
// paths give identical bits.
//
// Cost: 4·head_dim flops per (query head, key); scratch per unit
// (group + 2) · num_keys floats.
//
// Thread safety: reentrant; calls with a pool serialise on it.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_ATTENTION_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_ATTENTION_H_

#include <cstddef>
#include <cstdint>

#include "engine/backend/cpu/matmul.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {

// The arguments of one sequence's attention call, as in reference_ops.h.
struct AttentionCall {
  const float* q = nullptr;  // [T, H, head_dim]
  int64_t num_tokens = 0;
  int64_t num_q_heads = 0;
  int64_t first_position = 0;
  reference::PagedKvView kv{};
  float scale = 1.0f;
  float* out = nullptr;  // [T, H, head_dim]
};

// Work units of a call: num_tokens × num_kv_heads.
int64_t AttentionUnits(const AttentionCall& call);

// Bytes of (64-byte aligned) scratch any unit of `call` needs.
size_t AttentionScratchBytes(const AttentionCall& call);

// Runs unit `unit` in [0, AttentionUnits(call)) on path `isa` (kAuto: the
// best this CPU has; an unsupported path falls back to kScalar). Units are
// numbered so that contiguous ranges have balanced work.
void PagedAttentionUnit(const AttentionCall& call, int64_t unit, void* scratch,
                        CpuIsa isa = CpuIsa::kAuto);

// The whole call, split over `pool` (null: on the calling thread).
void PagedAttention(const AttentionCall& call, ThreadPool* pool,
                    CpuIsa isa = CpuIsa::kAuto);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_ATTENTION_H_
