// HybridDecoder's interventions on the residual stream
// (stream_interventions.h): steering, directional ablation and the logit
// lens, applied at one point of the forward through Backend ops.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/decoder/hybrid_decoder.h"

namespace tributary {

absl::StatusOr<Tensor> HybridDecoder::Upload(const std::vector<float>* v) {
  auto it = uploaded_vectors_.find(v);
  if (it != uploaded_vectors_.end()) return it->second;
  const int64_t hidden = config_->hidden_size;
  if (v == nullptr || static_cast<int64_t>(v->size()) != hidden) {
    return absl::InvalidArgumentError(
        absl::StrCat("an intervention vector has ", v ? v->size() : 0,
                     " values; the hidden size is ", hidden));
  }
  // Kept f32 on the backend: the intervention ops take f32 vectors.
  ASSIGN_OR_RETURN(Tensor t,
                   intervention_buffers_.Take(ElementType::kF32, Shape{hidden}));
  RETURN_IF_ERROR(backend_->CopyFromHost(v->data(), t));
  uploaded_vectors_[v] = t;
  return t;
}

absl::Status HybridDecoder::StreamLogits(StepActivations& step,
                                         const std::vector<int64_t>& rows,
                                         std::vector<float>* logits) {
  const ModelConfig& c = *config_;
  const int64_t r = static_cast<int64_t>(rows.size());
  std::vector<int32_t> rows32(rows.begin(), rows.end());
  ASSIGN_OR_RETURN(Tensor rows_tensor,
                   intervention_buffers_.Take(ElementType::kI32, Shape{r}));
  RETURN_IF_ERROR(backend_->CopyFromHost(rows32.data(), rows_tensor));
  ASSIGN_OR_RETURN(Tensor selected,
                   intervention_buffers_.Take(backend_->activation_type(),
                                      Shape{r, c.hidden_size}));
  backend_->GatherRows(step.stream, rows_tensor, selected);
  // The same ops as the model's own logits (Forward): at the last layer the
  // lens equals them bit for bit.
  backend_->RmsNorm(selected, final_norm_, static_cast<float>(c.rms_norm_eps),
                    selected);
  ASSIGN_OR_RETURN(Tensor out, intervention_buffers_.Take(ElementType::kF32,
                                                  Shape{r, c.vocab_size}));
  backend_->MatMul(selected, lm_head_, out);
  logits->resize(static_cast<size_t>(r * c.vocab_size));
  return backend_->CopyToHost(out, logits->data());
}

absl::Status HybridDecoder::Capture(const StepInterventions& iv, int sublayer,
                                    StepActivations& step, ForwardOutput* output) {
  std::vector<int32_t> rows;
  std::vector<size_t> which;
  for (size_t i = 0; i < iv.captures.size(); ++i) {
    if (iv.captures[i].sublayer == sublayer) {
      rows.push_back(static_cast<int32_t>(iv.captures[i].row));
      which.push_back(i);
    }
  }
  if (rows.empty()) return absl::OkStatus();
  const int64_t hidden = config_->hidden_size;
  const int64_t r = static_cast<int64_t>(rows.size());
  ASSIGN_OR_RETURN(Tensor rows_tensor,
                   intervention_buffers_.Take(ElementType::kI32, Shape{r}));
  RETURN_IF_ERROR(backend_->CopyFromHost(rows.data(), rows_tensor));
  const ElementType act = backend_->activation_type();
  ASSIGN_OR_RETURN(Tensor selected,
                   intervention_buffers_.Take(act, Shape{r, hidden}));
  backend_->GatherRows(step.stream, rows_tensor, selected);
  std::vector<uint8_t> raw(selected.size_bytes());
  RETURN_IF_ERROR(backend_->CopyToHost(selected, raw.data()));
  output->captured.resize(iv.captures.size());
  for (size_t j = 0; j < which.size(); ++j) {
    std::vector<float>& out = output->captured[which[j]];
    out.resize(static_cast<size_t>(hidden));
    for (int64_t i = 0; i < hidden; ++i) {
      out[static_cast<size_t>(i)] =
          LoadAsF32(raw.data(), act,
                    j * static_cast<size_t>(hidden) + static_cast<size_t>(i));
    }
  }
  return absl::OkStatus();
}

absl::Status HybridDecoder::ApplyInterventions(const StepInterventions& iv,
                                               int sublayer, StepActivations& step,
                                               ForwardOutput* output) {
  for (const StepInterventions::Steer& steer : iv.steers) {
    if (steer.sublayer != sublayer) continue;
    ASSIGN_OR_RETURN(Tensor v, Upload(steer.vector));
    backend_->AddScaledVector(step.stream, steer.row_begin, steer.row_end, v,
                              steer.scale);
  }
  for (const StepInterventions::Ablate& ablate : iv.ablations) {
    ASSIGN_OR_RETURN(Tensor u, Upload(ablate.unit));
    backend_->ProjectOut(step.stream, ablate.row_begin, ablate.row_end, u);
  }
  RETURN_IF_ERROR(Capture(iv, sublayer, step, output));
  if (sublayer < 0 || sublayer % 2 == 0 || iv.lens.empty()) {
    return absl::OkStatus();
  }
  const int32_t layer = sublayer / 2;
  std::vector<int64_t> rows;
  std::vector<size_t> reads;  // indexes into iv.lens
  for (size_t i = 0; i < iv.lens.size(); ++i) {
    if (iv.lens[i].layer == layer) {
      rows.push_back(iv.lens[i].row);
      reads.push_back(i);
    }
  }
  if (rows.empty()) return absl::OkStatus();
  std::vector<float> logits;
  RETURN_IF_ERROR(StreamLogits(step, rows, &logits));
  const size_t vocab = static_cast<size_t>(config_->vocab_size);
  output->lens_logits.resize(iv.lens.size() * vocab);
  for (size_t j = 0; j < reads.size(); ++j) {
    std::copy(logits.begin() + j * vocab, logits.begin() + (j + 1) * vocab,
              output->lens_logits.begin() + reads[j] * vocab);
  }
  return absl::OkStatus();
}

}  // namespace tributary
