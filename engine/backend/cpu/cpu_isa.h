// The instruction-set paths of the CPU kernels (matmul, element-wise ops,
// the delta rule, attention), one name for all: every kernel has a path
// per ISA and dispatches at run time on what this CPU supports.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_CPU_ISA_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_CPU_ISA_H_

#include <cstdint>

namespace tributary {

// kAuto picks the best one the CPU supports (checked at run time with
// __builtin_cpu_supports and CPUID).
enum class CpuIsa : uint8_t { kAuto, kScalar, kAvx2, kAvx512 };

const char* CpuIsaName(CpuIsa isa);

// Whether this CPU can run `isa` (kAuto and kScalar: always).
bool CpuIsaSupported(CpuIsa isa);

// The path kAuto resolves to on this CPU.
CpuIsa BestCpuIsa();

// The path a kernel runs on when asked for `isa`: kAuto → BestCpuIsa()
// (determined once), an unsupported path → kScalar.
CpuIsa ResolveCpuIsa(CpuIsa isa);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_CPU_ISA_H_
