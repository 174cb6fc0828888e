// A CPU emulation of the subset of CUDA that the CUDA backend uses, so that
// the backend and its kernels (the very same sources, compiled as C++ with
// TRIBUTARY_CUDA_EMULATION) run and are tested on machines without a GPU.
//
// Device side: each block runs on one host thread, its CUDA threads as
// fibers (ucontext) switched at __syncthreads(), __syncwarp() and at warp
// shuffles, so a kernel's barriers, shared memory and shuffles behave as on
// the device. It checks what the hardware would leave undefined and stops
// with a message: a barrier some live thread never reaches (divergent
// __syncthreads, which hangs a GPU), a shuffle or __syncwarp with a mask
// other than the full warp or with an exited lane. It cannot show races
// the GPU's memory model allows (threads run one at a time) nor timing.
//
// Host side: device memory is host memory; cudaMalloc, cudaMemcpy(Async),
// cudaMemset(Async), streams (everything runs at once, in order), errors,
// device properties ("CPU emulation"), and cublasGemmEx (column-major, as
// cuBLAS defines it, f32 accumulation).
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_EMULATION_CUDA_EMULATION_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_EMULATION_CUDA_EMULATION_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend/element_type.h"

// --- Device-side language ------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block at a time per host thread: a function-local static per thread
// is the block's shared memory.
#define __shared__ static thread_local

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace tributary {
namespace cuda_emulation {
// The coordinates of the CUDA thread now running on this host thread.
extern thread_local uint3 thread_idx;
extern thread_local uint3 block_idx;
extern thread_local dim3 block_dim;
extern thread_local dim3 grid_dim;

void SyncThreads();
// __syncwarp(mask): a barrier of the warp's lanes (the full warp only).
void SyncWarp(unsigned mask);
// Exchanges 8 bytes with lane (this lane ^ lane_mask) of the warp.
uint64_t ShuffleXor(unsigned mask, uint64_t bits, int lane_mask);
// A full-warp exchange: every lane publishes `bytes` (at most
// kWarpGatherBytes, the same in every lane) from `mine`; lane l's bytes are
// then at the result + l · bytes, until this lane's next warp exchange
// (shuffle or gather), so lanes read only what they need, uncopied. The
// warp-collective instructions (mma.sync) are built on it.
constexpr size_t kWarpGatherBytes = 64;
const void* WarpAllGather(const void* mine, size_t bytes);
// Stops with a message when `p` is not 16-byte aligned: a vector access the
// device would fault on (a misaligned address).
void CheckAligned16(const void* p);
// Runs body() as every thread of every block of the grid, in order.
void RunGrid(dim3 grid, dim3 block, const std::function<void()>& body);

template <typename... Params>
struct Launcher {
  void (*kernel)(Params...);
  dim3 grid, block;
  template <typename... Args>
  void operator()(Args&&... args) const {
    auto bound = [k = kernel, tuple = std::make_tuple(Params(args)...)]() {
      std::apply(k, tuple);
    };
    RunGrid(grid, block, bound);
  }
};
}  // namespace cuda_emulation
}  // namespace tributary

#define threadIdx (::tributary::cuda_emulation::thread_idx)
#define blockIdx (::tributary::cuda_emulation::block_idx)
#define blockDim (::tributary::cuda_emulation::block_dim)
#define gridDim (::tributary::cuda_emulation::grid_dim)

inline void __syncthreads() { ::tributary::cuda_emulation::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::tributary::cuda_emulation::SyncWarp(mask);
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  static_assert(sizeof(T) <= 8, "shuffles of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = ::tributary::cuda_emulation::ShuffleXor(mask, bits, lane_mask);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline int atomicOr(int* address, int value) {
  return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST);
}
inline int atomicAdd(int* address, int value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline unsigned __float_as_uint(float x) {
  unsigned bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}
inline float __uint_as_float(unsigned bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}
using std::isfinite;

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  return ::tributary::Bf16ToF32(h.bits);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{::tributary::F32ToBf16(f)};
}
inline float __half2float(__half h) { return ::tributary::F16ToF32(h.bits); }
inline __half __float2half_rn(float f) {
  return __half{::tributary::F32ToF16(f)};
}

// --- Runtime API ---------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorAssert = 710,
  cudaErrorECCUncorrectable = 214,
  cudaErrorLaunchTimeout = 702,
  cudaErrorContextIsDestroyed = 709,
  cudaErrorDevicesUnavailable = 46,
  cudaErrorInitializationError = 3,
  cudaErrorSystemDriverMismatch = 803,
  cudaErrorCompatNotSupportedOnDevice = 804,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
constexpr unsigned cudaStreamNonBlocking = 1;
typedef struct CUstream_st* cudaStream_t;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int l2CacheSize;  // bytes
};

const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes,
                            cudaStream_t stream);

// Stream capture and graphs: while a stream captures, launches, memsets,
// copies and GEMMs are recorded instead of run (synchronous calls fail with
// cudaErrorStreamCaptureUnsupported); a graph launch runs them in order.
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUgraph_st* cudaGraph_t;
typedef CUgraphExec_st* cudaGraphExec_t;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
namespace tributary {
namespace cuda_emulation {
// The work recorded by the capture in progress on this thread, or null.
std::vector<std::function<void()>>*& CaptureList();
}  // namespace cuda_emulation
}  // namespace tributary

// --- cuBLAS --------------------------------------------------------------------
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16F = 2,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
};
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
typedef struct cublasContext* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace,
                                  size_t bytes);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
// C = alpha · op(A) · op(B) + beta · C, column-major, op(A) [m, k],
// op(B) [k, n], C [m, n]; f32 accumulation whatever the types.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* A,
                            cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta,
                            void* C, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

// --- Events ------------------------------------------------------------------
// An event records the emulated device's clock, which only the products'
// set durations advance (SetLtAlgorithmDelays): nothing else the emulation
// runs has a device time, so what events measure is deterministic. Not
// inside a capture (the backend times nothing there).
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

// --- cuBLASLt ------------------------------------------------------------------
// The descriptors hold what the emulated product reads; the heuristic offers
// kEmulatedLtAlgorithms algorithms (data[0] = 0, 1, …), which all compute as
// cublasGemmEx does (their speeds differ only as SetLtAlgorithmDelays says).
typedef struct cublasLtContext* cublasLtHandle_t;
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale_type;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
};
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void* buf, size_t bytes);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned);
// Whether `algo` (one the heuristic offered) runs the product the
// descriptors describe; result->workspaceSize is what it needs.
cublasStatus_t cublasLtMatmulAlgoCheck(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result);
// D = alpha · op(A) · op(B) + beta · C (C and D the same matrix here), on
// the stream (recorded while it captures).
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_layout, const void* B,
                              cublasLtMatrixLayout_t b_layout, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c_layout,
                              void* D, cublasLtMatrixLayout_t d_layout,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

namespace tributary {
namespace cuda_emulation {
constexpr int kEmulatedLtAlgorithms = 4;
// How long each emulated product takes on the emulated device's clock (what
// events read), in seconds: cublasGemmEx's, and that of each of the
// kEmulatedLtAlgorithms (missing ones: none). For the tests of a tuner that
// times them. All zero again after ResetLtAlgorithmDelays().
void SetLtAlgorithmDelays(double gemm_ex_seconds,
                          const std::vector<double>& lt_seconds);
void ResetLtAlgorithmDelays();
// How many cublasLtMatmul products have run (issued or replayed from a
// graph) since the process started: which path a product took.
int64_t LtMatmulsRun();
// Puts the emulated device in the state a sticky error (an illegal address,
// say) leaves a real one in: every later runtime call and launch fails with
// `error`, until ClearStickyError() (which a real process cannot do: there,
// only a restart helps). For the tests of the backend's error handling.
void InjectStickyError(cudaError_t error);
void ClearStickyError();
// The next `count` cublasGemmEx and cublasLtMatmul calls (captured or not) return
// CUBLAS_STATUS_NOT_SUPPORTED and do nothing, as cuBLAS may for a product
// it declines. For the tests of a capture whose work fails.
void FailNextGemms(int count);

template <typename... Params, typename Grid, typename Block>
Launcher<Params...> Launch(void (*kernel)(Params...), Grid grid, Block block,
                           cudaStream_t /*stream*/) {
  return Launcher<Params...>{kernel, dim3(grid), dim3(block)};
}
}  // namespace cuda_emulation
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_EMULATION_CUDA_EMULATION_H_
