#include "baton/plan/model.h"

#include "baton/core/error.h"

namespace baton::plan {

void check_shape(const ModelShape& m) {
  BATON_CHECK(m.layers >= 1 && m.hidden >= 1 && m.heads >= 1 && m.seq >= 1 && m.vocab >= 1,
              "[plan] model sizes must be at least 1 (layers=", m.layers, ", hidden=", m.hidden,
              ", heads=", m.heads, ", seq=", m.seq, ", vocab=", m.vocab, ")");
  BATON_CHECK(m.hidden % m.heads == 0, "[plan] hidden=", m.hidden,
              " must be a multiple of heads=", m.heads);
}

double layer_forward_flops(const ModelShape& m, double b) {
  const double s = m.seq, h = m.hidden;
  return 24.0 * b * s * h * h * (1.0 + s / (6.0 * h));
}

double logits_forward_flops(const ModelShape& m, double b) {
  return 2.0 * b * m.seq * m.hidden * static_cast<double>(m.vocab);
}

double step_flops(const ModelShape& m, double batch, bool recompute) {
  const double layer_passes = recompute ? 4 : 3;
  return m.layers * layer_passes * layer_forward_flops(m, batch) +
         3.0 * logits_forward_flops(m, batch);
}

double layer_parameters(const ModelShape& m) {
  const double h = m.hidden;
  return 12.0 * h * h + 13.0 * h;
}

double embedding_parameters(const ModelShape& m) {
  return (static_cast<double>(m.vocab) + m.seq) * m.hidden;
}

double head_parameters(const ModelShape& m) {
  return static_cast<double>(m.vocab) * m.hidden;
}

double layer_activation_bytes(const ModelShape& m, double b, int t, bool recompute,
                              bool selective) {
  const double s = m.seq, h = m.hidden, a = m.heads;
  if (recompute) return 2.0 * s * b * h;
  if (selective) return s * b * h * (10.0 + 16.0 / t);
  return s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t));
}

double attention_core_flops(const ModelShape& m, double b) {
  return 4.0 * b * m.seq * m.seq * m.hidden;
}

double state_bytes_per_parameter(int d, int zero, double optimizer_bytes) {
  if (zero <= 0) return 4.0 + optimizer_bytes;
  if (zero == 3) return 4.0 + (2.0 + optimizer_bytes) / d;
  return 4.0 + optimizer_bytes / d;
}

}  // namespace baton::plan
