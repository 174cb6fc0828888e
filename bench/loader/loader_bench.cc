// loader_bench: what opening a checkpoint costs, and where the real cost is.
//
// Writes a synthetic safetensors file (default 1 GiB of bf16 tensors, 1 MiB
// each, like a shard of a real checkpoint) into a temporary directory, then
// times
//   open   TensorStore::OpenFile: mmap + header validation + name -> view map
//          (no tensor bytes are read or copied),
//   touch  reading one byte of every 4 KiB page through the views, from the
//          page cache (warm) and after dropping the file's cached pages
//          (cold, best effort: posix_fadvise DONTNEED),
// and reports the process RSS (/proc/self/status) before and after each step:
// opening must not grow RSS by the file size; touching does (file-backed
// pages count in RSS). The file is removed at the end.
//
// Usage: loader_bench [--size-mib 1024] [--dir DIR (default $TMPDIR or /tmp)]
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/cli.h"
#include "base/status_macros.h"
#include "absl/strings/str_format.h"
#include "engine/model/tensor_store.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A field of /proc/self/status in KiB (VmRSS, RssFile, RssAnon).
int64_t StatusKib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtoll(line.c_str() + field.size() + 1, nullptr, 10);
    }
  }
  return -1;
}

struct Rss {
  int64_t total_kib;
  int64_t file_kib;
  int64_t anon_kib;
};
Rss ReadRss() {
  return {StatusKib("VmRSS"), StatusKib("RssFile"), StatusKib("RssAnon")};
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// 1 MiB bf16 tensors [512, 1024], named like a decoder's.
bool WriteSyntheticFile(const std::string& path, int64_t size_mib,
                        int64_t* num_tensors) {
  constexpr int64_t kRows = 512, kCols = 1024;
  constexpr int64_t kTensorBytes = kRows * kCols * 2;
  *num_tensors = size_mib;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (int64_t i = 0; i < *num_tensors; ++i) {
    absl::StrAppend(&header, ",\"model.layers.", i / 16, ".mlp.block_", i % 16,
                    ".weight\":{\"dtype\":\"BF16\",\"shape\":[", kRows, ",",
                    kCols, "],\"data_offsets\":[", i * kTensorBytes, ",",
                    (i + 1) * kTensorBytes, "]}");
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  std::string prefix(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>(n >> (8 * i));
  bool ok = WriteAll(fd, prefix.data(), 8) &&
            WriteAll(fd, header.data(), header.size());
  std::vector<char> chunk(kTensorBytes);
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 31);
  for (int64_t i = 0; ok && i < *num_tensors; ++i) {
    chunk[0] = static_cast<char>(i);
    ok = WriteAll(fd, chunk.data(), chunk.size());
  }
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// Reads one byte per page of every tensor; returns their sum so that the
// reads cannot be optimised away.
uint64_t TouchEveryPage(const TensorStore& store) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  uint64_t sum = 0;
  for (const auto& [name, view] : store.tensors()) {
    const volatile uint8_t* bytes =
        static_cast<const volatile uint8_t*>(view->data);
    for (size_t offset = 0; offset < view->size_bytes; offset += page) {
      sum += bytes[offset];
    }
  }
  return sum;
}

bool DropFromPageCache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

void PrintRow(const std::string& step, double seconds, double bytes,
              const Rss& rss, const Rss& base) {
  std::string rate = bytes > 0 ? absl::StrFormat("%8.2f GB/s", bytes / seconds / 1e9)
                               : std::string(13, ' ');
  std::printf("| %-34s | %12.3f | %s | %9.1f | %9.1f | %9.1f |\n", step.c_str(),
              seconds * 1e3, rate.c_str(),
              (rss.total_kib - base.total_kib) / 1024.0,
              (rss.file_kib - base.file_kib) / 1024.0,
              (rss.anon_kib - base.anon_kib) / 1024.0);
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv, {"size-mib", "dir"}, {}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  ASSIGN_OR_RETURN(const int64_t size_mib,
                   args.GetInt("size-mib", 1024, 1, int64_t{1} << 20));
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(
      args.GetOr("dir", tmp != nullptr && *tmp ? tmp : "/tmp"),
      "/tributary_loader_bench_XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create ", dir));
  }
  const std::string path = dir + "/model.safetensors";
  int64_t num_tensors = 0;
  auto write_start = Clock::now();
  // The file and its folder go on every path out.
  struct RemoveFiles {
    std::string path, dir;
    ~RemoveFiles() {
      ::unlink(path.c_str());
      ::rmdir(dir.c_str());
    }
  } remove_files{path, dir};
  if (!WriteSyntheticFile(path, size_mib, &num_tensors)) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  const double write_seconds = SecondsSince(write_start);
  const double file_bytes = static_cast<double>(size_mib) * 1024 * 1024;

  std::printf("loader_bench: %s, %lld MiB, %lld bf16 tensors (written in "
              "%.2f s)\n\n",
              path.c_str(), static_cast<long long>(size_mib),
              static_cast<long long>(num_tensors), write_seconds);
  std::printf("| %-34s | %12s | %13s | %9s | %9s | %9s |\n", "step",
              "time (ms)", "throughput", "dRSS MiB", "dFile MiB", "dAnon MiB");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(),
              std::string(14, '-').c_str(), std::string(15, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str());

  {
    // Open repeatedly: the median of 20 opens (header pages cached).
    std::vector<double> times;
    for (int i = 0; i < 20; ++i) {
      auto start = Clock::now();
      auto store = TensorStore::OpenFile(path);
      times.push_back(SecondsSince(start));
      RETURN_IF_ERROR(store.status());
    }
    std::sort(times.begin(), times.end());
    {
      const Rss base = ReadRss();
      auto start = Clock::now();
      ASSIGN_OR_RETURN(auto store, TensorStore::OpenFile(path));
      const double open_seconds = SecondsSince(start);
      const Rss after_open = ReadRss();
      PrintRow("open+validate+map (one, held)", open_seconds, 0, after_open, base);
      PrintRow("open+validate+map (median of 20)", times[times.size() / 2], 0,
               after_open, base);

      start = Clock::now();
      uint64_t sum = TouchEveryPage(store);
      const double warm_seconds = SecondsSince(start);
      PrintRow("touch every page (page cache)", warm_seconds, file_bytes,
               ReadRss(), base);

      start = Clock::now();
      sum += TouchEveryPage(store);
      PrintRow("touch every page (mapped)", SecondsSince(start), file_bytes,
               ReadRss(), base);
      { TensorStore closed = std::move(store); }

      const bool dropped = DropFromPageCache(path);
      const Rss base_cold = ReadRss();
      ASSIGN_OR_RETURN(auto cold_store, TensorStore::OpenFile(path));
      start = Clock::now();
      sum += TouchEveryPage(cold_store);
      PrintRow(dropped ? "touch every page (cold, fadvise)"
                       : "touch every page (cache not dropped)",
               SecondsSince(start), file_bytes, ReadRss(), base_cold);
      std::printf("\n(checksum %llu; dRSS/dFile/dAnon are relative to just "
                  "before the open)\n",
                  static_cast<unsigned long long>(sum));
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("loader_bench",
                               [&] { return tributary::Run(argc, argv); });
}
