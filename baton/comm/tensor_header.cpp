#include "baton/comm/tensor_header.h"

#include "baton/core/error.h"

namespace baton::comm::detail {

std::int64_t TensorHeader::payload_bytes() const {
  std::int64_t numel = 1;
  for (std::int64_t size : sizes()) numel *= size;
  return numel * static_cast<std::int64_t>(c10::elementSize(dtype()));
}

TensorHeader encode_header(const at::Tensor& tensor, MessageKind kind) {
  BATON_CHECK(tensor.dim() <= kMaxDims, "[comm.send] a tensor may have at most ", kMaxDims,
              " dimensions, got ", tensor.dim());
  TensorHeader header;
  header.words[0] = kHeaderMagic;
  header.set_kind(kind);
  header.words[2] = static_cast<std::int64_t>(tensor.scalar_type());
  header.words[3] = tensor.dim();
  for (int d = 0; d < tensor.dim(); ++d) header.words[4 + d] = tensor.size(d);
  return header;
}

void check_header(const TensorHeader& header, const std::string& from) {
  const auto& w = header.words;
  BATON_CHECK(w[0] == kHeaderMagic, "[comm.recv] message from ", from,
              " does not start with a baton tensor header (tag collision?)");
  BATON_CHECK(w[1] >= 0 && w[1] <= static_cast<std::int64_t>(MessageKind::kGloo),
              "[comm.recv] header from ", from, " names unknown message kind ", w[1]);
  BATON_CHECK(w[2] >= 0 && w[2] < static_cast<std::int64_t>(at::ScalarType::NumOptions),
              "[comm.recv] header from ", from, " names unknown dtype ", w[2]);
  BATON_CHECK(w[3] >= 0 && w[3] <= kMaxDims, "[comm.recv] header from ", from, " names ", w[3],
              " dimensions");
  for (std::int64_t size : header.sizes()) {
    BATON_CHECK(size >= 0, "[comm.recv] header from ", from, " names negative size ", size);
  }
}

at::Tensor allocate_from_header(const TensorHeader& header, const at::Device& device) {
  return at::empty(header.sizes(), at::TensorOptions().dtype(header.dtype()).device(device));
}

}  // namespace baton::comm::detail
