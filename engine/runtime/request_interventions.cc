#include "engine/runtime/request_interventions.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

absl::Status CheckVector(const std::vector<float>& v, int64_t hidden,
                         const std::string& field) {
  if (static_cast<int64_t>(v.size()) != hidden) {
    return Invalid(absl::StrCat(field, " has ", v.size(),
                                " values; the hidden size is ", hidden));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      return Invalid(
          absl::StrCat(field, "[", i, "] = ", v[i], " is not finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLayers(const std::vector<int32_t>& layers, int32_t num_layers,
                         const std::string& field) {
  std::set<int32_t> seen;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= num_layers) {
      return Invalid(absl::StrCat(field, "[", i, "] = ", layers[i],
                                  " is outside [0, ", num_layers, ")"));
    }
    if (!seen.insert(layers[i]).second) {
      return Invalid(
          absl::StrCat(field, "[", i, "] = ", layers[i], " is repeated"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RequestInterventions> RequestInterventions::Create(
    GenerateRequest& request, const ModelConfig& config) {
  RequestInterventions out;
  out.num_layers_ = static_cast<int32_t>(config.num_hidden_layers);
  const int64_t hidden = config.hidden_size;
  if (request.steering.size() > GenerateRequest::kMaxSteeringVectors) {
    return Invalid(absl::StrCat("steering has ", request.steering.size(),
                                " vectors, at most ",
                                GenerateRequest::kMaxSteeringVectors));
  }
  for (size_t i = 0; i < request.steering.size(); ++i) {
    const SteeringVector& s = request.steering[i];
    const std::string field = absl::StrCat("steering[", i, "]");
    if (s.layer < 0 || s.layer >= out.num_layers_) {
      return Invalid(absl::StrCat(field, ".layer = ", s.layer,
                                  " is outside [0, ", out.num_layers_, ")"));
    }
    if (!std::isfinite(s.scale)) {
      return Invalid(absl::StrCat(field, ".scale is not finite"));
    }
    if (auto st = CheckVector(s.vector, hidden, field + ".vector"); !st.ok()) {
      return st;
    }
    for (size_t j = 0; j < s.vector.size(); ++j) {
      const double added = static_cast<double>(s.vector[j]) * s.scale;
      if (!(std::fabs(added) <= GenerateRequest::kMaxSteeringMagnitude)) {
        return Invalid(absl::StrCat(
            field, ".scale = ", s.scale, " times ", field, ".vector[", j,
            "] = ", s.vector[j], " adds ", added, " to the stream, beyond ±",
            GenerateRequest::kMaxSteeringMagnitude));
      }
    }
  }
  if (request.ablate.size() > GenerateRequest::kMaxAblations) {
    return Invalid(absl::StrCat("ablate has ", request.ablate.size(),
                                " directions, at most ",
                                GenerateRequest::kMaxAblations));
  }
  for (size_t i = 0; i < request.ablate.size(); ++i) {
    std::vector<float>& d = request.ablate[i];
    const std::string field = absl::StrCat("ablate[", i, "]");
    if (auto st = CheckVector(d, hidden, field); !st.ok()) return st;
    double sq = 0.0;
    for (float x : d) sq += static_cast<double>(x) * x;
    if (!(sq > 1e-24) || !std::isfinite(sq)) {
      return Invalid(absl::StrCat(field, " has no direction (norm 0)"));
    }
    const double inv = 1.0 / std::sqrt(sq);
    for (float& x : d) x = static_cast<float>(x * inv);
  }
  if (auto st =
          CheckLayers(request.skip_layers, out.num_layers_, "skip_layers");
      !st.ok()) {
    return st;
  }
  if (request.logit_lens) {
    const LogitLensOptions& lens = *request.logit_lens;
    if (auto st =
            CheckLayers(lens.layers, out.num_layers_, "logit_lens.layers");
        !st.ok()) {
      return st;
    }
    if (lens.top_n < 1 || lens.top_n > GenerateRequest::kMaxLensTopN) {
      return Invalid(absl::StrCat("logit_lens.top_n = ", lens.top_n,
                                  " must be in [1, ",
                                  GenerateRequest::kMaxLensTopN, "]"));
    }
  }
  out.steering_ = std::move(request.steering);
  out.ablate_units_ = std::move(request.ablate);
  out.skip_layers_ = std::move(request.skip_layers);
  out.lens_ = std::move(request.logit_lens);
  return out;
}

void RequestInterventions::AddToStep(int64_t row_begin, int64_t num_tokens,
                                     int64_t first_position, int64_t prompt_len,
                                     bool samples, int64_t* next_lens_position,
                                     StepInterventions* step,
                                     std::vector<LensRead>* reads) const {
  const int64_t row_end = row_begin + num_tokens;
  for (const SteeringVector& s : steering_) {
    const int64_t begin =
        s.generated_only
            ? row_begin + std::clamp<int64_t>(prompt_len - first_position, 0,
                                              num_tokens)
            : row_begin;
    if (begin >= row_end) continue;
    step->steers.push_back({2 * s.layer + (s.after_ffn ? 1 : 0), begin, row_end,
                            &s.vector, s.scale});
  }
  for (const std::vector<float>& u : ablate_units_) {
    step->ablations.push_back({row_begin, row_end, &u});
  }
  for (int32_t layer : skip_layers_) {
    step->skips.push_back({2 * layer, row_begin, row_end});
    step->skips.push_back({2 * layer + 1, row_begin, row_end});
  }
  if (!lens_) return;
  // The rows to read: every new one with the prompt, else the one whose
  // logits give the next generated token.
  const int64_t last_position = first_position + num_tokens - 1;
  const int64_t first = lens_->include_prompt
                            ? std::max(first_position, *next_lens_position)
                            : (samples && last_position >= *next_lens_position
                                   ? last_position
                                   : last_position + 1);
  for (int64_t p = first; p <= last_position; ++p) {
    const int64_t row = row_begin + (p - first_position);
    auto add = [&](int32_t layer) {
      step->lens.push_back({layer, row});
      reads->push_back({p, layer});
    };
    if (lens_->layers.empty()) {
      for (int32_t l = 0; l < num_layers_; ++l) add(l);
    } else {
      for (int32_t l : lens_->layers) add(l);
    }
  }
  *next_lens_position = std::max(*next_lens_position, last_position + 1);
}

}  // namespace tributary
