// What the APIs promise about any request (design.md §6), checked by the
// fuzzer (tests/fuzz/request_fuzzer.cc) and, over its committed seed
// corpus, by an ordinary test (tests/server/request_corpus_test.cc). An input
// is one selector byte, then the request:
//   bit 1 set: a serialized tributary.v1.GenerateRequest (the gRPC API),
//     given to RequestConverter::ToEngine as the service does;
//   else an OpenAI body (bit 0: /v1/chat/completions, else /v1/completions)
//     through ParseOpenAiRequest and then ToEngine, as the HTTP API does;
// with the embedded default model's config and tokenizer (its chat template
// included):
//  - a refusal is a 4xx OpenAI error with a message in well-formed UTF-8
//    (the client's text quoted in it is cut at a character boundary);
//  - a body that parses is either converted (with a prompt) or refused with
//    INVALID_ARGUMENT or RESOURCE_EXHAUSTED and a UTF-8 message, which the API
//    maps to a 4xx as well;
//  - the same body gives the same outcome twice.
#ifndef TRIBUTARY_TESTS_FUZZ_REQUEST_PROPERTIES_H_
#define TRIBUTARY_TESTS_FUZZ_REQUEST_PROPERTIES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/openai_protocol.h"
#include "server/request_converter.h"

namespace tributary {

class RequestProperties {
 public:
  // The model directory's config and tokenizer; the served model name is
  // the directory's last component.
  static absl::StatusOr<std::unique_ptr<RequestProperties>> Create(
      const std::string& model_dir);

  // The outcome, comparable: "accepted …", "refused <status> <param>: …",
  // "invalid <param>: …" (gRPC: "invalid: …"), "unparsed" (a gRPC request
  // that is not a GenerateRequest); or "property broken: …" when a promise
  // above does not hold.
  std::string Outcome(const uint8_t* data, size_t size) const;

  // "" when the input keeps every property, else what broke.
  std::string Check(const uint8_t* data, size_t size) const;

  const std::string& served_model() const { return served_model_; }

 private:
  RequestProperties() = default;
  // ToEngine's outcome; an error also as the OpenAI API maps it, when the
  // request came through it.
  std::string ConversionOutcome(const v1::GenerateRequest& request,
                                std::optional<OpenAiEndpoint> endpoint) const;

  std::string served_model_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<RequestConverter> converter_;
};

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_FUZZ_REQUEST_PROPERTIES_H_
