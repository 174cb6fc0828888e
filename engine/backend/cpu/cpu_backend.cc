#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/attention.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/backend/cpu/elementwise.h"
#include "engine/backend/cpu/matmul.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/random_fill.h"

namespace tributary {
namespace {

namespace ref = reference;

constexpr size_t kAlignmentBytes = 64;  // one cache line, one AVX-512 vector

// Below this much work a kernel runs on the calling thread alone: waking a
// worker costs tens of microseconds, more than a decode step's delta rule or
// attention of a small model takes (the matmul uses the same threshold).
// Results do not depend on it (every kernel's reduction order is fixed).
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

int MaxChunksFor(int64_t macs) {
  return macs < kMinParallelMacs ? 1 : ThreadPool::kNoLimit;
}

// The last-level cache the cores share, in bytes (sysconf; 32 MiB where the
// system does not say), clamped to 4 MiB–1 GiB. On a VM it is the host's
// whole cache, shared with other tenants, hence the margin StepParts takes.
int64_t SharedCacheBytes() {
  static const int64_t bytes = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    constexpr int64_t kMiB = int64_t{1} << 20;
    return std::clamp<int64_t>(l3 > 0 ? l3 : 32 * kMiB, 4 * kMiB, 1024 * kMiB);
  }();
  return bytes;
}

// A step's parts each read every weight. While the weights stay within a
// quarter of the shared cache that is cheap; beyond it each part streams
// them from memory, and parts pay only with this many tokens each (products
// compute-bound even so). The mid-size model (335 MB of bf16 weights), 2
// threads, parts against one piece: batch 4 decode 40 % slower, batch 32
// and 64 even, a 512-token prefill even (bench/journal/step-in-parts.md).
constexpr int64_t kMinPartTokensFromMemory = 64;

float* F32(const Tensor& t) { return t.as<float>(); }

}  // namespace

CpuBackend::CpuBackend(int num_threads, MatMulPrecision matmul_precision,
                       DeltaRuleForm delta_rule_form)
    : pool_(std::make_unique<ThreadPool>(num_threads)),
      matmul_precision_(matmul_precision),
      delta_rule_form_(delta_rule_form) {}

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(
    const CpuBackendOptions& options) {
  if (options.num_threads < 0 || options.num_threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_threads = ", options.num_threads, " must be in [0, 1024]"));
  }
  if (options.min_part_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_part_tokens = ", options.min_part_tokens, " must be >= 1"));
  }
  if (!(options.max_part_imbalance >= 1.0)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "max_part_imbalance = ", options.max_part_imbalance, " must be >= 1"));
  }
  if (options.matmul_precision == MatMulPrecision::kBF16 &&
      !MatMulBf16DotSupported()) {
    return absl::FailedPreconditionError(
        "matmul_precision = bf16 needs a CPU with AVX512_BF16 (VDPBF16PS), "
        "which this one lacks; use f32");
  }
  int threads = options.num_threads;
  if (threads == 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  std::unique_ptr<CpuBackend> backend(new CpuBackend(
      threads, options.matmul_precision, options.delta_rule_form));
  backend->min_part_tokens_ = options.min_part_tokens;
  backend->max_part_imbalance_ = options.max_part_imbalance;
  if (options.step_in_parts && threads > 1) {
    for (int p = 0; p < threads; ++p) {
      backend->parts_.emplace_back(new CpuBackend(
          1, options.matmul_precision, options.delta_rule_form));
      backend->parts_.back()->packed_ = &backend->bf16_pairs_;
    }
  }
  return backend;
}

int64_t CpuBackend::unprepared_bf16_matmuls() const {
  int64_t n = unprepared_bf16_matmuls_;
  for (const auto& part : parts_) n += part->unprepared_bf16_matmuls_;
  return n;
}

int CpuBackend::StepParts(const BatchLayout& layout) const {
  if (parts_.empty() || layout.sequences.size() < 2) return 1;
  const int64_t parts =
      static_cast<int64_t>(std::min(parts_.size(), layout.sequences.size()));
  const int64_t step_tokens = layout.num_tokens();
  if (step_tokens < min_part_tokens_ * parts) return 1;
  if (matmul_weight_bytes_ > SharedCacheBytes() / 4 &&
      step_tokens < kMinPartTokensFromMemory * parts) {
    return 1;
  }
  // Fewer parts while the largest would hold too many of the step's tokens
  // (a prompt chunk beside a few decodes: one thread would run the chunk
  // alone while the others wait).
  int64_t n = parts;
  for (; n > 1; --n) {
    const std::vector<int64_t> begin = layout.PartBegins(static_cast<int>(n));
    int64_t largest = 0;
    for (int64_t p = 0; p < n; ++p) {
      int64_t tokens = 0;
      for (int64_t i = begin[p]; i < begin[p + 1]; ++i) {
        tokens += layout.sequences[i].num_tokens;
      }
      largest = std::max(largest, tokens);
    }
    if (static_cast<double>(largest * n) <=
        max_part_imbalance_ * static_cast<double>(step_tokens)) {
      break;
    }
  }
  return static_cast<int>(n);
}

absl::Status CpuBackend::RunInParts(
    int parts, absl::FunctionRef<absl::Status(int, Backend&)> body) {
  if (parts <= 1) return Backend::RunInParts(parts, body);
  if (parts > static_cast<int>(parts_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RunInParts: ", parts, " parts, but this backend runs at most ",
        std::max<size_t>(parts_.size(), 1), " (StepParts)"));
  }
  std::vector<absl::Status> status(static_cast<size_t>(parts));
  // One chunk a part: whichever thread is free takes the next part, so a
  // late worker delays the step by at most its own part.
  pool_->ParallelFor(
      parts,
      [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          status[p] = body(static_cast<int>(p), *parts_[p]);
        }
      },
      parts);
  for (absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

CpuBackend::~CpuBackend() {
  for (void* p : allocations_) std::free(p);
}

absl::StatusOr<Tensor> CpuBackend::Allocate(ElementType type,
                                            const Shape& shape) {
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allocate a tensor of shape ", shape.ToString()));
    }
  }
  Tensor tensor;
  tensor.type = type;
  tensor.shape = shape;
  // aligned_alloc needs a size that is a multiple of the alignment, and at
  // least one byte so that every tensor has a distinct address.
  size_t bytes = std::max<size_t>(tensor.size_bytes(), 1);
  bytes = (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  void* data = std::aligned_alloc(kAlignmentBytes, bytes);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for a tensor of shape ",
                     shape.ToString()));
  }
  allocations_.insert(data);
  tensor.data = data;
  return tensor;
}

void CpuBackend::Free(Tensor& tensor) {
  auto it = allocations_.find(tensor.data);
  if (it != allocations_.end()) {  // Aliased weights are not ours to free.
    bf16_pairs_.erase(*it);
    std::free(*it);
    allocations_.erase(it);
  }
  tensor.data = nullptr;
}

absl::StatusOr<Tensor> CpuBackend::PrepareMatMulWeight(const Tensor& w) {
  if (w.type != ElementType::kBF16 || w.shape.rank != 2 ||
      bf16_pairs_.count(w.data) != 0) {  // packed already
    if (bf16_pairs_.count(w.data) == 0) {
      matmul_weight_bytes_ += static_cast<int64_t>(w.size_bytes());
    }
    return w;
  }
  const int64_t out = w.shape[0], in = w.shape[1];
  // As a flat bf16 tensor of the packed size (Allocate's checks and
  // bookkeeping), then given the matrix's shape back.
  absl::StatusOr<Tensor> allocated =
      Allocate(ElementType::kBF16, Shape{Bf16PairsElements(out, in)});
  if (!allocated.ok()) return allocated.status();
  Tensor packed = *allocated;
  PackBf16Pairs(w.as<uint16_t>(), out, in, packed.as<uint16_t>(), pool_.get());
  matmul_weight_bytes_ += static_cast<int64_t>(w.size_bytes());
  packed.shape = w.shape;
  bf16_pairs_.insert(packed.data);
  return packed;
}

absl::StatusOr<Tensor> CpuBackend::ImportWeight(const void* host,
                                                ElementType type,
                                                const Shape& shape) {
  Tensor tensor;
  tensor.data = const_cast<void*>(host);  // Never written through.
  tensor.type = type;
  tensor.shape = shape;
  return tensor;
}

absl::Status CpuBackend::CopyFromHost(const void* src, const Tensor& dst) {
  if (dst.size_bytes() > 0) std::memcpy(dst.data, src, dst.size_bytes());
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(const Tensor& src, void* dst) {
  if (src.size_bytes() > 0) std::memcpy(dst, src.data, src.size_bytes());
  return absl::OkStatus();
}

void CpuBackend::Zero(const Tensor& tensor) {
  if (tensor.size_bytes() > 0) std::memset(tensor.data, 0, tensor.size_bytes());
}

void CpuBackend::ZeroRows(const Tensor& tensor, int64_t row_begin,
                          int64_t row_end) {
  const size_t row_bytes = tensor.size_bytes() / tensor.shape[0];
  std::memset(static_cast<char*>(tensor.data) + row_begin * row_bytes, 0,
              (row_end - row_begin) * row_bytes);
}

void CpuBackend::CopyRows(const Tensor& tensor, int64_t src_row,
                          int64_t dst_row, int64_t num_rows) {
  if (num_rows <= 0) return;
  const size_t row_bytes = tensor.size_bytes() / tensor.shape[0];
  char* base = static_cast<char*>(tensor.data);
  std::memcpy(base + dst_row * row_bytes, base + src_row * row_bytes,
              num_rows * row_bytes);
}

void CpuBackend::FillRandom(const Tensor& tensor, uint64_t seed, float low,
                            float high, ElementType value_type) {
  if (tensor.type == ElementType::kI32) return;  // not a float tensor
  const int64_t n = tensor.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const float value = RoundToType(
        value_type, RandomUniform(seed, static_cast<uint64_t>(i), low, high));
    StoreFromF32(tensor.data, tensor.type, static_cast<size_t>(i), value);
  }
}

absl::Status CpuBackend::SetBatchLayout(const BatchLayout& layout) {
  layout_ = layout;
  positions_.assign(static_cast<size_t>(layout.num_tokens()), 0);
  for (const SequenceSlice& s : layout_.sequences) {
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      positions_[s.token_offset + i] =
          static_cast<int32_t>(s.first_position + i);
    }
  }
  return absl::OkStatus();
}

void CpuBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& y) {
  tributary::MatMul(F32(x), x.rows(), x.cols(), w.data, w.type, w.shape[0],
                    F32(y), pool_.get(), matmul_precision_, LayoutOf(w));
}

void CpuBackend::MatMuls(const Tensor& x,
                         absl::Span<const MatMulTarget> targets) {
  std::vector<MatMulOutput> outputs;
  outputs.reserve(targets.size());
  for (const MatMulTarget& t : targets) {
    outputs.push_back(
        {t.w->data, t.w->type, t.w->shape[0], F32(*t.y), LayoutOf(*t.w)});
  }
  MatMulShared(F32(x), x.rows(), x.cols(), outputs.data(),
               static_cast<int>(outputs.size()), pool_.get(),
               matmul_precision_);
}

void CpuBackend::EmbeddingGather(const Tensor& ids, const Tensor& table,
                                 const Tensor& out) {
  ref::EmbeddingGather(ids.as<int32_t>(), ids.num_elements(), table.data,
                       table.type, table.cols(), F32(out));
}

void CpuBackend::RmsNorm(const Tensor& x, const Tensor& w, float eps,
                         const Tensor& out) {
  const int64_t dim = w.num_elements();
  fast::RmsNormZeroCentred(F32(x), x.num_elements() / dim, dim, w.data, w.type,
                           eps, F32(out), pool_.get());
}

void CpuBackend::GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w,
                              float eps, const Tensor& out) {
  const int64_t dim = w.num_elements();
  fast::GatedRmsNorm(F32(o), F32(z), o.num_elements() / dim, dim, w.data,
                     w.type, eps, F32(out), pool_.get());
}

void CpuBackend::ResidualAdd(const Tensor& x, const Tensor& u,
                             const Tensor& stats) {
  fast::ResidualAdd(F32(x), F32(u), x.rows(), x.cols(),
                    stats.data == nullptr ? nullptr : F32(stats), pool_.get());
}

void CpuBackend::SwiGlu(const Tensor& gate, const Tensor& up,
                        const Tensor& out) {
  fast::SwiGlu(F32(gate), F32(up), gate.num_elements(), F32(out), pool_.get());
}

void CpuBackend::SigmoidGate(const Tensor& o, const Tensor& gate) {
  fast::SigmoidGate(F32(o), F32(gate), o.num_elements(), pool_.get());
}

void CpuBackend::L2NormRows(const Tensor& x, int64_t dim, float scale) {
  fast::L2NormRows(F32(x), x.num_elements() / dim, dim, scale, pool_.get());
}

void CpuBackend::GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log,
                          const Tensor& dt_bias, const Tensor& g,
                          const Tensor& beta) {
  fast::GdnGates(F32(a), F32(b), a.rows(), a.cols(), a_log.data, a_log.type,
                 dt_bias.data, dt_bias.type, F32(g), F32(beta), pool_.get());
}

void CpuBackend::CopyColumns(const Tensor& src, int64_t col_begin,
                             const Tensor& dst) {
  const int64_t rows = dst.rows(), width = dst.cols(), src_cols = src.cols();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(F32(dst) + r * width, F32(src) + r * src_cols + col_begin,
                width * sizeof(float));
  }
}

void CpuBackend::GatherRows(const Tensor& src, const Tensor& rows,
                            const Tensor& dst) {
  const int64_t width = src.cols();
  const int32_t* index = rows.as<int32_t>();
  for (int64_t r = 0; r < rows.num_elements(); ++r) {
    std::memcpy(F32(dst) + r * width, F32(src) + index[r] * width,
                width * sizeof(float));
  }
}

void CpuBackend::ArgMaxRows(const Tensor& x, const Tensor& ids) {
  fast::ArgMaxRows(F32(x), x.rows(), x.cols(), ids.as<int32_t>(), pool_.get());
}

// The naive twin is the implementation: the CPU's logits are host memory,
// and the engine samples them with the host sampler unless told otherwise.
void CpuBackend::ChooseTokens(const Tensor& x, const Tensor& choices,
                              const Tensor& history, const Tensor& ids,
                              const Tensor& logprobs) {
  const int64_t width = x.cols();
  const TokenChoice* choice = static_cast<const TokenChoice*>(choices.data);
  TokenHistoryEntry* entries = static_cast<TokenHistoryEntry*>(history.data);
  TokenLogprobs* out = static_cast<TokenLogprobs*>(logprobs.data);
  std::vector<float> raw;
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* row = F32(x) + r * width;
    // Logprobs are of the raw row, the token of the penalized one; a row
    // that is not finite gets no penalties (-1 either way).
    const bool logprobs_asked = out != nullptr && choice[r].num_logprobs >= 0;
    if (logprobs_asked) raw.assign(row, row + width);
    if (ref::ArgMaxRow(row, width) >= 0)
      ref::ApplyPenalties(row, choice[r], entries);
    const int32_t token = ref::ChooseToken(row, width, choice[r]);
    ids.as<int32_t>()[r] = token;
    if (logprobs_asked && token >= 0) {
      out[r] =
          ref::RowLogprobs(raw.data(), width, token, choice[r].num_logprobs);
    }
  }
}

void CpuBackend::Rope(const Tensor& x, int64_t rotary_dim, float theta) {
  ref::PartialRopeNeox(F32(x), x.shape[0], x.shape[1], x.shape[2], rotary_dim,
                       positions_.data(), theta);
}

// The interventions run on a few rows of one request: the reference code is
// the implementation (no fast twin needed at this size).
void CpuBackend::AddScaledVector(const Tensor& x, int64_t row_begin,
                                 int64_t row_end, const Tensor& v,
                                 float scale) {
  const int64_t dim = x.cols();
  ref::AddScaledVector(F32(x) + row_begin * dim, row_end - row_begin, dim,
                       F32(v), scale);
}

void CpuBackend::ProjectOut(const Tensor& x, int64_t row_begin, int64_t row_end,
                            const Tensor& u) {
  const int64_t dim = x.cols();
  ref::ProjectOut(F32(x) + row_begin * dim, row_end - row_begin, dim, F32(u));
}

void CpuBackend::CausalConv1dSilu(const Tensor& x, const Tensor& w,
                                  const Tensor& window_pool,
                                  const Tensor& out) {
  const int64_t channels = x.cols();
  const int64_t kernel = w.shape[w.shape.rank - 1];
  const int64_t window_elems = (kernel - 1) * channels;
  std::vector<fast::ConvSequence> sequences;
  sequences.reserve(layout_.sequences.size());
  for (const SequenceSlice& s : layout_.sequences) {
    sequences.push_back({F32(x) + s.token_offset * channels, s.num_tokens,
                         F32(window_pool) + s.state_slot * window_elems,
                         F32(out) + s.token_offset * channels});
  }
  fast::CausalConv1dSilu(sequences.data(),
                         static_cast<int64_t>(sequences.size()), channels,
                         kernel, w.data, w.type, pool_.get());
}

void CpuBackend::GatedDeltaRule(const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state_pool,
                                const Tensor& out) {
  const int64_t hk = q.shape[1], dk = q.shape[2];
  const int64_t hv = v.shape[1], dv = v.shape[2];
  const int64_t state_elems = hv * dk * dv;
  // One work unit per (sequence, value head), all sequences in one static
  // partition: a head's results depend only on its own inputs and state.
  std::vector<DeltaRuleCall> calls;
  size_t scratch_bytes = 0;
  for (const SequenceSlice& s : layout_.sequences) {
    if (s.num_tokens <= 0) continue;
    const int64_t t0 = s.token_offset;
    DeltaRuleCall& c = calls.emplace_back();
    c.dims = {s.num_tokens, hk, hv, dk, dv};
    c.chunk_size = 64;
    c.q = F32(q) + t0 * hk * dk;
    c.k = F32(k) + t0 * hk * dk;
    c.v = F32(v) + t0 * hv * dv;
    c.g = F32(g) + t0 * hv;
    c.beta = F32(beta) + t0 * hv;
    c.state = F32(state_pool) + s.state_slot * state_elems;
    c.out = F32(out) + t0 * hv * dv;
    c.recurrent = DeltaRuleTakesRecurrentForm(delta_rule_form_, s.num_tokens,
                                              s.first_position, dk, dv);
    scratch_bytes = std::max(scratch_bytes, DeltaRuleScratchBytes(c));
  }
  const int64_t units = static_cast<int64_t>(calls.size()) * hv;
  // About 4 multiply-adds per state element per token (decay, prediction,
  // update, output).
  const int64_t macs =
      4 * static_cast<int64_t>(positions_.size()) * hv * dk * dv;
  pool_->ParallelForWorker(
      units,
      [&](int worker, int64_t begin, int64_t end) {
        void* scratch = pool_->WorkerScratch(worker, scratch_bytes);
        // The units of one sequence together (GatedDeltaRuleHeads groups
        // its heads).
        for (int64_t u = begin; u < end;) {
          const int64_t c = u / hv;
          const int64_t stop = std::min(end, (c + 1) * hv);
          GatedDeltaRuleHeads(calls[c], u - c * hv, stop - c * hv, scratch);
          u = stop;
        }
      },
      MaxChunksFor(macs));
}

void CpuBackend::WriteKv(const Tensor& k, const Tensor& v, const Tensor& k_pool,
                         const Tensor& v_pool) {
  const int64_t block_size = k_pool.shape[1], kv_heads = k_pool.shape[2],
                head_dim = k_pool.shape[3];
  const int64_t row = kv_heads * head_dim;
  for (const SequenceSlice& s : layout_.sequences) {
    ref::WriteKv(F32(k) + s.token_offset * row, F32(v) + s.token_offset * row,
                 s.num_tokens, s.first_position, s.block_table.data(),
                 block_size, kv_heads, head_dim, F32(k_pool), F32(v_pool));
  }
}

void CpuBackend::PagedAttention(const Tensor& q, const Tensor& k_pool,
                                const Tensor& v_pool, float scale,
                                const Tensor& out) {
  const int64_t heads = q.shape[1], head_dim = q.shape[2];
  const int64_t row = heads * head_dim;
  // Work units: (sequence, token, KV head), all sequences in one static
  // partition; a query's output depends only on its q and its keys.
  std::vector<AttentionCall> calls;
  std::vector<int64_t> first_unit;  // [calls + 1]
  size_t scratch_bytes = 0;
  int64_t macs = 0;
  first_unit.push_back(0);
  for (const SequenceSlice& s : layout_.sequences) {
    if (s.num_tokens <= 0) continue;
    AttentionCall& c = calls.emplace_back();
    c.q = F32(q) + s.token_offset * row;
    c.num_tokens = s.num_tokens;
    c.num_q_heads = heads;
    c.first_position = s.first_position;
    c.kv = {F32(k_pool),     F32(v_pool),     s.block_table.data(),
            k_pool.shape[1], k_pool.shape[2], head_dim};
    c.scale = scale;
    c.out = F32(out) + s.token_offset * row;
    first_unit.push_back(first_unit.back() + AttentionUnits(c));
    scratch_bytes = std::max(scratch_bytes, AttentionScratchBytes(c));
    // Scores and the weighted sum: 2 multiply-adds per key per dimension.
    macs +=
        2 * heads * head_dim * s.num_tokens * (s.first_position + s.num_tokens);
  }
  pool_->ParallelForWorker(
      first_unit.back(),
      [&](int worker, int64_t begin, int64_t end) {
        void* scratch = pool_->WorkerScratch(worker, scratch_bytes);
        size_t c = static_cast<size_t>(
            std::upper_bound(first_unit.begin(), first_unit.end(), begin) -
            first_unit.begin() - 1);
        for (int64_t u = begin; u < end; ++u) {
          while (u >= first_unit[c + 1]) ++c;
          PagedAttentionUnit(calls[c], u - first_unit[c], scratch);
        }
      },
      MaxChunksFor(macs));
}

}  // namespace tributary
