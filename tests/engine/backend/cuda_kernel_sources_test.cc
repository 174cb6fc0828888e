// A check on the CUDA kernels' sources that no test on the emulation can
// make: under programmatic dependent launch (programmatic_launch.h) a
// kernel may start while the kernel before it is still writing, so every
// kernel must wait for it (BeginAfterPriorGrids) before reading anything.
// A kernel without the call would race on a device only, intermittently.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tributary {
namespace {

// The bodies of the __global__ functions of a source, with their names.
struct Kernel {
  std::string name;
  std::string body;
};
std::vector<Kernel> KernelsOf(const std::string& source) {
  std::vector<Kernel> kernels;
  size_t at = 0;
  while ((at = source.find("__global__", at)) != std::string::npos) {
    const size_t open_paren = source.find('(', source.find("void", at));
    const size_t open = source.find('{', at);
    if (open_paren == std::string::npos || open == std::string::npos) break;
    // The name: the identifier before the parameter list (past a
    // __launch_bounds__(…), whose parenthesis comes first).
    size_t params = open_paren;
    const size_t bounds = source.find("__launch_bounds__", at);
    if (bounds != std::string::npos && bounds < open) {
      params = source.find('(', source.find(')', bounds));
    }
    size_t name_end = params;
    while (name_end > at && std::isspace(static_cast<unsigned char>(source[name_end - 1]))) {
      --name_end;
    }
    size_t name_begin = name_end;
    while (name_begin > at && (std::isalnum(static_cast<unsigned char>(source[name_begin - 1])) ||
                               source[name_begin - 1] == '_')) {
      --name_begin;
    }
    int depth = 0;
    size_t close = open;
    for (; close < source.size(); ++close) {
      if (source[close] == '{') ++depth;
      if (source[close] == '}' && --depth == 0) break;
    }
    kernels.push_back({source.substr(name_begin, name_end - name_begin),
                       source.substr(open, close - open + 1)});
    at = close;
  }
  return kernels;
}

// The body's first statement, past blank lines and // comments.
std::string FirstStatement(const std::string& body) {
  std::istringstream lines(body.substr(1));  // past the '{'
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, 2, "//") == 0) continue;
    return line.substr(start);
  }
  return "";
}

// Kernels that may do something before the wait, and what: the few-token
// products prefetch their weights (which no kernel writes) into L2.
bool MayPrefetchFirst(const std::string& name) {
  return name == "GemvKernel" || name == "GemvSwiGluKernel";
}

TEST(CudaKernelSourcesTest, EveryKernelWaitsForTheGridsBeforeIt) {
  const std::filesystem::path dir =
      std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "engine" / "backend" / "cuda";
  int files = 0, kernels = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cu") continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    for (const Kernel& k : KernelsOf(text.str())) {
      ++kernels;
      const size_t wait = k.body.find("BeginAfterPriorGrids();");
      EXPECT_NE(wait, std::string::npos)
          << entry.path().filename() << ": " << k.name
          << " does not call BeginAfterPriorGrids()";
      if (MayPrefetchFirst(k.name)) {
        // Only index arithmetic and the prefetch come before it.
        const std::string before = k.body.substr(0, wait);
        EXPECT_NE(before.find("PrefetchFirstChunks("), std::string::npos) << k.name;
        for (const char* read : {"Load", "BlockRowSums(", "[0]", "->"}) {
          EXPECT_EQ(before.find(read), std::string::npos)
              << k.name << " reads (" << read << ") before BeginAfterPriorGrids()";
        }
      } else {
        EXPECT_EQ(FirstStatement(k.body), "BeginAfterPriorGrids();")
            << entry.path().filename() << ": " << k.name
            << " does something before BeginAfterPriorGrids()";
      }
    }
  }
  EXPECT_GT(files, 0) << "no .cu files in " << dir;
  // Every kernel file has kernels; fewer than 30 found means the scan broke.
  EXPECT_GE(kernels, 30);
}

TEST(CudaKernelSourcesTest, TheScanFindsAKernelWithoutTheCall) {
  const std::string source =
      "__global__ void __launch_bounds__(128)\nGood(int x) {\n"
      "  BeginAfterPriorGrids();\n  if (x) { x = 1; }\n}\n"
      "template <int k>\n__global__ void Bad(int y) {\n  y = 2;\n}\n";
  const std::vector<Kernel> kernels = KernelsOf(source);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].name, "Good");
  EXPECT_NE(kernels[0].body.find("BeginAfterPriorGrids();"), std::string::npos);
  EXPECT_EQ(kernels[1].name, "Bad");
  EXPECT_EQ(kernels[1].body.find("BeginAfterPriorGrids();"), std::string::npos);
  EXPECT_EQ(FirstStatement(kernels[0].body), "BeginAfterPriorGrids();");
  EXPECT_EQ(FirstStatement("{\n  // why\n\n  x = 1;\n  BeginAfterPriorGrids();\n}"),
            "x = 1;");
}

}  // namespace
}  // namespace tributary
