// tokenizer_bench --tokenizer PATH [--repeat N] FILE...
//
// Single-thread encode throughput of Tributary's tokenizer, in two modes:
//   whole: the whole file as one string;
//   lines: each line (with its newline) as its own Encode call.
// Prints the load time, then one line per file and mode with the best of N
// runs: bytes, tokens, seconds, MB/s (10^6 bytes per second). The word
// cache is warm after the first run, as in a long-running server (HF's BPE
// keeps a similar cache).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/cli.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {
namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv, {"tokenizer", "repeat"}, {}));
  auto path = args.Get("tokenizer");
  if (!path || args.positional().empty()) {
    return absl::InvalidArgumentError(
        "usage: tokenizer_bench --tokenizer PATH [--repeat N] FILE...");
  }
  ASSIGN_OR_RETURN(long long repeat, args.GetInt("repeat", 5, 1, 1000));
  const double t0 = Now();
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(*path));
  std::printf("load %s: %.3f s (pre-tokenizer %s)\n", path->c_str(),
              Now() - t0, tokenizer->pre_tokenizer().name());
  for (const std::string& file : args.positional()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
    std::vector<absl::string_view> lines;
    for (size_t pos = 0; pos < text.size();) {
      size_t end = text.find('\n', pos);
      end = end == std::string::npos ? text.size() : end + 1;
      lines.push_back(absl::string_view(text).substr(pos, end - pos));
      pos = end;
    }
    for (const char* mode : {"whole", "lines"}) {
      double best = 1e30;
      size_t num_tokens = 0;
      for (long long r = 0; r < repeat; ++r) {
        num_tokens = 0;
        const double start = Now();
        if (mode[0] == 'w') {
          ASSIGN_OR_RETURN(auto ids, tokenizer->Encode(text));
          num_tokens = ids.size();
        } else {
          for (absl::string_view line : lines) {
            ASSIGN_OR_RETURN(auto ids, tokenizer->Encode(line));
            num_tokens += ids.size();
          }
        }
        best = std::min(best, Now() - start);
      }
      std::printf("%s %s: %zu bytes, %zu tokens, %.4f s, %.2f MB/s\n",
                  file.c_str(), mode, text.size(), num_tokens, best,
                  text.size() / best / 1e6);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tokenizer_bench",
                               [&] { return tributary::Run(argc, argv); });
}
