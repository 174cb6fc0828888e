// The residual-stream intervention flags of `tributary generate` and `chat`
// and their translation into the request's steering, ablate, skip_layers and
// logit_lens (proto/tributary/v1/tributary.proto). Like generate_flags, this
// only rejects what does not parse; ranges (layers, top_n, the vector's
// length, a name the server did not load) are the server's to check.
//
//   --steer LAYER:DIRECTION[:SCALE][:mixer][:generated]   (repeatable)
//   --ablate DIRECTION                                    (repeatable)
//   --skip-layers 1,2,3
//   --lens all|3,5,7 [--lens-top N] [--lens-prompt] [--lens-width N]
//
// DIRECTION is a vector name the server loaded (GetModelInfo
// .steering_vector_names) or @FILE, a file of floats separated by
// whitespace and/or commas sent inline.
#ifndef TRIBUTARY_CLIENT_INTERVENTION_FLAGS_H_
#define TRIBUTARY_CLIENT_INTERVENTION_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command_line.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

// Adds the flags above to a generate/chat spec.
void AddInterventionFlags(CommandSpec* spec);

// Sets the interventions `line` asks for on `request`; --lens also turns on
// return_token_ids (the table's row labels). Errors name the flag.
absl::Status SetInterventions(const CommandLine& line,
                              v1::GenerateRequest* request);

// --lens-width N: the width the lens table wraps at (default 120, at least
// 40).
absl::StatusOr<int> LensTableWidth(const CliArgs& args);

// A --steer SPEC. The parts after DIRECTION may come in any order: a number
// (the scale, at most once), "mixer" (STREAM_POINT_AFTER_MIXER; "ffn" is the
// default and may be spelled out), "generated" (TOKEN_SCOPE_GENERATED; "all"
// likewise). Errors quote the spec and say what is wrong with which part.
absl::StatusOr<v1::Steering> ParseSteerSpec(const std::string& spec);

// A DIRECTION of `flag`: "@FILE" reads an inline vector, anything else non
// empty is a name.
absl::StatusOr<v1::Direction> ParseDirection(const std::string& flag,
                                             const std::string& text);

// Finite floats separated by whitespace and/or commas (at least one);
// errors name `flag` and `source` (the file).
absl::StatusOr<std::vector<float>> ParseFloatList(const std::string& flag,
                                                  const std::string& source,
                                                  const std::string& text);

// "1,2,3" → layer indices (>= 0); errors name `flag`.
absl::StatusOr<std::vector<int32_t>> ParseLayerList(const std::string& flag,
                                                    const std::string& text);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_INTERVENTION_FLAGS_H_
