// The committed fuzz seed corpora (tests/fuzz/corpus/<name>/), for the
// ordinary tests that replay them in every build without libFuzzer.
// Compiled into each such test; needs TRIBUTARY_SOURCE_DIR.
#ifndef TRIBUTARY_TESTS_FUZZ_FUZZ_CORPUS_H_
#define TRIBUTARY_TESTS_FUZZ_FUZZ_CORPUS_H_

#include <filesystem>
#include <string>
#include <vector>

namespace tributary {

// The regular files of corpus `name`, sorted; a failed test expectation
// naming the directory when it cannot be listed.
std::vector<std::filesystem::path> FuzzCorpusFiles(const std::string& name);

// The bytes of `path` ("" when it cannot be read).
std::string ReadCorpusFile(const std::filesystem::path& path);

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_FUZZ_FUZZ_CORPUS_H_
