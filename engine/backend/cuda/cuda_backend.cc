#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/cuda/cublas_api.h"
#include "engine/backend/cuda/cuda_api.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/cuda_status.h"
#include "engine/backend/cuda/device_layout.h"
#include "engine/backend/cuda/launch_recorder.h"
#include "engine/backend/cuda/gemm_tuner.h"
#include "engine/backend/cuda/programmatic_launch.h"

namespace tributary {
namespace {

using cuda::ConstTyped;
using cuda::CublasStatus;
using cuda::CudaStatus;
using cuda::Typed;

Typed Out(const Tensor& t) { return Typed{t.data, t.type}; }
ConstTyped In(const Tensor& t) { return ConstTyped{t.data, t.type}; }

bool IsFloat(ElementType type) { return type != ElementType::kI32; }

cudaDataType_t CudaDataType(ElementType type) {
  switch (type) {
    case ElementType::kBF16:
      return CUDA_R_16BF;
    case ElementType::kF16:
      return CUDA_R_16F;
    case ElementType::kF32:
      return CUDA_R_32F;
    case ElementType::kI32:
      return CUDA_R_32I;
  }
  return CUDA_R_32F;
}

// The delta rule's form for a sequence of the step: chunked for any step but
// one token after cached ones (the CPU backend's rule, and transformers').
bool DeltaRuleChunked(const SequenceSlice& s) {
  return s.num_tokens > 1 || (s.num_tokens == 1 && s.first_position == 0);
}

}  // namespace

// The flattened layout (device_layout.h): host staging and the device copy.
struct CudaBackend::DeviceLayoutBuffer {
  std::vector<int32_t> host;  // the bytes uploaded, as int32 words
  void* device = nullptr;
  size_t capacity_bytes = 0;
  cuda::DeviceLayout view;
};


CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : options_(options),
      layout_(std::make_unique<DeviceLayoutBuffer>()),
      recorder_(std::make_unique<cuda::LaunchRecorder>()) {}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::string why;
  const int count = cuda::CudaDeviceCount(&why);
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device: ", why));
  }
  if (options.device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", options.device, " requested, ", count, " present"));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(options));
  RETURN_IF_ERROR(backend->Init());
  return backend;
}

int CudaBackend::DeviceCount(std::string* why) {
  return cuda::CudaDeviceCount(why);
}

absl::Status CudaBackend::Init() {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
  cudaDeviceProp prop;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, options_.device),
                             "cudaGetDeviceProperties"));
  description_ = absl::StrCat(prop.name, ", ",
                              static_cast<double>(prop.totalGlobalMem) /
                                  static_cast<double>(size_t{1} << 30),
                              " GiB, sm_", prop.major, prop.minor);
  multiprocessors_ = std::max(1, prop.multiProcessorCount);
  l2_bytes_ = static_cast<size_t>(std::max(0, prop.l2CacheSize));
  // Whether the kernels wait under programmatic launch: a Hopper device,
  // and kernels built for it (read once: the benchmark toggles it per step).
  programmatic_launch_possible_ = prop.major >= 9 && cuda::KernelPtxVersion() >= 90;
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(CudaStatus(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
      "cudaStreamCreate"));
  stream_ = stream;
  if (options_.programmatic_launch) set_programmatic_launch(true);
  ASSIGN_OR_RETURN(cublas_api_, cuda::LoadCublas());
  const cuda::CublasApi& api = *cublas_api_;
  cublasHandle_t handle = nullptr;
  RETURN_IF_ERROR(CublasStatus(api, api.create(&handle), "cublasCreate"));
  cublas_ = handle;
  RETURN_IF_ERROR(
      CublasStatus(api, api.set_stream(handle, stream), "cublasSetStream"));
  if (options_.cublas_workspace_bytes > 0) {
    ASSIGN_OR_RETURN(cublas_workspace_,
                     DeviceAlloc(options_.cublas_workspace_bytes, "cuBLAS workspace"));
    RETURN_IF_ERROR(CublasStatus(
        api,
        api.set_workspace(handle, cublas_workspace_,
                          options_.cublas_workspace_bytes),
        "cublasSetWorkspace"));
  }
  if (options_.tune_gemms) {
    options_.tune_gemms = false;
    RETURN_IF_ERROR(set_tune_gemms(true));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::set_tune_gemms(bool on) {
  if (on && tuner_ == nullptr) {
    if (!Activate()) return Synchronize();
    // The candidates' output and, from its start, the flush buffer the
    // tuner writes before each timed run: twice the L2.
    const size_t flush_bytes = 2 * l2_bytes_;
    const size_t scratch_bytes = std::max(kTuneScratchBytes, flush_bytes);
    ASSIGN_OR_RETURN(void* scratch,
                     DeviceAlloc(scratch_bytes, "the GEMM tuner's scratch"));
    absl::StatusOr<std::unique_ptr<cuda::GemmTuner>> tuner =
        cuda::GemmTuner::Create(*cublas_api_, cublas_, stream_, cublas_workspace_,
                                options_.cublas_workspace_bytes, scratch,
                                scratch_bytes, flush_bytes,
                                cuda::GemmTuner::Options{});
    if (!tuner.ok()) {
      DeviceFree(scratch);
      return tuner.status();
    }
    tuner_ = std::move(*tuner);
  }
  options_.tune_gemms = on;
  return absl::OkStatus();
}

std::vector<GemmTuning> CudaBackend::gemm_tunings() const {
  std::vector<GemmTuning> out;
  if (tuner_ == nullptr) return out;
  for (const cuda::GemmChoice& c : tuner_->choices()) {
    GemmTuning t;
    t.out_features = c.shape.m;
    t.tokens = c.shape.n;
    t.in_features = c.shape.k;
    t.f32_output = c.shape.d_type == CUDA_R_32F;
    t.candidates = c.candidates;
    t.default_ms = c.default_ms;
    t.best_ms = c.best_ms;
    t.chosen = c.chosen;
    t.failure = c.failure;
    out.push_back(t);
  }
  return out;
}

CudaBackend::~CudaBackend() {
  // Errors cannot be reported from here; a sticky error makes these fail,
  // and the process is about to restart anyway.
  if (in_region_) cuda::ActiveLaunchRecorder() = nullptr;
  (void)cudaSetDevice(options_.device);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  ClearGraphs();
  tuner_.reset();  // its descriptors, before the handles they were made with
  if (cublas_ != nullptr) (void)cublas_api_->destroy(cublas_);
  for (const auto& [data, bytes] : allocation_bytes_) (void)cudaFree(data);
  if (layout_->device != nullptr) (void)cudaFree(layout_->device);
  if (stream_ != nullptr) {
    (void)cuda::SetProgrammaticLaunch(stream_, false);
    (void)cudaStreamDestroy(stream_);
  }
}

bool CudaBackend::Record(const absl::Status& status) {
  if (status.ok()) return true;
  if (pending_.ok()) pending_ = status;
  if (absl::IsUnavailable(status) && sticky_.ok()) sticky_ = status;
  return false;
}

bool CudaBackend::Activate() {
  if (!sticky_.ok()) return false;
  return Record(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
}

void CudaBackend::CheckLaunch(const char* what) {
  Record(CudaStatus(cudaGetLastError(), what));
}

bool CudaBackend::Require(bool condition, const char* what) {
  if (condition) return true;
  Record(absl::InternalError(absl::StrCat("cuda backend: ", what)));
  return false;
}

absl::StatusOr<void*> CudaBackend::DeviceAlloc(size_t bytes, const char* what) {
  void* data = nullptr;
  // At least one byte, so that every tensor has a distinct address.
  const cudaError_t error = cudaMalloc(&data, std::max<size_t>(bytes, 1));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky
    absl::Status s = CudaStatus(
        error, absl::StrCat("cudaMalloc of ", bytes, " bytes for ", what,
                            " (", allocated_bytes_, " bytes held)"));
    Record(absl::IsUnavailable(s) ? s : absl::OkStatus());
    return s;
  }
  allocation_bytes_[data] = bytes;
  allocated_bytes_ += bytes;
  return data;
}

float* CudaBackend::Scratch(ScratchBuffer& buffer, size_t bytes,
                            const char* what) {
  if (bytes <= buffer.bytes) return static_cast<float*>(buffer.data);
  // cudaFree waits for the kernels that may still use the old buffer. In a
  // graph region the launches recorded so far have not been issued yet:
  // the old buffer is freed after they are (EndGraphRegion).
  if (buffer.data != nullptr) {
    if (in_region_) {
      retired_.push_back(buffer.data);
    } else {
      DeviceFree(buffer.data);
    }
  }
  buffer.data = nullptr;
  buffer.bytes = 0;
  absl::StatusOr<void*> data = DeviceAlloc(bytes, what);
  if (!data.ok()) {
    Record(data.status());
    return nullptr;
  }
  buffer.data = *data;
  buffer.bytes = bytes;
  return static_cast<float*>(buffer.data);
}

void CudaBackend::DeviceFree(void* data) {
  auto it = allocation_bytes_.find(data);
  if (it == allocation_bytes_.end()) return;
  allocated_bytes_ -= it->second;
  allocation_bytes_.erase(it);
  Record(CudaStatus(cudaFree(data), "cudaFree"));
}

absl::StatusOr<Tensor> CudaBackend::Allocate(ElementType type,
                                             const Shape& shape) {
  if (!sticky_.ok()) return sticky_;
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allocate a tensor of shape ", shape.ToString()));
    }
  }
  if (!Activate()) return pending_;
  Tensor tensor;
  tensor.type = type;
  tensor.shape = shape;
  absl::StatusOr<void*> data =
      DeviceAlloc(tensor.size_bytes(), shape.ToString().c_str());
  if (!data.ok()) return data.status();
  tensor.data = *data;
  return tensor;
}

void CudaBackend::Free(Tensor& tensor) {
  if (tensor.data != nullptr && Activate()) DeviceFree(tensor.data);
  tensor.data = nullptr;
}

absl::StatusOr<Tensor> CudaBackend::ImportWeight(const void* host,
                                                 ElementType type,
                                                 const Shape& shape) {
  const ElementType stored = weight_type(type, shape.rank);
  absl::StatusOr<Tensor> tensor = Allocate(stored, shape);
  if (!tensor.ok()) return tensor.status();
  if (stored == type) {
    absl::Status s = CopyFromHost(host, *tensor);
    if (!s.ok()) {
      Free(*tensor);
      return s;
    }
    return tensor;
  }
  // Upload in the stored type, then convert on the device.
  absl::StatusOr<Tensor> staging = Allocate(type, shape);
  if (!staging.ok()) {
    Free(*tensor);
    return staging.status();
  }
  absl::Status s = CopyFromHost(host, *staging);
  if (s.ok()) {
    cuda::LaunchConvert(In(*staging), Out(*tensor), shape.num_elements(),
                        stream_);
    s = CudaStatus(cudaGetLastError(), "convert weights to the activation type");
    if (absl::IsUnavailable(s)) Record(s);
  }
  Free(*staging);  // cudaFree waits for the conversion
  if (!s.ok()) {
    Free(*tensor);
    return s;
  }
  return tensor;
}

absl::Status CudaBackend::CopyFromHost(const void* src, const Tensor& dst) {
  if (!sticky_.ok()) return sticky_;
  if (in_region_) return absl::InternalError("CopyFromHost inside a graph region");
  if (dst.size_bytes() == 0) return absl::OkStatus();
  if (!Activate()) return pending_;
  // From pageable memory the copy returns once `src` has been staged, so the
  // caller may reuse it at once (the DMA itself stays in stream order).
  absl::Status s = CudaStatus(cudaMemcpyAsync(dst.data, src, dst.size_bytes(),
                                              cudaMemcpyHostToDevice, stream_),
                              "cudaMemcpyAsync to the device");
  if (absl::IsUnavailable(s)) Record(s);
  return s;
}

absl::Status CudaBackend::CopyToHost(const Tensor& src, void* dst) {
  if (!sticky_.ok()) return sticky_;
  if (in_region_) return absl::InternalError("CopyToHost inside a graph region");
  if (src.size_bytes() > 0) {
    if (!Activate()) return Synchronize();
    Record(CudaStatus(cudaMemcpyAsync(dst, src.data, src.size_bytes(),
                                      cudaMemcpyDeviceToHost, stream_),
                      "cudaMemcpyAsync to the host"));
  }
  return Synchronize();
}

void CudaBackend::Zero(const Tensor& tensor) {
  if (tensor.size_bytes() == 0 || !sticky_.ok()) return;
  void* data = tensor.data;
  const size_t bytes = tensor.size_bytes();
  constexpr uint64_t kMemsetTag = 0x6d656d736574;  // "memset"
  IssueOrRecord(
      [this, data, bytes] {
        Record(CudaStatus(cudaMemsetAsync(data, 0, bytes, stream_),
                          "cudaMemsetAsync"));
      },
      kMemsetTag, data, bytes);
}

void CudaBackend::ZeroRows(const Tensor& tensor, int64_t row_begin,
                           int64_t row_end) {
  if (!Require(row_begin >= 0 && row_begin <= row_end &&
                   row_end <= tensor.shape[0],
               "ZeroRows: rows outside the tensor")) {
    return;
  }
  Zero(RowsOf(tensor, row_begin, row_end - row_begin));
}

void CudaBackend::CopyRows(const Tensor& tensor, int64_t src_row,
                           int64_t dst_row, int64_t num_rows) {
  if (!sticky_.ok()) return;
  // A copy is not recorded into a graph: checkpoints and restores are
  // issued between steps, and a replayed graph would repeat a copy of
  // whichever rows it was captured with.
  if (!Require(!in_region_, "CopyRows inside a graph region")) return;
  const int64_t rows = tensor.shape.rank == 0 ? 0 : tensor.shape[0];
  if (!Require(num_rows >= 0 && src_row >= 0 && dst_row >= 0 &&
                   src_row + num_rows <= rows && dst_row + num_rows <= rows,
               "CopyRows: rows outside the tensor") ||
      !Require(num_rows == 0 || src_row + num_rows <= dst_row ||
                   dst_row + num_rows <= src_row,
               "CopyRows: overlapping rows")) {
    return;
  }
  if (num_rows == 0 || src_row == dst_row) return;
  const Tensor src = RowsOf(tensor, src_row, num_rows);
  const Tensor dst = RowsOf(tensor, dst_row, num_rows);
  Record(CudaStatus(cudaMemcpyAsync(dst.data, src.data, src.size_bytes(),
                                    cudaMemcpyDeviceToDevice, stream_),
                    "cudaMemcpyAsync on the device (CopyRows)"));
}

void CudaBackend::FillRandom(const Tensor& tensor, uint64_t seed, float low,
                             float high, ElementType value_type) {
  if (!sticky_.ok() ||
      !Require(IsFloat(tensor.type) && IsFloat(value_type),
               "FillRandom: not a float tensor")) {
    return;
  }
  cuda::LaunchFillRandom(Out(tensor), tensor.num_elements(), seed, low, high,
                         value_type, stream_);
  CheckLaunch("FillRandom");
}

absl::Status CudaBackend::Synchronize() {
  if (in_region_) return absl::InternalError("Synchronize inside a graph region");
  if (stream_ != nullptr && sticky_.ok()) {
    Record(CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  }
  absl::Status result = pending_;
  pending_ = absl::OkStatus();
  if (!sticky_.ok()) return sticky_;
  return result;
}

template <typename Work, typename... Key>
void CudaBackend::IssueOrRecord(Work&& work, const Key&... key) {
  cuda::LaunchRecorder* recorder = cuda::ActiveLaunchRecorder();
  if (recorder == nullptr) {
    work();
    return;
  }
  (recorder->Add(key), ...);
  recorder->AddWork(std::forward<Work>(work));
}

void CudaBackend::BeginGraphRegion() {
  if (in_region_ || !sticky_.ok()) return;
  in_region_ = true;
  recorder_->Clear();
  // The launches' attribute is part of what a graph replays.
  recorder_->Add(options_.programmatic_launch);
  cuda::ActiveLaunchRecorder() = recorder_.get();
}

void CudaBackend::set_programmatic_launch(bool on) {
  // Only where the kernels wait (built for sm_90 or later, on such a
  // device); and refused with 64 streams on at once. The launches stay
  // plain then, and the option reads false.
  if (!programmatic_launch_possible_) on = false;
  options_.programmatic_launch = cuda::SetProgrammaticLaunch(stream_, on) && on;
}

void CudaBackend::IssueRecorded() {
  for (std::function<void()>& work : recorder_->work()) work();
  CheckLaunch("a graph region's launches");
}

void CudaBackend::ClearGraphs() {
  for (auto& [hash, graph] : graphs_) (void)cudaGraphExecDestroy(graph.exec);
  graphs_.clear();
}

absl::Status CudaBackend::EndGraphRegion() {
  if (!in_region_) return absl::OkStatus();
  in_region_ = false;
  cuda::ActiveLaunchRecorder() = nullptr;
  absl::Status status = IssueRegion();
  // Scratch buffers replaced during the region, now that its work is issued
  // (cudaFree waits for it).
  for (void* data : retired_) DeviceFree(data);
  retired_.clear();
  return status;
}

absl::Status CudaBackend::IssueRegion() {
  if (!sticky_.ok()) {
    recorder_->Clear();
    return sticky_;
  }
  if (recorder_->empty()) return absl::OkStatus();
  if (!Activate()) {
    recorder_->Clear();
    return Synchronize();
  }
  if (!options_.graphs) {
    IssueRecorded();
    ++graph_stats_.eager;
    recorder_->Clear();
    return absl::OkStatus();
  }
  const std::vector<uint64_t>& words = recorder_->words();
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the words
  for (uint64_t w : words) hash = (hash ^ w) * 0x100000001b3ull;
  auto [first, last] = graphs_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.words == words) {
      it->second.last_use = ++graph_clock_;
      Record(CudaStatus(cudaGraphLaunch(it->second.exec, stream_),
                        "cudaGraphLaunch"));
      ++graph_stats_.replayed;
      recorder_->Clear();
      return absl::OkStatus();
    }
  }
  // New work: capture it into a graph, keep it, launch it. A capture that
  // fails (a driver without it, say) runs the work as plain launches.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // The work's own error reports during a capture that fails are the
  // capture's, not the work's (it runs again as plain launches): keep the
  // errors from before.
  const absl::Status pending_before = pending_;
  cudaError_t error =
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (error == cudaSuccess) {
    for (std::function<void()>& work : recorder_->work()) work();
    // A work item that failed while it was being captured (a launch
    // refused, cuBLAS declining a product) left its work out of the graph:
    // kept, the graph would replay the step without it, silently, every
    // time. Such a capture is thrown away and the work runs as plain
    // launches below, where an error that persists is reported as its own.
    const bool work_failed =
        cudaGetLastError() != cudaSuccess || !(pending_ == pending_before);
    error = cudaStreamEndCapture(stream_, &graph);
    if (error == cudaSuccess && work_failed) {
      error = cudaErrorStreamCaptureInvalidated;
    }
    if (error == cudaSuccess) error = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
  if (error != cudaSuccess) {
    absl::Status s = CudaStatus(error, "capturing a CUDA graph");
    if (absl::IsUnavailable(s)) {
      Record(s);
      recorder_->Clear();
      return Synchronize();
    }
    (void)cudaGetLastError();
    pending_ = pending_before;
    IssueRecorded();
    ++graph_stats_.eager;
    recorder_->Clear();
    return absl::OkStatus();
  }
  if (static_cast<int>(graphs_.size()) >= options_.max_graphs) {
    auto oldest = graphs_.begin();
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    }
    (void)cudaGraphExecDestroy(oldest->second.exec);
    graphs_.erase(oldest);
  }
  KeptGraph kept;
  kept.words = words;
  kept.exec = exec;
  kept.last_use = ++graph_clock_;
  graphs_.emplace(hash, std::move(kept));
  Record(CudaStatus(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch"));
  ++graph_stats_.captured;
  recorder_->Clear();
  return absl::OkStatus();
}

absl::Status CudaBackend::SetBatchLayout(const BatchLayout& layout) {
  if (!sticky_.ok()) return sticky_;
  if (in_region_) {
    return absl::InternalError("SetBatchLayout inside a graph region");
  }
  if (!Activate()) return Synchronize();
  const int64_t num_sequences = static_cast<int64_t>(layout.sequences.size());
  const int64_t num_tokens = layout.num_tokens();
  // The grids put sequences on a 16-bit dimension.
  if (num_sequences > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_sequences, " sequences in one step; the CUDA backend takes 65535"));
  }
  int64_t num_block_entries = 0;
  int64_t num_chunked = 0, num_flash_tiles = 0;
  max_keys_ = 0;
  max_keys_without_flash_ = 0;
  tokens_without_flash_ = 0;
  max_delta_chunks_ = 0;
  for (const SequenceSlice& s : layout.sequences) {
    num_block_entries += static_cast<int64_t>(s.block_table.size());
    max_keys_ = std::max(max_keys_, s.first_position + s.num_tokens);
    if (s.num_tokens >= cuda::kFlashMinTokens) {
      num_flash_tiles += (s.num_tokens + cuda::kFlashTileTokens - 1) /
                         cuda::kFlashTileTokens;
    } else {
      tokens_without_flash_ += s.num_tokens;
      max_keys_without_flash_ =
          std::max(max_keys_without_flash_, s.first_position + s.num_tokens);
    }
    if (DeltaRuleChunked(s)) {
      ++num_chunked;
      max_delta_chunks_ = std::max(
          max_delta_chunks_,
          (s.num_tokens + cuda::kDeltaChunk - 1) / cuda::kDeltaChunk);
    }
  }
  constexpr int64_t kSequenceWords = sizeof(cuda::DeviceSequence) / sizeof(int32_t);
  static_assert(sizeof(cuda::DeviceSequence) % sizeof(int32_t) == 0);
  std::vector<int32_t>& words = layout_->host;
  words.assign(static_cast<size_t>(num_sequences * kSequenceWords +
                                   2 * num_tokens + num_block_entries +
                                   num_chunked + 2 * num_flash_tiles +
                                   tokens_without_flash_),
               0);
  int32_t* sequences = words.data();
  int32_t* token_sequence = sequences + num_sequences * kSequenceWords;
  int32_t* token_position = token_sequence + num_tokens;
  // The block tables last: every other array's address then depends only
  // on the step's counts, so a decode step's launches (and its graph) stay
  // the same while sequences grow into new blocks.
  int32_t* chunked_sequences = token_position + num_tokens;
  int32_t* flash_tiles = chunked_sequences + num_chunked;
  int32_t* split_tokens = flash_tiles + 2 * num_flash_tiles;
  int32_t* block_tables = split_tokens + tokens_without_flash_;
  int64_t block_offset = 0, chunked_rank = 0, flash_tile = 0, split_rank = 0;
  for (int64_t i = 0; i < num_sequences; ++i) {
    const SequenceSlice& s = layout.sequences[i];
    cuda::DeviceSequence d;
    d.token_offset = static_cast<int32_t>(s.token_offset);
    d.num_tokens = static_cast<int32_t>(s.num_tokens);
    d.first_position = static_cast<int32_t>(s.first_position);
    d.state_slot = s.state_slot;
    d.block_table_offset = static_cast<int32_t>(block_offset);
    d.chunked = DeltaRuleChunked(s) ? 1 : 0;
    if (d.chunked) chunked_sequences[chunked_rank++] = static_cast<int32_t>(i);
    d.flash = s.num_tokens >= cuda::kFlashMinTokens ? 1 : 0;
    for (int64_t t = 0; d.flash && t < s.num_tokens; t += cuda::kFlashTileTokens) {
      flash_tiles[2 * flash_tile] = static_cast<int32_t>(i);
      flash_tiles[2 * flash_tile + 1] = static_cast<int32_t>(t);
      ++flash_tile;
    }
    std::memcpy(sequences + i * kSequenceWords, &d, sizeof d);
    for (int64_t t = 0; t < s.num_tokens; ++t) {
      token_sequence[s.token_offset + t] = static_cast<int32_t>(i);
      token_position[s.token_offset + t] =
          static_cast<int32_t>(s.first_position + t);
      if (!d.flash) {
        split_tokens[split_rank++] = static_cast<int32_t>(s.token_offset + t);
      }
    }
    std::copy(s.block_table.begin(), s.block_table.end(),
              block_tables + block_offset);
    block_offset += static_cast<int64_t>(s.block_table.size());
  }
  const size_t bytes = words.size() * sizeof(int32_t);
  if (bytes > layout_->capacity_bytes) {
    // No op may read the old buffer's view after it is freed, whatever
    // happens below: the view is set again only on success.
    layout_->view = cuda::DeviceLayout{};
    // cudaFree waits for the kernels that may still read the old buffer.
    if (layout_->device != nullptr) {
      Record(CudaStatus(cudaFree(layout_->device), "cudaFree"));
      layout_->device = nullptr;
      layout_->capacity_bytes = 0;
    }
    const size_t capacity = std::max<size_t>(bytes * 2, 4096);
    void* data = nullptr;
    absl::Status s = CudaStatus(cudaMalloc(&data, capacity),
                                "cudaMalloc of the batch layout");
    if (!s.ok()) {
      (void)cudaGetLastError();
      return s;
    }
    layout_->device = data;
    layout_->capacity_bytes = capacity;
  }
  if (bytes > 0) {
    // In stream order: kernels of the previous step that read the old layout
    // have run before the copy lands.
    absl::Status s = CudaStatus(
        cudaMemcpyAsync(layout_->device, words.data(), bytes,
                        cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync of the batch layout");
    if (absl::IsUnavailable(s)) Record(s);
    if (!s.ok()) return s;
  }
  const int32_t* base = static_cast<const int32_t*>(layout_->device);
  cuda::DeviceLayout& view = layout_->view;
  view.sequences = reinterpret_cast<const cuda::DeviceSequence*>(base);
  view.token_sequence = base + num_sequences * kSequenceWords;
  view.token_position = view.token_sequence + num_tokens;
  view.chunked_sequences = view.token_position + num_tokens;
  view.flash_tiles = view.chunked_sequences + num_chunked;
  view.split_tokens = view.flash_tiles + 2 * num_flash_tiles;
  view.block_tables = view.split_tokens + tokens_without_flash_;
  view.num_sequences = static_cast<int32_t>(num_sequences);
  view.num_tokens = static_cast<int32_t>(num_tokens);
  view.num_chunked = static_cast<int32_t>(num_chunked);
  view.num_flash_tiles = static_cast<int32_t>(num_flash_tiles);
  view.num_split_tokens = static_cast<int32_t>(tokens_without_flash_);
  return absl::OkStatus();
}

void CudaBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& y) {
  if (!sticky_.ok()) return;
  const int64_t tokens = x.rows(), in = x.cols(), out = w.shape[0];
  if (!Require(w.shape.rank == 2 && w.shape[1] == in && y.rows() == tokens &&
                   y.cols() == out,
               "MatMul: shapes do not agree") ||
      !Require(x.type == w.type && w.type != ElementType::kI32,
               "MatMul: x and w must have one float type") ||
      !Require(y.type != ElementType::kI32, "MatMul: integer output")) {
    return;
  }
  if (tokens == 0 || out == 0) return;
  if (!Require(tokens <= INT32_MAX && in <= INT32_MAX && out <= INT32_MAX,
               "MatMul: a dimension exceeds 2^31")) {
    return;
  }
  // A few tokens of bf16: the weight-streaming kernel (a decode step's
  // products); anything else, cuBLAS.
  if (TakesGemv(x, w)) {
    const cuda::GemvOutput output{w.data, out, Out(y)};
    cuda::LaunchGemv(x.data, tokens, in, &output, 1, stream_);
    CheckLaunch("MatMul (gemv)");
    return;
  }
  // Row-major y [T, out] = x [T, in] · wᵀ is, in cuBLAS's column-major terms,
  // yᵀ [out, T] = wᵀ… : w seen column-major is [in, out] (lda = in), so
  // op(A) = Aᵀ gives [out, in]; x seen column-major is [in, T] (ldb = in).
  const int m = static_cast<int>(out), n = static_cast<int>(tokens),
            k = static_cast<int>(in);
  const void* w_data = w.data;
  const void* x_data = x.data;
  void* y_data = y.data;
  const cudaDataType_t w_type = CudaDataType(w.type), x_type = CudaDataType(x.type),
                       y_type = CudaDataType(y.type);
  // Batched decode's products: the algorithm measured fastest for the
  // shape (tune_gemms; the straightforward kernels keep cuBLAS's default).
  const void* plan = nullptr;
  if (options_.tune_gemms && !options_.straightforward_kernels &&
      tokens <= kTuneMaxTokens &&
      !TunedPlan(cuda::GemmShape{m, n, k, w_type, y_type,
                                 cuda::OperandAlignment(w_data),
                                 cuda::OperandAlignment(x_data),
                                 cuda::OperandAlignment(y_data)},
                 w_data, x_data, &plan)) {
    return;
  }
  constexpr uint64_t kGemmTag = 0x67656d6d;  // "gemm"
  IssueOrRecord(
      [=, tuner = tuner_.get()] {
        // An algorithm that passed cuBLASLt's check may still decline to
        // run (cublasLt.h); cublasGemmEx then does the product.
        if (plan != nullptr &&
            tuner->Run(*static_cast<const cuda::GemmTuner::Plan*>(plan), w_data,
                       x_data, y_data) == CUBLAS_STATUS_SUCCESS) {
          return;
        }
        const float alpha = 1.0f, beta = 0.0f;
        Record(CublasStatus(
            *cublas_api_,
            cublas_api_->gemm_ex(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k,
                                 &alpha, w_data, w_type, k, x_data, x_type, k,
                                 &beta, y_data, y_type, m, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx"));
      },
      kGemmTag, m, n, k, w_data, x_data, y_data, w_type, x_type, y_type, plan);
}

bool CudaBackend::TunedPlan(const cuda::GemmShape& shape, const void* w,
                            const void* x, const void** plan) {
  *plan = nullptr;
  if (!Require(tuner_ != nullptr, "tune_gemms is on but there is no tuner")) {
    return false;
  }
  // A tuning that failed short of a sticky error leaves the shape on
  // cublasGemmEx (gemm_tunings() says why).
  absl::StatusOr<const cuda::GemmTuner::Plan*> chosen = tuner_->Choose(shape, w, x);
  if (!chosen.ok()) return Record(chosen.status());  // a sticky error
  *plan = *chosen;
  return true;
}

bool CudaBackend::TakesGemv(const Tensor& x, const Tensor& w) const {
  const auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  return !options_.straightforward_kernels && x.rows() >= 1 &&
         x.rows() <= cuda::kGemvMaxTokens && x.type == ElementType::kBF16 &&
         w.type == ElementType::kBF16 && x.cols() % 8 == 0 &&
         w.shape.rank == 2 && w.shape[1] == x.cols() && aligned(x.data) &&
         aligned(w.data);
}

void CudaBackend::MatMuls(const Tensor& x,
                          absl::Span<const MatMulTarget> targets) {
  // One launch for all when the few-token kernel takes every product.
  bool together = !targets.empty() &&
                  targets.size() <= static_cast<size_t>(cuda::kGemvMaxOutputs);
  for (const MatMulTarget& t : targets) {
    together = together && TakesGemv(x, *t.w) && t.y->rows() == x.rows() &&
               t.y->cols() == t.w->shape[0] && t.y->type != ElementType::kI32;
  }
  if (!together || !sticky_.ok()) {
    Backend::MatMuls(x, targets);
    return;
  }
  cuda::GemvOutput outputs[cuda::kGemvMaxOutputs];
  for (size_t i = 0; i < targets.size(); ++i) {
    outputs[i] = cuda::GemvOutput{targets[i].w->data, targets[i].w->shape[0],
                                  Out(*targets[i].y)};
  }
  cuda::LaunchGemv(x.data, x.rows(), x.cols(), outputs,
                   static_cast<int>(targets.size()), stream_);
  CheckLaunch("MatMuls (gemv)");
}

void CudaBackend::EmbeddingGather(const Tensor& ids, const Tensor& table,
                                  const Tensor& out) {
  if (!sticky_.ok() ||
      !Require(ids.type == ElementType::kI32, "EmbeddingGather: ids not i32")) {
    return;
  }
  cuda::LaunchEmbeddingGather(ids.as<int32_t>(), ids.num_elements(), In(table),
                              table.cols(), Out(out), stream_);
  CheckLaunch("EmbeddingGather");
}

void CudaBackend::RmsNorm(const Tensor& x, const Tensor& w, float eps,
                          const Tensor& out) {
  if (!sticky_.ok()) return;
  const int64_t dim = w.num_elements();
  if (!Require(dim > 0 && x.num_elements() % dim == 0, "RmsNorm: shapes")) return;
  cuda::LaunchRmsNorm(In(x), x.num_elements() / dim, dim, In(w), eps, Out(out),
                      stream_);
  CheckLaunch("RmsNorm");
}

void CudaBackend::GatedRmsNorm(const Tensor& o, const Tensor& z,
                               const Tensor& w, float eps, const Tensor& out) {
  if (!sticky_.ok()) return;
  const int64_t dim = w.num_elements();
  if (!Require(dim > 0 && o.num_elements() % dim == 0 &&
                   z.num_elements() == o.num_elements(),
               "GatedRmsNorm: shapes")) {
    return;
  }
  cuda::LaunchGatedRmsNorm(In(o), In(z), o.num_elements() / dim, dim, In(w),
                           eps, Out(out), stream_);
  CheckLaunch("GatedRmsNorm");
}

void CudaBackend::ResidualAdd(const Tensor& x, const Tensor& u,
                              const Tensor& stats) {
  if (!sticky_.ok()) return;
  if (!Require(u.num_elements() == x.num_elements(), "ResidualAdd: shapes") ||
      !Require(stats.data == nullptr ||
                   (stats.type == ElementType::kF32 &&
                    stats.num_elements() == x.rows() * kResidualStatsColumns),
               "ResidualAdd: stats must be f32 [T, 6]")) {
    return;
  }
  cuda::LaunchResidualAdd(Out(x), In(u), x.rows(), x.cols(),
                          stats.data == nullptr ? nullptr : stats.as<float>(),
                          stream_);
  CheckLaunch("ResidualAdd");
}

void CudaBackend::ResidualAddRmsNorm(const Tensor& x, const Tensor& u,
                                     const Tensor& stats, const Tensor& w,
                                     float eps, const Tensor& normed) {
  if (options_.straightforward_kernels || w.num_elements() != x.cols()) {
    Backend::ResidualAddRmsNorm(x, u, stats, w, eps, normed);
    return;
  }
  if (!sticky_.ok()) return;
  if (!Require(u.num_elements() == x.num_elements() &&
                   normed.num_elements() == x.num_elements(),
               "ResidualAddRmsNorm: shapes") ||
      !Require(stats.data == nullptr ||
                   (stats.type == ElementType::kF32 &&
                    stats.num_elements() == x.rows() * kResidualStatsColumns),
               "ResidualAddRmsNorm: stats must be f32 [T, 6]")) {
    return;
  }
  cuda::LaunchResidualAddRmsNorm(
      Out(x), In(u), x.rows(), x.cols(),
      stats.data == nullptr ? nullptr : stats.as<float>(), In(w), eps,
      Out(normed), stream_);
  CheckLaunch("ResidualAddRmsNorm");
}

void CudaBackend::SwiGlu(const Tensor& gate, const Tensor& up,
                         const Tensor& out) {
  if (!sticky_.ok()) return;
  cuda::LaunchSwiGlu(In(gate), In(up), gate.num_elements(), Out(out), stream_);
  CheckLaunch("SwiGlu");
}

void CudaBackend::GateUpSwiGlu(const Tensor& x, const Tensor& w_gate,
                               const Tensor& w_up, const Tensor& gate,
                               const Tensor& up, const Tensor& out) {
  // The few-token kernel's fused form when it takes both products: a block
  // per 16 output rows sums the gate's rows, then the up's, so neither
  // product is stored and the SwiGLU is no launch of its own.
  // The kernel rounds both products to out's type, as storing them in gate
  // and up would when the three share it.
  const bool fused = TakesGemv(x, w_gate) && TakesGemv(x, w_up) &&
                     w_gate.shape == w_up.shape && out.rows() == x.rows() &&
                     out.cols() == w_gate.shape[0] && out.type != ElementType::kI32 &&
                     gate.type == out.type && up.type == out.type;
  if (!fused || !sticky_.ok()) {
    Backend::GateUpSwiGlu(x, w_gate, w_up, gate, up, out);
    return;
  }
  cuda::LaunchGemvSwiGlu(x.data, x.rows(), x.cols(), w_gate.data, w_up.data,
                         w_gate.shape[0], Out(out), stream_);
  CheckLaunch("GateUpSwiGlu (gemv)");
}

void CudaBackend::SigmoidGate(const Tensor& o, const Tensor& gate) {
  if (!sticky_.ok()) return;
  cuda::LaunchSigmoidGate(Out(o), In(gate), o.num_elements(), stream_);
  CheckLaunch("SigmoidGate");
}

void CudaBackend::L2NormRows(const Tensor& x, int64_t dim, float scale) {
  if (!sticky_.ok() ||
      !Require(dim > 0 && x.num_elements() % dim == 0, "L2NormRows: shapes")) {
    return;
  }
  cuda::LaunchL2NormRows(Out(x), x.num_elements() / dim, dim, scale, stream_);
  CheckLaunch("L2NormRows");
}

void CudaBackend::GdnGates(const Tensor& a, const Tensor& b,
                           const Tensor& a_log, const Tensor& dt_bias,
                           const Tensor& g, const Tensor& beta) {
  if (!sticky_.ok()) return;
  const int64_t heads = a_log.num_elements();
  if (!Require(heads > 0 && a.num_elements() % heads == 0, "GdnGates: shapes")) {
    return;
  }
  cuda::LaunchGdnGates(In(a), In(b), a.num_elements() / heads, heads,
                       In(a_log), In(dt_bias), Out(g), Out(beta), stream_);
  CheckLaunch("GdnGates");
}

void CudaBackend::CopyColumns(const Tensor& src, int64_t col_begin,
                              const Tensor& dst) {
  if (!sticky_.ok()) return;
  if (!Require(src.rows() == dst.rows() && col_begin >= 0 &&
                   col_begin + dst.cols() <= src.cols(),
               "CopyColumns: columns outside the source")) {
    return;
  }
  cuda::LaunchCopyColumns(In(src), src.rows(), src.cols(), col_begin, Out(dst),
                          dst.cols(), stream_);
  CheckLaunch("CopyColumns");
}

void CudaBackend::GatherRows(const Tensor& src, const Tensor& rows,
                             const Tensor& dst) {
  if (!sticky_.ok() ||
      !Require(rows.type == ElementType::kI32 && src.cols() == dst.cols(),
               "GatherRows: i32 rows and equal widths")) {
    return;
  }
  cuda::LaunchGatherRows(In(src), rows.as<int32_t>(), rows.num_elements(),
                         src.cols(), Out(dst), stream_);
  CheckLaunch("GatherRows");
}

void CudaBackend::ArgMaxRows(const Tensor& x, const Tensor& ids) {
  if (!sticky_.ok()) return;
  if (!Require(x.type == ElementType::kF32 && ids.type == ElementType::kI32 &&
                   ids.num_elements() == x.rows(),
               "ArgMaxRows: x f32 [R, V], ids i32 [R]")) {
    return;
  }
  cuda::LaunchArgMaxRows(x.as<float>(), x.rows(), x.cols(), ids.as<int32_t>(),
                         stream_);
  CheckLaunch("ArgMaxRows");
}

void CudaBackend::ChooseTokens(const Tensor& x, const Tensor& choices,
                               const Tensor& history, const Tensor& ids,
                               const Tensor& logprobs) {
  if (!sticky_.ok()) return;
  if (!Require(x.type == ElementType::kF32 && ids.type == ElementType::kI32 &&
                   ids.num_elements() == x.rows() &&
                   choices.type == ElementType::kI32 &&
                   choices.num_elements() == x.rows() * kTokenChoiceWords &&
                   (history.data == nullptr ||
                    (history.type == ElementType::kI32 &&
                     history.num_elements() % kTokenHistoryWords == 0)) &&
                   (logprobs.data == nullptr ||
                    (logprobs.type == ElementType::kI32 &&
                     logprobs.num_elements() == x.rows() * kTokenLogprobsWords)) &&
                   x.cols() > 0 && x.cols() < (int64_t{1} << 31),
               "ChooseTokens: x f32 [R, V < 2^31], choices i32 [R, 14], history "
               "none or i32 [E, 3], ids i32 [R], logprobs none or i32 [R, 42]")) {
    return;
  }
  cuda::LaunchChooseTokens(x.as<float>(), x.rows(), x.cols(),
                           static_cast<const TokenChoice*>(choices.data),
                           static_cast<TokenHistoryEntry*>(history.data),
                           ids.as<int32_t>(),
                           static_cast<TokenLogprobs*>(logprobs.data), stream_);
  CheckLaunch("ChooseTokens");
}

void CudaBackend::AddScaledVector(const Tensor& x, int64_t row_begin,
                                  int64_t row_end, const Tensor& v,
                                  float scale) {
  if (!sticky_.ok() ||
      !Require(v.type == ElementType::kF32 && v.num_elements() == x.cols() &&
                   row_begin >= 0 && row_begin <= row_end &&
                   row_end <= x.rows(),
               "AddScaledVector: an f32 vector of the row width, rows inside")) {
    return;
  }
  cuda::LaunchAddScaledVector(Out(RowsOf(x, row_begin, row_end - row_begin)),
                              row_end - row_begin, x.cols(), v.as<float>(),
                              scale, stream_);
  CheckLaunch("AddScaledVector");
}

void CudaBackend::ProjectOut(const Tensor& x, int64_t row_begin,
                             int64_t row_end, const Tensor& u) {
  if (!sticky_.ok() ||
      !Require(u.type == ElementType::kF32 && u.num_elements() == x.cols() &&
                   row_begin >= 0 && row_begin <= row_end &&
                   row_end <= x.rows(),
               "ProjectOut: an f32 direction of the row width, rows inside")) {
    return;
  }
  cuda::LaunchProjectOut(Out(RowsOf(x, row_begin, row_end - row_begin)),
                         row_end - row_begin, x.cols(), u.as<float>(), stream_);
  CheckLaunch("ProjectOut");
}

void CudaBackend::Rope(const Tensor& x, int64_t rotary_dim, float theta) {
  if (!sticky_.ok() ||
      !Require(x.shape.rank == 3 && x.shape[0] == layout_->view.num_tokens &&
                   rotary_dim % 2 == 0 && rotary_dim <= x.shape[2],
               "Rope: x [T, heads, head_dim] of the layout's T")) {
    return;
  }
  cuda::LaunchRope(Out(x), x.shape[0], x.shape[1], x.shape[2], rotary_dim,
                   theta, layout_->view, stream_);
  CheckLaunch("Rope");
}

void CudaBackend::CausalConv1dSilu(const Tensor& x, const Tensor& w,
                                   const Tensor& window_pool,
                                   const Tensor& out) {
  if (!sticky_.ok()) return;
  const int64_t channels = x.cols(), kernel = w.cols();
  if (!Require(x.rows() == layout_->view.num_tokens && w.rows() == channels &&
                   kernel >= 1 && kernel <= cuda::kMaxConvKernel &&
                   window_pool.shape.rank == 3 &&
                   window_pool.shape[1] == kernel - 1 &&
                   window_pool.shape[2] == channels,
               "CausalConv1dSilu: shapes (kernel ≤ 16)")) {
    return;
  }
  cuda::LaunchCausalConv1dSilu(In(x), channels, kernel, In(w),
                               Out(window_pool), Out(out), layout_->view,
                               stream_);
  CheckLaunch("CausalConv1dSilu");
}

void CudaBackend::GatedDeltaRule(const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& g,
                                 const Tensor& beta, const Tensor& state_pool,
                                 const Tensor& out) {
  if (!sticky_.ok()) return;
  const int64_t hk = q.shape[1], dk = q.shape[2];
  const int64_t hv = v.shape[1], dv = v.shape[2];
  if (!Require(q.shape.rank == 3 && k.shape == q.shape && v.shape.rank == 3 &&
                   q.shape[0] == layout_->view.num_tokens && hk > 0 &&
                   hv % hk == 0 && dk <= cuda::kMaxDeltaKeyDim &&
                   state_pool.type == ElementType::kF32 &&
                   state_pool.shape.rank == 4 && state_pool.shape[1] == hv &&
                   state_pool.shape[2] == dk && state_pool.shape[3] == dv,
               "GatedDeltaRule: shapes (key_dim ≤ 256, f32 state)")) {
    return;
  }
  // Straightforward: every sequence recurrent. Fast: decode steps by the
  // tiled recurrent kernel (it skips the chunked sequences), the rest by the
  // chunked kernels, in passes of at most chunks_per_pass chunks per
  // sequence so that the per-chunk intermediates stay within
  // delta_rule_workspace_bytes.
  const bool fast = !options_.straightforward_kernels;
  cuda::LaunchGatedDeltaRule(In(q), In(k), In(v), In(g), In(beta), hk, hv, dk,
                             dv, state_pool.as<float>(), Out(out),
                             /*tiled=*/fast, layout_->view, stream_);
  if (fast) {
    CheckLaunch("GatedDeltaRule (recurrent)");
    const int64_t chunked = layout_->view.num_chunked;
    if (chunked > 0) {
      const int64_t per_chunk =
          static_cast<int64_t>(cuda::DeltaChunkWorkspaceFloats(hv, dk, dv)) *
          static_cast<int64_t>(sizeof(float));
      const int64_t chunks_per_pass = std::clamp<int64_t>(
          static_cast<int64_t>(options_.delta_rule_workspace_bytes) /
              (chunked * per_chunk),
          1, max_delta_chunks_);
      float* workspace =
          Scratch(delta_rule_workspace_,
                  static_cast<size_t>(chunked * chunks_per_pass * per_chunk),
                  "the chunked delta rule's intermediates");
      if (workspace == nullptr) return;
      for (int64_t first = 0; first < max_delta_chunks_; first += chunks_per_pass) {
        cuda::LaunchGatedDeltaRuleChunked(
            In(q), In(k), In(v), In(g), In(beta), hk, hv, dk, dv,
            state_pool.as<float>(), Out(out), first, chunks_per_pass,
            workspace, layout_->view, stream_);
      }
    }
  }
  CheckLaunch("GatedDeltaRule");
}

void CudaBackend::GatedDeltaNet(const Tensor& conv_out, const Tensor& a,
                                const Tensor& b, const Tensor& a_log,
                                const Tensor& dt_bias, const GdnScratch& scratch,
                                const Tensor& state_pool, const Tensor& out) {
  if (!sticky_.ok()) return;
  if (options_.straightforward_kernels || layout_->view.num_chunked > 0) {
    Backend::GatedDeltaNet(conv_out, a, b, a_log, dt_bias, scratch, state_pool,
                           out);
    return;
  }
  const int64_t tokens = layout_->view.num_tokens;
  const int64_t hk = scratch.q.shape[1], dk = scratch.q.shape[2];
  const int64_t hv = scratch.v.shape[1], dv = scratch.v.shape[2];
  // The fused kernel gives the composition's bits (backend.h): q̂ and k̂
  // rounded to the scratch type, which must be the conv output's; the gates
  // kept in f32.
  if (!Require(scratch.q.shape.rank == 3 && scratch.v.shape.rank == 3 &&
                   scratch.q.type == conv_out.type &&
                   scratch.k.type == conv_out.type &&
                   scratch.g.type == ElementType::kF32 &&
                   scratch.beta.type == ElementType::kF32 &&
                   hk > 0 && hv % hk == 0 && dk <= cuda::kMaxDeltaKeyDim &&
                   conv_out.rows() == tokens &&
                   conv_out.cols() == 2 * hk * dk + hv * dv &&
                   a.num_elements() == tokens * hv &&
                   b.num_elements() == tokens * hv &&
                   a_log.num_elements() == hv && dt_bias.num_elements() == hv &&
                   out.num_elements() == tokens * hv * dv &&
                   state_pool.type == ElementType::kF32 &&
                   state_pool.shape.rank == 4 && state_pool.shape[1] == hv &&
                   state_pool.shape[2] == dk && state_pool.shape[3] == dv,
               "GatedDeltaNet: shapes (key_dim ≤ 256, f32 state)")) {
    return;
  }
  cuda::LaunchGatedDeltaNetDecode(In(conv_out), In(a), In(b), In(a_log),
                                  In(dt_bias), hk, hv, dk, dv,
                                  GdnQueryScale(dk), state_pool.as<float>(),
                                  Out(out), layout_->view, stream_);
  CheckLaunch("GatedDeltaNet (decode)");
}

void CudaBackend::WriteKv(const Tensor& k, const Tensor& v,
                          const Tensor& k_pool, const Tensor& v_pool) {
  if (!sticky_.ok()) return;
  if (!Require(k.shape.rank == 3 && v.shape == k.shape &&
                   k.shape[0] == layout_->view.num_tokens &&
                   k_pool.shape.rank == 4 && k_pool.shape == v_pool.shape &&
                   k_pool.shape[2] == k.shape[1] &&
                   k_pool.shape[3] == k.shape[2],
               "WriteKv: shapes")) {
    return;
  }
  cuda::LaunchWriteKv(In(k), In(v), k.shape[0], k.shape[1], k.shape[2],
                      Out(k_pool), Out(v_pool), k_pool.shape[1], layout_->view,
                      stream_);
  CheckLaunch("WriteKv");
}

void CudaBackend::AttentionInputs(const Tensor& q_and_gate, const Tensor& k,
                                  const Tensor& v, const Tensor& q_norm,
                                  const Tensor& k_norm, float eps,
                                  int64_t rotary_dim, float theta,
                                  const Tensor& q, const Tensor& gate,
                                  const Tensor& k_pool, const Tensor& v_pool) {
  if (!sticky_.ok()) return;
  if (options_.straightforward_kernels) {
    Backend::AttentionInputs(q_and_gate, k, v, q_norm, k_norm, eps, rotary_dim,
                             theta, q, gate, k_pool, v_pool);
    return;
  }
  const int64_t tokens = layout_->view.num_tokens;
  const int64_t heads = q.shape[1], kv_heads = k.shape[1], d = q.shape[2];
  if (!Require(q.shape.rank == 3 && q.shape[0] == tokens && gate.shape == q.shape &&
                   k.shape.rank == 3 && k.shape[0] == tokens && k.shape[2] == d &&
                   v.shape == k.shape &&
                   q_and_gate.num_elements() == 2 * q.num_elements() &&
                   q_norm.num_elements() == d && k_norm.num_elements() == d &&
                   d <= cuda::kMaxAttentionHeadDim && rotary_dim % 2 == 0 &&
                   rotary_dim >= 0 && rotary_dim <= d && k_pool.shape.rank == 4 &&
                   k_pool.shape == v_pool.shape && k_pool.shape[2] == kv_heads &&
                   k_pool.shape[3] == d,
               "AttentionInputs: shapes (head_dim ≤ 512)")) {
    return;
  }
  cuda::LaunchAttentionInputs(In(q_and_gate), In(k), In(v), In(q_norm),
                              In(k_norm), eps, tokens, heads, kv_heads, d,
                              rotary_dim, theta, Out(q), Out(gate), Out(k_pool),
                              Out(v_pool), k_pool.shape[1], layout_->view,
                              stream_);
  CheckLaunch("AttentionInputs");
}

void CudaBackend::PagedAttention(const Tensor& q, const Tensor& k_pool,
                                 const Tensor& v_pool, float scale,
                                 const Tensor& out) {
  if (!sticky_.ok()) return;
  const int64_t heads = q.shape[1], head_dim = q.shape[2];
  const int64_t kv_heads = k_pool.shape[2];
  if (!Require(q.shape.rank == 3 && q.shape[0] == layout_->view.num_tokens &&
                   k_pool.shape.rank == 4 && k_pool.shape[3] == head_dim &&
                   kv_heads > 0 && heads % kv_heads == 0 &&
                   head_dim <= cuda::kMaxAttentionHeadDim &&
                   out.num_elements() == q.num_elements(),
               "PagedAttention: shapes (head_dim ≤ 512)")) {
    return;
  }
  const int64_t tokens = q.shape[0];
  if (options_.straightforward_kernels ||
      head_dim > cuda::kSplitAttentionMaxHeadDim) {
    cuda::LaunchPagedAttention(In(q), tokens, heads, kv_heads, head_dim,
                               In(k_pool), In(v_pool), k_pool.shape[1], scale,
                               Out(out), layout_->view, stream_);
    CheckLaunch("PagedAttention");
    return;
  }
  if (tokens == 0) return;
  // The tensor-core kernels take bf16 throughout and heads of a multiple of
  // 16 dims up to kFlashMaxHeadDim (f32 activations, which check the maths
  // without bf16 rounding, and other heads take the CUDA-core split kernel).
  // Sequences of kFlashMinTokens new tokens or more go to the flash kernel;
  // the split kernel does the rest.
  const bool tensor_cores = activation_type() == ElementType::kBF16 &&
                            q.type == ElementType::kBF16 &&
                            k_pool.type == ElementType::kBF16 &&
                            v_pool.type == ElementType::kBF16 &&
                            out.type == ElementType::kBF16 &&
                            head_dim % 16 == 0 &&
                            head_dim <= cuda::kFlashMaxHeadDim;
  const bool flash = tensor_cores && layout_->view.num_flash_tiles > 0;
  if (flash) {
    cuda::LaunchFlashAttention(q.data, heads, kv_heads, head_dim, k_pool.data,
                               v_pool.data, k_pool.shape[1], scale, out.data,
                               layout_->view, stream_);
    CheckLaunch("PagedAttention (flash)");
  }
  const int64_t split_tokens = flash ? tokens_without_flash_ : tokens;
  const int64_t max_keys = flash ? max_keys_without_flash_ : max_keys_;
  if (split_tokens == 0) return;
  // Runs of keys: enough blocks to fill the multiprocessors (a decode step
  // of few sequences has few (row, KV head) pairs; the tensor-core form's
  // blocks are 2 warps, 4 a multiprocessor, the other's 4 warps, 2), but
  // runs of at least 64 keys, so that the merge stays small against the
  // run's own work. The run count is chosen for the context rounded up to
  // a power of two, so that the launches of a decode step change only when
  // the context doubles and its graph stays valid meanwhile (the blocks of
  // runs past a row's keys return at once); each row cuts its own keys into
  // that many runs of equal length (SplitRunKeys).
  int64_t keys_bucket = 64;
  while (keys_bucket < max_keys) keys_bucket *= 2;
  int64_t min_run_keys = options_.attention_run_keys;
  int64_t max_runs = 1;
  if (min_run_keys > 0) {
    max_runs = (std::max(keys_bucket, max_keys) + min_run_keys - 1) / min_run_keys;
  } else {
    min_run_keys = 64;
    const int64_t heads_per_block = tensor_cores ? cuda::kSplitAttentionMmaHeadsPerBlock
                                        : cuda::kSplitAttentionHeadsPerBlock;
    const int64_t pairs =
        split_tokens * cuda::SplitBlocksPerRow(heads, kv_heads, heads_per_block);
    // Rounded down: one full wave rather than a second one part filled
    // (batch 64 of the 27B: 2 runs, 512 blocks for 528 places, not 3).
    const int64_t blocks_wanted = (tensor_cores ? 4 : 2) * multiprocessors_;
    const int64_t runs_wanted = blocks_wanted / pairs;
    max_runs = std::min(runs_wanted, (keys_bucket + min_run_keys - 1) / min_run_keys);
  }
  max_runs = std::max<int64_t>(1, max_runs);
  if (!Require(max_runs <= 65535, "PagedAttention: more than 65535 runs of keys")) {
    return;
  }
  float* partial_stats = nullptr;
  float* partial_out = nullptr;
  if (max_runs > 1) {
    // Only the split kernel's rows: a long prefill chunk beside decodes
    // would otherwise reserve its 8k tokens' partials (gigabytes) unused.
    const int64_t slots = split_tokens * heads * max_runs;
    float* partials =
        Scratch(attention_partials_,
                static_cast<size_t>(slots * (2 + head_dim)) * sizeof(float),
                "the split attention's partial results");
    if (partials == nullptr) return;
    partial_stats = partials;
    partial_out = partials + 2 * slots;
  }
  if (tensor_cores) {
    cuda::LaunchSplitAttentionMma(q.data, split_tokens, heads, kv_heads, head_dim,
                                  k_pool.data, v_pool.data, k_pool.shape[1],
                                  scale, min_run_keys, max_runs, partial_stats,
                                  partial_out, out.data, flash, layout_->view,
                                  stream_);
  } else {
    cuda::LaunchSplitAttention(In(q), split_tokens, heads, kv_heads, head_dim,
                               In(k_pool), In(v_pool), k_pool.shape[1], scale,
                               min_run_keys, max_runs, partial_stats,
                               partial_out, Out(out), flash, layout_->view,
                               stream_);
  }
  cuda::LaunchMergeAttentionRuns(split_tokens, heads, head_dim, min_run_keys,
                                 max_runs, partial_stats, partial_out, Out(out),
                                 flash, layout_->view, stream_);
  CheckLaunch("PagedAttention");
}

}  // namespace tributary
