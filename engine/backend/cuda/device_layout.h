// The batch layout (batch_layout.h) flattened into plain arrays that the
// CUDA kernels read: one table of sequences, one entry per token, and the
// block tables of all sequences back to back. Built on the host by
// CudaBackend::SetBatchLayout and copied to the device once per step.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_LAYOUT_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_LAYOUT_H_

#include <cstdint>

namespace tributary {
namespace cuda {

// One sequence of the step. Every count fits in 32 bits: the decoder checks
// positions below 2^31, and a step's tokens are bounded by the scheduler.
struct DeviceSequence {
  int32_t token_offset;        // first row of the step
  int32_t num_tokens;          // new tokens in this step
  int32_t first_position;      // tokens cached before this step
  int32_t state_slot;          // GDN state slot
  int32_t block_table_offset;  // index of its first entry in block_tables
  // 1 when the delta rule takes the chunked form for it (any step but a
  // single token after cached ones, as the CPU backend), else 0.
  int32_t chunked;
  // 1 when its attention may go to the flash kernel (at least
  // kFlashMinTokens new tokens); the backend decides per call whether it
  // does (flash_tiles lists its query tiles).
  int32_t flash;
};

// Device pointers (into one buffer the backend owns) and counts.
struct DeviceLayout {
  const DeviceSequence* sequences = nullptr;  // [num_sequences]
  const int32_t* token_sequence = nullptr;    // [num_tokens]: its sequence
  const int32_t* token_position = nullptr;    // [num_tokens]: its position
  const int32_t* block_tables = nullptr;      // all block tables, concatenated
  // The sequences with chunked = 1, in order: [num_chunked].
  const int32_t* chunked_sequences = nullptr;
  // The flash kernel's query tiles: (sequence, first token of the tile
  // within the sequence's step) pairs, [num_flash_tiles, 2].
  const int32_t* flash_tiles = nullptr;
  // The tokens of the sequences with flash = 0, in order: [num_split_tokens]
  // (the split attention's rows when the flash kernel takes the others).
  const int32_t* split_tokens = nullptr;
  int32_t num_sequences = 0;
  int32_t num_tokens = 0;
  int32_t num_chunked = 0;
  int32_t num_flash_tiles = 0;
  int32_t num_split_tokens = 0;
  // Keeps the struct free of padding: graphs are matched on the bytes of
  // launch parameters (LaunchRecorder), and padding has no defined value.
  int32_t reserved = 0;
};
static_assert(sizeof(DeviceLayout) == 7 * sizeof(void*) + 6 * sizeof(int32_t),
              "DeviceLayout has padding");

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_LAYOUT_H_
