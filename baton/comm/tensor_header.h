// The fixed-size header that precedes every point-to-point tensor, so that a
// receiver allocates the payload without being told its shape or dtype.
// Layout (int64): [kHeaderMagic, scalar type, ndim, size 0, ..., size ndim-1, 0...].
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace baton::comm::detail {

inline constexpr std::int64_t kHeaderMagic = 0x6261746f6e;  // "baton"
inline constexpr int kHeaderLength = 16;
inline constexpr int kMaxDims = kHeaderLength - 3;

// A CPU int64 tensor of kHeaderLength describing `tensor`; throws
// baton::Error when it has more than kMaxDims dimensions.
at::Tensor encode_header(const at::Tensor& tensor);

// Allocates an uninitialised tensor of the shape and dtype that `header`
// describes, on `device`; throws baton::Error naming `from` when the header
// is malformed (a tag collision or a peer that is not baton).
at::Tensor allocate_from_header(const at::Tensor& header, const at::Device& device,
                                const std::string& from);

}  // namespace baton::comm::detail
