#include "baton/data/augment.h"

#include <algorithm>

#include "baton/core/error.h"

namespace baton::data {

torch::Tensor augment_images(const torch::Tensor& images, const AugmentOptions& options,
                             at::Generator& generator) {
  BATON_CHECK(images.defined() && images.dim() == 4,
              "[data.augment] images must be [N, C, H, W], got ", images.dim(), " dimensions");
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const int64_t s = options.shift;
  BATON_CHECK(s >= 0 && s < std::min(h, w), "[data.augment] shift ", s,
              " must be in [0, min(H, W)) = [0, ", std::min(h, w), ")");
  torch::Tensor out = images;
  if (options.flip) {
    const torch::Tensor mirror =
        torch::randint(0, 2, {n}, generator, torch::kLong).to(torch::kBool).view({n, 1, 1, 1});
    out = torch::where(mirror, images.flip({3}), images);
  }
  if (s > 0) {
    // Pad by s on every side, then cut each image's window at its own offset.
    const torch::Tensor padded = torch::constant_pad_nd(out, {s, s, s, s}, options.fill);
    const torch::Tensor offsets = torch::randint(0, 2 * s + 1, {n, 2}, generator, torch::kLong);
    const auto at = offsets.accessor<int64_t, 2>();
    torch::Tensor moved = torch::empty_like(images);
    for (int64_t i = 0; i < n; ++i) {
      moved[i].copy_(padded[i].narrow(1, at[i][0], h).narrow(2, at[i][1], w));
    }
    out = moved;
  }
  return out.is_same(images) ? images.clone() : out;
}

}  // namespace baton::data
