// Running a command-line tool from a test: its exit code, stdout and stderr.
#ifndef TRIBUTARY_TESTS_ENGINE_CLI_CLI_TEST_UTIL_H_
#define TRIBUTARY_TESTS_ENGINE_CLI_CLI_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tributary::cli_testing {

struct Result {
  int exit_code;
  std::string out, err;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs `binary arguments` through the shell, stdout and stderr into files
// of the test's temporary directory named after `name`.
inline Result RunCommand(const std::string& binary, const std::string& arguments,
                         const std::string& name) {
  const std::string out = testing::TempDir() + "/" + name + "_stdout.txt";
  const std::string err = testing::TempDir() + "/" + name + "_stderr.txt";
  const std::string command =
      absl::StrCat(binary, " ", arguments, " >", out, " 2>", err);
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadAll(out),
          ReadAll(err)};
}

}  // namespace tributary::cli_testing

#endif  // TRIBUTARY_TESTS_ENGINE_CLI_CLI_TEST_UTIL_H_
