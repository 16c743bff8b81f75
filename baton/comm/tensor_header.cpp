#include "baton/comm/tensor_header.h"

#include <vector>

#include "baton/core/error.h"

namespace baton::comm::detail {

at::Tensor encode_header(const at::Tensor& tensor) {
  BATON_CHECK(tensor.dim() <= kMaxDims, "[comm.send] a tensor may have at most ", kMaxDims,
              " dimensions, got ", tensor.dim());
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  auto* out = header.data_ptr<std::int64_t>();
  out[0] = kHeaderMagic;
  out[1] = static_cast<std::int64_t>(tensor.scalar_type());
  out[2] = tensor.dim();
  for (int d = 0; d < tensor.dim(); ++d) out[3 + d] = tensor.size(d);
  return header;
}

at::Tensor allocate_from_header(const at::Tensor& header, const at::Device& device,
                                const std::string& from) {
  const auto* in = header.data_ptr<std::int64_t>();
  BATON_CHECK(in[0] == kHeaderMagic, "[comm.recv] message from ", from,
              " does not start with a baton tensor header (tag collision?)");
  const std::int64_t dtype = in[1];
  const std::int64_t ndim = in[2];
  BATON_CHECK(dtype >= 0 && dtype < static_cast<std::int64_t>(at::ScalarType::NumOptions),
              "[comm.recv] header from ", from, " names unknown dtype ", dtype);
  BATON_CHECK(ndim >= 0 && ndim <= kMaxDims, "[comm.recv] header from ", from, " names ", ndim,
              " dimensions");
  std::vector<std::int64_t> sizes(in + 3, in + 3 + ndim);
  for (std::int64_t size : sizes) {
    BATON_CHECK(size >= 0, "[comm.recv] header from ", from, " names negative size ", size);
  }
  return at::empty(sizes,
                   at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)).device(device));
}

}  // namespace baton::comm::detail
