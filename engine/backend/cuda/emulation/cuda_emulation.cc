#include "engine/backend/cuda/emulation/cuda_emulation.h"

#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Switching fibers is the emulation's inner loop (every barrier and every
// shuffle switches each thread twice), so on x86-64 it is a dozen
// instructions that save the callee-saved registers and swap stack
// pointers, instead of swapcontext, which also makes a signal-mask system
// call each time. Elsewhere, ucontext.
#if defined(__x86_64__)
#define TRIBUTARY_EMULATION_FAST_SWITCH 1
extern "C" void tributary_emulation_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl tributary_emulation_switch
  .type tributary_emulation_switch, @function
tributary_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tributary_emulation_switch, .-tributary_emulation_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#else
#define TRIBUTARY_EMULATION_FAST_SWITCH 0
#endif

// Under AddressSanitizer the switches tell it which stack runs
// (__sanitizer_start/finish_switch_fiber), so that the kernels' device
// memory, which is host memory, is checked as any other (x86-64's switch
// only: the sanitizer build runs the emulated tests there).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIBUTARY_EMULATION_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TRIBUTARY_EMULATION_ASAN)
#define TRIBUTARY_EMULATION_ASAN 1
#endif
#if !defined(TRIBUTARY_EMULATION_ASAN)
#define TRIBUTARY_EMULATION_ASAN 0
#endif
#if TRIBUTARY_EMULATION_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

// The runtime's error state (defined below, with the runtime API).
cudaError_t ContextError();
void SetLastError(cudaError_t error);

namespace tributary {
namespace cuda_emulation {

thread_local uint3 thread_idx;
thread_local uint3 block_idx;
thread_local dim3 block_dim;
thread_local dim3 grid_dim;

namespace {

constexpr int kWarp = 32;
constexpr size_t kFiberStackBytes = size_t{128} << 10;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s (block %u,%u,%u thread %u,%u,%u)\n",
               what, block_idx.x, block_idx.y, block_idx.z, thread_idx.x,
               thread_idx.y, thread_idx.z);
  std::abort();
}

// Threads that wait at one barrier: all of a block's, or a warp's.
struct Group {
  int live = 0;     // members that have not exited
  int arrived = 0;  // members waiting at the current barrier
  uint64_t generation = 0;

  void ReleaseIfComplete() {
    if (arrived > 0 && arrived == live) {
      arrived = 0;
      ++generation;
    }
  }
};

struct Fiber {
#if TRIBUTARY_EMULATION_FAST_SWITCH
  void* sp = nullptr;  // its saved stack pointer while switched out
#else
  ucontext_t context;
#endif
  uint3 thread;
  int warp = 0;
  int lane = 0;
  bool done = false;
  void* stack_bottom = nullptr;  // its stack [bottom, bottom + kFiberStackBytes)
  void* asan_fake_stack = nullptr;  // AddressSanitizer's, while switched out
  Group* waiting_on = nullptr;  // the barrier it waits at, if any
  uint64_t waiting_generation = 0;
  // Warp exchanges (shuffles, gathers) so far: their slots alternate
  // between two halves by its parity (NextExchange).
  uint64_t exchanges = 0;
};

// One block being run: its fibers, the scheduler's context, the barriers.
struct BlockRun {
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
#if TRIBUTARY_EMULATION_FAST_SWITCH
  void* scheduler_sp = nullptr;
  // The scheduler's (the host thread's) stack, as AddressSanitizer gives it.
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_bytes = 0;
#else
  ucontext_t scheduler;
#endif
  int current = 0;
  Group block;
  std::vector<Group> warps;
  // The warp exchanges' slots, in two halves (NextExchange): per thread a
  // shuffle's 8 bytes, a gather's kWarpGatherBytes, and the number of the
  // exchange it last wrote (1 for its first), which tells whether a partner
  // took part in this exchange or exited instead.
  std::vector<uint64_t> slots;
  std::vector<unsigned char> gather;
  std::vector<uint64_t> stamps;
};

thread_local BlockRun* running = nullptr;

// Entering or re-entering fiber f's stack (AddressSanitizer's half).
void EnteredFiber(BlockRun& b, Fiber& f) {
#if TRIBUTARY_EMULATION_ASAN && TRIBUTARY_EMULATION_FAST_SWITCH
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, &b.scheduler_stack_bottom,
                                  &b.scheduler_stack_bytes);
#else
  (void)b;
  (void)f;
#endif
}

// From the running fiber back to the scheduler, and from the scheduler into
// fiber i.
void ToScheduler(BlockRun& b) {
  Fiber& f = b.fibers[b.current];
#if TRIBUTARY_EMULATION_FAST_SWITCH
#if TRIBUTARY_EMULATION_ASAN
  // A finished fiber's fake stack is released (it is never resumed).
  __sanitizer_start_switch_fiber(f.done ? nullptr : &f.asan_fake_stack,
                                 b.scheduler_stack_bottom,
                                 b.scheduler_stack_bytes);
#endif
  tributary_emulation_switch(&f.sp, b.scheduler_sp);
  EnteredFiber(b, f);
#else
  swapcontext(&f.context, &b.scheduler);
#endif
}

void ToFiber(BlockRun& b, int i) {
#if TRIBUTARY_EMULATION_FAST_SWITCH
#if TRIBUTARY_EMULATION_ASAN
  void* scheduler_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake_stack, b.fibers[i].stack_bottom,
                                 kFiberStackBytes);
#endif
  tributary_emulation_switch(&b.scheduler_sp, b.fibers[i].sp);
#if TRIBUTARY_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
#else
  swapcontext(&b.scheduler, &b.fibers[i].context);
#endif
}

void Wait(Group& group) {
  BlockRun& b = *running;
  Fiber& f = b.fibers[b.current];
  const uint64_t generation = group.generation;
  ++group.arrived;
  group.ReleaseIfComplete();
  while (group.generation == generation) {
    f.waiting_on = &group;
    f.waiting_generation = generation;
    ToScheduler(b);
  }
  f.waiting_on = nullptr;
}

void FiberMain() {
  BlockRun& b = *running;
  EnteredFiber(b, b.fibers[b.current]);
  (*b.body)();
  Fiber& f = b.fibers[b.current];
  f.done = true;
  --b.block.live;
  b.block.ReleaseIfComplete();
  Group& warp = b.warps[f.warp];
  --warp.live;
  warp.ReleaseIfComplete();
#if TRIBUTARY_EMULATION_FAST_SWITCH
  ToScheduler(b);  // never resumed
  Fail("a finished fiber was resumed");
#endif
  // With ucontext, returning resumes uc_link: the scheduler.
}

void RunBlock(BlockRun& b, int num_threads) {
  static thread_local std::vector<std::unique_ptr<char[]>> stacks;
  while (static_cast<int>(stacks.size()) < num_threads) {
    stacks.push_back(std::make_unique<char[]>(kFiberStackBytes));
  }
  const int num_warps = (num_threads + kWarp - 1) / kWarp;
  b.fibers.assign(static_cast<size_t>(num_threads), Fiber{});
  b.block = Group{num_threads, 0, 0};
  b.warps.assign(static_cast<size_t>(num_warps), Group{});
  b.slots.assign(2 * static_cast<size_t>(num_threads), 0);
  b.gather.assign(2 * static_cast<size_t>(num_threads) * kWarpGatherBytes, 0);
  b.stamps.assign(2 * static_cast<size_t>(num_threads), 0);
  for (int i = 0; i < num_threads; ++i) {
    Fiber& f = b.fibers[i];
    f.thread.x = static_cast<unsigned>(i) % block_dim.x;
    f.thread.y = (static_cast<unsigned>(i) / block_dim.x) % block_dim.y;
    f.thread.z = static_cast<unsigned>(i) / (block_dim.x * block_dim.y);
    f.warp = i / kWarp;
    f.lane = i % kWarp;
    f.stack_bottom = stacks[i].get();
    ++b.warps[f.warp].live;
#if TRIBUTARY_EMULATION_FAST_SWITCH
    // A stack that the switch's six pops and its `ret` enter FiberMain
    // from, 16-byte aligned as at a call (rsp ≡ 8 mod 16 at entry).
    uintptr_t top = reinterpret_cast<uintptr_t>(stacks[i].get()) + kFiberStackBytes;
    top &= ~uintptr_t{15};
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                                  // FiberMain's return slot
    *--sp = reinterpret_cast<void*>(&FiberMain);      // popped by `ret`
    for (int r = 0; r < 6; ++r) *--sp = nullptr;      // rbp rbx r12–r15
    f.sp = sp;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stacks[i].get();
    f.context.uc_stack.ss_size = kFiberStackBytes;
    f.context.uc_link = &b.scheduler;
    makecontext(&f.context, &FiberMain, 0);
#endif
  }
  // Threads run between barriers one at a time, in index order, or in the
  // reverse order with TRIBUTARY_EMULATION_REVERSE_THREADS set: a race that
  // one order hides (thread 0 writes shared memory, the others read it with
  // no barrier between) the other shows. A test runs the kernels both ways.
  static const bool reverse =
      std::getenv("TRIBUTARY_EMULATION_REVERSE_THREADS") != nullptr;
  int remaining = num_threads;
  while (remaining > 0) {
    bool progress = false;
    for (int k = 0; k < num_threads; ++k) {
      const int i = reverse ? num_threads - 1 - k : k;
      Fiber& f = b.fibers[i];
      if (f.done) continue;
      if (f.waiting_on != nullptr &&
          f.waiting_on->generation == f.waiting_generation) {
        continue;  // still blocked
      }
      b.current = i;
      thread_idx = f.thread;
      ToFiber(b, i);
      progress = true;
      if (f.done) --remaining;
    }
    if (!progress) {
      Fail("deadlock: a barrier that some live thread of the block never "
           "reaches (__syncthreads or a shuffle in divergent code)");
    }
  }
}

}  // namespace

void SyncThreads() {
  if (running == nullptr) Fail("__syncthreads outside a kernel");
  Wait(running->block);
}

namespace {

// The running block of a warp-collective operation (`what`), after the
// checks the hardware leaves undefined: inside a kernel, the full mask, no
// exited lane.
BlockRun& FullWarp(const std::string& what, unsigned mask) {
  if (running == nullptr) Fail((what + " outside a kernel").c_str());
  BlockRun& b = *running;
  const Fiber& f = b.fibers[b.current];
  if (mask != 0xffffffffu) {
    Fail(("a " + what + " mask other than the full warp").c_str());
  }
  if (b.warps[f.warp].live != kWarp) {
    Fail(("a full-warp " + what + " in a warp with exited or missing lanes").c_str());
  }
  return b;
}

}  // namespace

void SyncWarp(unsigned mask) {
  BlockRun& b = FullWarp("__syncwarp", mask);
  Wait(b.warps[b.fibers[b.current].warp]);
}

// The running lane's next warp exchange: its number (from 1) and which half
// of the slots it uses. The halves alternate, so an exchange needs one warp
// barrier, not two: a lane writes a half again only two exchanges later,
// after the barrier of the exchange between, which no lane passes before
// every live lane of the warp has arrived there, that is, has read the half.
// (With one half, a second barrier had to keep a fast lane from overwriting
// a slot not yet read: half the fiber switches of every mma.sync.)
struct Exchange {
  uint64_t number;
  int half;  // 0 or 1
};
Exchange NextExchange(Fiber& f) {
  const uint64_t number = ++f.exchanges;
  return {number, static_cast<int>(number % 2)};
}

// Stops with `what` when lane `thread` (a block-wide index) did not write
// exchange `e`'s slot: it exited instead of taking part.
void CheckTookPart(const BlockRun& b, const Exchange& e, int thread,
                   const char* what) {
  const size_t threads = b.fibers.size();
  if (b.stamps[e.half * threads + static_cast<size_t>(thread)] != e.number) {
    Fail(what);
  }
}

uint64_t ShuffleXor(unsigned mask, uint64_t bits, int lane_mask) {
  BlockRun& b = FullWarp("shuffle", mask);
  Fiber& f = b.fibers[b.current];
  const Exchange e = NextExchange(f);
  const size_t half = static_cast<size_t>(e.half) * b.fibers.size();
  const int base = f.warp * kWarp;
  b.slots[half + base + f.lane] = bits;
  b.stamps[half + base + f.lane] = e.number;
  Wait(b.warps[f.warp]);
  const int partner = base + (f.lane ^ (lane_mask & (kWarp - 1)));
  CheckTookPart(b, e, partner, "a shuffle with an exited lane");
  return b.slots[half + partner];
}

void CheckAligned16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    Fail("a 16-byte vector access at an address that is not 16-byte aligned");
  }
}

const void* WarpAllGather(const void* mine, size_t bytes) {
  BlockRun& b = FullWarp("warp-collective instruction", 0xffffffffu);
  if (bytes > kWarpGatherBytes) Fail("a warp gather of too many bytes");
  Fiber& f = b.fibers[b.current];
  const Exchange e = NextExchange(f);
  const size_t threads = b.fibers.size();
  const int base = f.warp * kWarp;
  // The warp's slots packed at `bytes` apart, read in place: copying all 32
  // into every lane costs a quarter of an emulated engine step.
  unsigned char* warp_slots =
      &b.gather[(static_cast<size_t>(e.half) * threads +
                 static_cast<size_t>(base)) * kWarpGatherBytes];
  std::memcpy(warp_slots + static_cast<size_t>(f.lane) * bytes, mine, bytes);
  b.stamps[static_cast<size_t>(e.half) * threads + base + f.lane] = e.number;
  Wait(b.warps[f.warp]);
  for (int l = 0; l < kWarp; ++l) {
    CheckTookPart(b, e, base + l, "a warp-collective instruction with an exited lane");
  }
  return warp_slots;
}

std::vector<std::function<void()>>*& CaptureList() {
  static thread_local std::vector<std::function<void()>>* list = nullptr;
  return list;
}

void RunGrid(dim3 grid, dim3 block, const std::function<void()>& body) {
  if (CaptureList() != nullptr) {
    CaptureList()->push_back([grid, block, body] { RunGrid(grid, block, body); });
    return;
  }
  if (ContextError() != cudaSuccess) {
    SetLastError(ContextError());  // a dead context runs nothing
    return;
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64) {
    Fail("invalid block size");
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535) {
    Fail("invalid grid size");
  }
  BlockRun* outer = running;
  BlockRun b;
  b.body = &body;
  running = &b;
  grid_dim = grid;
  block_dim = block;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        block_idx = uint3{x, y, z};
        RunBlock(b, static_cast<int>(threads));
      }
    }
  }
  running = outer;
}

}  // namespace cuda_emulation
}  // namespace tributary

// --- Runtime API ---------------------------------------------------------------
namespace {
thread_local cudaError_t last_error = cudaSuccess;
// A sticky error: once set, every call fails with it (InjectStickyError).
std::atomic<int> context_error{cudaSuccess};
// Allocations above this fail as out of memory (a real device's limit, and
// what the out-of-memory test asks for).
constexpr size_t kEmulatedMemoryBytes = size_t{64} << 30;
// cublasGemmEx and cublasLtMatmul calls still to fail (FailNextGemms).
std::atomic<int> gemms_to_fail{0};
// SetLtAlgorithmDelays: the extra seconds of each emulated product.
std::mutex delays_mutex;
double gemm_ex_delay_seconds = 0.0;
std::vector<double> lt_delay_seconds;
// The emulated device's clock (what events read), in nanoseconds.
std::atomic<int64_t> device_clock_ns{0};
std::atomic<int64_t> lt_matmuls_run{0};

cudaError_t Record(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}
}  // namespace

cudaError_t ContextError() {
  return static_cast<cudaError_t>(context_error.load());
}
void SetLastError(cudaError_t error) { last_error = error; }

namespace tributary {
namespace cuda_emulation {
void InjectStickyError(cudaError_t error) {
  context_error = error;
  last_error = error;
}
void ClearStickyError() {
  context_error = cudaSuccess;
  last_error = cudaSuccess;
}
void FailNextGemms(int count) { gemms_to_fail = count; }
void SetLtAlgorithmDelays(double gemm_ex_seconds,
                          const std::vector<double>& lt_seconds) {
  std::lock_guard<std::mutex> lock(delays_mutex);
  gemm_ex_delay_seconds = gemm_ex_seconds;
  lt_delay_seconds = lt_seconds;
}
void ResetLtAlgorithmDelays() { SetLtAlgorithmDelays(0.0, {}); }
int64_t LtMatmulsRun() { return lt_matmuls_run.load(); }
}  // namespace cuda_emulation
}  // namespace tributary

// Every call but the error queries fails once the context is dead.
#define RETURN_IF_CONTEXT_DEAD()                            \
  do {                                                      \
    if (ContextError() != cudaSuccess) return Record(ContextError()); \
  } while (0)

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaError";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    default: return "an emulated CUDA error";
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = ContextError();  // a sticky error stays
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  RETURN_IF_CONTEXT_DEAD();
  return Record(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  RETURN_IF_CONTEXT_DEAD();
  if (device != 0) return Record(cudaErrorInvalidDevice);
  std::snprintf(prop->name, sizeof prop->name, "CPU emulation");
  prop->totalGlobalMem = kEmulatedMemoryBytes;
  prop->major = 9;
  prop->minor = 0;
  // An H200's, so that launch shapes chosen from it (the split attention's
  // runs) are the device's.
  prop->multiProcessorCount = 132;
  // Not an H200's 50 MB: what the GEMM tuner writes twice over between its
  // timed runs, kept small so that it stays cheap here.
  prop->l2CacheSize = 256 << 10;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned /*flags*/) {
  RETURN_IF_CONTEXT_DEAD();
  static int dummy;
  *stream = reinterpret_cast<cudaStream_t>(&dummy);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  RETURN_IF_CONTEXT_DEAD();
  if (tributary::cuda_emulation::CaptureList() != nullptr) {
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() {
  RETURN_IF_CONTEXT_DEAD();
  if (tributary::cuda_emulation::CaptureList() != nullptr) {
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  RETURN_IF_CONTEXT_DEAD();
  *pointer = nullptr;
  if (bytes > kEmulatedMemoryBytes) return Record(cudaErrorMemoryAllocation);
  // 256-byte alignment, as cudaMalloc guarantees.
  const size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (p == nullptr) return Record(cudaErrorMemoryAllocation);
  *pointer = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind) {
  RETURN_IF_CONTEXT_DEAD();
  if (tributary::cuda_emulation::CaptureList() != nullptr) {
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (auto* list = tributary::cuda_emulation::CaptureList()) {
    list->push_back([=] { cudaMemcpyAsync(dst, src, bytes, kind, stream); });
    return cudaSuccess;
  }
  RETURN_IF_CONTEXT_DEAD();
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes,
                            cudaStream_t stream) {
  if (auto* list = tributary::cuda_emulation::CaptureList()) {
    list->push_back([=] { cudaMemsetAsync(pointer, value, bytes, stream); });
    return cudaSuccess;
  }
  RETURN_IF_CONTEXT_DEAD();
  if (bytes > 0) std::memset(pointer, value, bytes);
  return cudaSuccess;
}

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  RETURN_IF_CONTEXT_DEAD();
  auto*& list = tributary::cuda_emulation::CaptureList();
  if (list != nullptr) return Record(cudaErrorStreamCaptureUnsupported);
  list = new std::vector<std::function<void()>>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  auto*& list = tributary::cuda_emulation::CaptureList();
  if (list == nullptr) return Record(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{std::move(*list)};
  delete list;
  list = nullptr;
  RETURN_IF_CONTEXT_DEAD();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long) {
  RETURN_IF_CONTEXT_DEAD();
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  RETURN_IF_CONTEXT_DEAD();
  if (tributary::cuda_emulation::CaptureList() != nullptr) {
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  for (const auto& work : exec->work) work();
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

// --- cuBLAS --------------------------------------------------------------------
struct cublasContext {};

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
                                         : "CUBLAS_STATUS_ERROR";
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "an emulated cuBLAS error";
}

namespace {
bool ToElementType(cudaDataType_t type, tributary::ElementType* out) {
  switch (type) {
    case CUDA_R_32F: *out = tributary::ElementType::kF32; return true;
    case CUDA_R_16F: *out = tributary::ElementType::kF16; return true;
    case CUDA_R_16BF: *out = tributary::ElementType::kBF16; return true;
    default: return false;
  }
}
cublasStatus_t EmulatedGemm(cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda,
                            const void* B, cudaDataType_t b_type, int ldb,
                            const void* beta, void* C, cudaDataType_t c_type,
                            int ldc, cublasComputeType_t compute,
                            double delay_seconds);
}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* A,
                            cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta,
                            void* C, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (gemms_to_fail.load() > 0) {
    gemms_to_fail.fetch_sub(1);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (auto* list = tributary::cuda_emulation::CaptureList()) {
    // As cuBLAS in host pointer mode: α and β are read now.
    const float alpha_value = *static_cast<const float*>(alpha);
    const float beta_value = *static_cast<const float*>(beta);
    list->push_back([=] {
      cublasGemmEx(handle, transa, transb, m, n, k, &alpha_value, A, a_type,
                   lda, B, b_type, ldb, &beta_value, C, c_type, ldc, compute,
                   CUBLAS_GEMM_DEFAULT);
    });
    return CUBLAS_STATUS_SUCCESS;
  }
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  double delay;
  {
    std::lock_guard<std::mutex> lock(delays_mutex);
    delay = gemm_ex_delay_seconds;
  }
  return EmulatedGemm(transa, transb, m, n, k, alpha, A, a_type, lda, B, b_type,
                      ldb, beta, C, c_type, ldc, compute, delay);
}

namespace {
// The arithmetic of both cuBLAS entry points, taking `delay_seconds` of the
// device's clock (SetLtAlgorithmDelays).
cublasStatus_t EmulatedGemm(cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda,
                            const void* B, cudaDataType_t b_type, int ldb,
                            const void* beta, void* C, cudaDataType_t c_type,
                            int ldc, cublasComputeType_t compute,
                            double delay_seconds) {
  using tributary::ElementType;
  ElementType at, bt, ct;
  if (ContextError() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!ToElementType(a_type, &at) || !ToElementType(b_type, &bt) ||
      !ToElementType(c_type, &ct) || compute != CUBLAS_COMPUTE_32F ||
      at != bt) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (m < 0 || n < 0 || k < 0 || lda < (transa == CUBLAS_OP_N ? m : k) ||
      ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  device_clock_ns += static_cast<int64_t>(delay_seconds * 1e9);
  const float a_scale = *static_cast<const float*>(alpha);
  const float c_scale = *static_cast<const float*>(beta);
  // op(A) as f32 rows [m][k] and op(B) as f32 columns [n][k], widened once,
  // so that each C(i, j) is a dot product of two contiguous rows. Element
  // (i, j) of a column-major matrix with leading dimension ld is at
  // i + j · ld; op(A)(i, p) is A(i, p) or A(p, i).
  std::vector<float> a_rows(static_cast<size_t>(m) * k), b_cols(static_cast<size_t>(n) * k);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      const size_t ai = transa == CUBLAS_OP_N
                            ? static_cast<size_t>(i) + static_cast<size_t>(p) * lda
                            : static_cast<size_t>(p) + static_cast<size_t>(i) * lda;
      a_rows[static_cast<size_t>(i) * k + p] = tributary::LoadAsF32(A, at, ai);
    }
  }
  for (int j = 0; j < n; ++j) {
    for (int p = 0; p < k; ++p) {
      const size_t bi = transb == CUBLAS_OP_N
                            ? static_cast<size_t>(p) + static_cast<size_t>(j) * ldb
                            : static_cast<size_t>(j) + static_cast<size_t>(p) * ldb;
      b_cols[static_cast<size_t>(j) * k + p] = tributary::LoadAsF32(B, bt, bi);
    }
  }
  for (int j = 0; j < n; ++j) {
    const float* bj = b_cols.data() + static_cast<size_t>(j) * k;
    for (int i = 0; i < m; ++i) {
      const float* ai = a_rows.data() + static_cast<size_t>(i) * k;
      float sum = 0.0f;
      for (int p = 0; p < k; ++p) sum += ai[p] * bj[p];
      const size_t ci = static_cast<size_t>(i) + static_cast<size_t>(j) * ldc;
      const float old = c_scale == 0.0f ? 0.0f : tributary::LoadAsF32(C, ct, ci);
      tributary::StoreFromF32(C, ct, ci, a_scale * sum + c_scale * old);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

// --- Events --------------------------------------------------------------------
struct CUevent_st {
  int64_t at_ns = 0;  // the device's clock
  bool recorded = false;
};

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  RETURN_IF_CONTEXT_DEAD();
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  RETURN_IF_CONTEXT_DEAD();
  if (tributary::cuda_emulation::CaptureList() != nullptr) {
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  event->at_ns = device_clock_ns.load();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) {
  RETURN_IF_CONTEXT_DEAD();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  RETURN_IF_CONTEXT_DEAD();
  if (!start->recorded || !end->recorded) return Record(cudaErrorInvalidValue);
  *ms = static_cast<float>(static_cast<double>(end->at_ns - start->at_ns) / 1e6);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

// --- cuBLASLt ------------------------------------------------------------------
struct cublasLtContext {};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  *desc = new cublasLtMatmulDescOpaque_t{compute, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  // The transposes are int32 attributes (cublasLt.h).
  if (bytes != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t value;
  std::memcpy(&value, buf, sizeof value);
  if (value != CUBLAS_OP_N && value != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      desc->transa = static_cast<cublasOperation_t>(value);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      desc->transb = static_cast<cublasOperation_t>(value);
      return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < 0 || (rows > 0 && static_cast<uint64_t>(ld) < rows)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void* buf, size_t bytes) {
  // The workspace limit is a uint64 attribute, the alignments uint32
  // (cublasLt.h).
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      if (bytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&pref->max_workspace_bytes, buf, sizeof(uint64_t));
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                  buf, sizeof(uint32_t));
      return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

namespace {
// The product's dimensions from its descriptors, as cuBLASLt reads them:
// op(A) [m, k], op(B) [k, n], C and D [m, n], column-major.
bool LtDims(const cublasLtMatmulDescOpaque_t& desc,
            const cublasLtMatrixLayoutOpaque_t& a,
            const cublasLtMatrixLayoutOpaque_t& b,
            const cublasLtMatrixLayoutOpaque_t& c,
            const cublasLtMatrixLayoutOpaque_t& d, int* m, int* n, int* k) {
  const uint64_t am = desc.transa == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t ak = desc.transa == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t bk = desc.transb == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t bn = desc.transb == CUBLAS_OP_N ? b.cols : b.rows;
  if (ak != bk || d.rows != am || d.cols != bn || c.rows != d.rows ||
      c.cols != d.cols || c.ld != d.ld || c.type != d.type || a.type != b.type ||
      am > INT32_MAX || bn > INT32_MAX || ak > INT32_MAX) {
    return false;
  }
  *m = static_cast<int>(am);
  *n = static_cast<int>(bn);
  *k = static_cast<int>(ak);
  return true;
}
}  // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  int m, n, k;
  if (!LtDims(*desc, *a, *b, *c, *d, &m, &n, &k) ||
      desc->compute != CUBLAS_COMPUTE_32F || desc->scale_type != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *returned = std::min(requested, tributary::cuda_emulation::kEmulatedLtAlgorithms);
  for (int i = 0; i < *returned; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].algo.data[0] = static_cast<uint64_t>(i);
    // The alignments the algorithm was chosen for: A, B and D (as a real
    // algorithm may need the alignment the preference promised).
    results[i].algo.data[1] = pref->min_alignment[0];
    results[i].algo.data[2] = pref->min_alignment[1];
    results[i].algo.data[3] = pref->min_alignment[3];
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || result == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int m, n, k;
  if (!LtDims(*desc, *a, *b, *c, *d, &m, &n, &k) ||
      algo->data[0] >= static_cast<uint64_t>(tributary::cuda_emulation::kEmulatedLtAlgorithms)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const cublasLtMatmulAlgo_t checked = *algo;  // algo may point into result
  *result = cublasLtMatmulHeuristicResult_t{};
  result->algo = checked;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_layout, const void* B,
                              cublasLtMatrixLayout_t b_layout, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c_layout,
                              void* D, cublasLtMatrixLayout_t d_layout,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (gemms_to_fail.load() > 0) {
    gemms_to_fail.fetch_sub(1);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (auto* list = tributary::cuda_emulation::CaptureList()) {
    // α and β in host memory are read now, as cuBLASLt's default pointer
    // mode does.
    const float alpha_value = *static_cast<const float*>(alpha);
    const float beta_value = *static_cast<const float*>(beta);
    const bool has_algo = algo != nullptr;
    const cublasLtMatmulAlgo_t algo_value = has_algo ? *algo : cublasLtMatmulAlgo_t{};
    list->push_back([=] {
      cublasLtMatmul(handle, desc, &alpha_value, A, a_layout, B, b_layout,
                     &beta_value, C, c_layout, D, d_layout,
                     has_algo ? &algo_value : nullptr, workspace,
                     workspace_bytes, stream);
    });
    return CUBLAS_STATUS_SUCCESS;
  }
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  int m, n, k;
  if (!LtDims(*desc, *a_layout, *b_layout, *c_layout, *d_layout, &m, &n, &k) ||
      desc->compute != CUBLAS_COMPUTE_32F || desc->scale_type != CUDA_R_32F ||
      C != D) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const uint64_t index = algo == nullptr ? 0 : algo->data[0];
  if (index >= static_cast<uint64_t>(tributary::cuda_emulation::kEmulatedLtAlgorithms)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // An operand less aligned than the algorithm was chosen for.
  if (algo != nullptr) {
    const void* operands[] = {A, B, D};
    for (int i = 0; i < 3; ++i) {
      const uint64_t need = algo->data[1 + i];
      if (need > 1 && reinterpret_cast<uintptr_t>(operands[i]) % need != 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
      }
    }
  }
  double delay = 0.0;
  {
    std::lock_guard<std::mutex> lock(delays_mutex);
    if (index < lt_delay_seconds.size()) delay = lt_delay_seconds[index];
  }
  ++lt_matmuls_run;
  return EmulatedGemm(desc->transa, desc->transb, m, n, k, alpha, A,
                      a_layout->type, static_cast<int>(a_layout->ld), B,
                      b_layout->type, static_cast<int>(b_layout->ld), beta, D,
                      d_layout->type, static_cast<int>(d_layout->ld),
                      desc->compute, delay);
}
