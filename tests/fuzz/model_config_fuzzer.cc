// libFuzzer target: ParseModelConfig on raw text.
// Seeds: tests/fuzz/corpus/model_config/.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = tributary::ParseModelConfig(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (config.ok()) {
    // The derived quantities of a validated config must be computable.
    volatile int64_t sink = config->kv_cache_bytes_per_token() +
                            config->gdn_state_bytes_per_sequence() +
                            config->gdn_conv_state_bytes_per_sequence() +
                            config->rotary_dim() + config->q_proj_rows();
    (void)sink;
  }
  return 0;
}
