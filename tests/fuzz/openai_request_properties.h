// What the OpenAI-compatible API promises about any request body (design.md
// §6), checked by the fuzzer (tests/fuzz/openai_request_fuzzer.cc) and, over
// its committed seed corpus, by an ordinary test (tests/server/
// openai_corpus_test.cc). An input is one selector byte (even: POST
// /v1/completions, odd: /v1/chat/completions), then the body. The body goes
// through ParseOpenAiRequest and then RequestConverter::ToEngine with the
// embedded default model's config and tokenizer (its chat template
// included), as the HTTP API handles it:
//  - a refusal is a 4xx OpenAI error with a message in well-formed UTF-8
//    (the client's text quoted in it is cut at a character boundary);
//  - a body that parses is either converted (with a prompt) or refused with
//    INVALID_ARGUMENT or RESOURCE_EXHAUSTED and a UTF-8 message, which the API
//    maps to a 4xx as well;
//  - the same body gives the same outcome twice.
#ifndef TRIBUTARY_TESTS_FUZZ_OPENAI_REQUEST_PROPERTIES_H_
#define TRIBUTARY_TESTS_FUZZ_OPENAI_REQUEST_PROPERTIES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/request_converter.h"

namespace tributary {

class OpenAiRequestProperties {
 public:
  // The model directory's config and tokenizer; the served model name is
  // the directory's last component.
  static absl::StatusOr<std::unique_ptr<OpenAiRequestProperties>> Create(
      const std::string& model_dir);

  // The outcome, comparable: "accepted …", "refused <status> <param>: …"
  // or "invalid <param>: …"; or "property broken: …" when a promise above
  // does not hold.
  std::string Outcome(const uint8_t* data, size_t size) const;

  // "" when the input keeps every property, else what broke.
  std::string Check(const uint8_t* data, size_t size) const;

  const std::string& served_model() const { return served_model_; }

 private:
  OpenAiRequestProperties() = default;

  std::string served_model_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<RequestConverter> converter_;
};

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_FUZZ_OPENAI_REQUEST_PROPERTIES_H_
