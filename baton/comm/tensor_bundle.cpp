#include "baton/comm/tensor_bundle.h"

#include "baton/core/error.h"

namespace baton::comm {
namespace {

constexpr std::int64_t kAlign = 64;

std::int64_t aligned(std::int64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

bool bundled_alone(const at::Tensor& t) {
  return !t.defined() || (t.scalar_type() == at::kByte && t.dim() == 1);
}

// A bundle's header words, each tensor's offset in it, and its bytes.
struct Layout {
  std::vector<std::int64_t> header;
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
};

Layout layout_of(const std::vector<at::Tensor>& tensors) {
  Layout l;
  l.header = {kBundleMagic, static_cast<std::int64_t>(tensors.size())};
  for (const auto& t : tensors) {
    l.header.push_back(t.defined() ? 1 : 0);
    if (!t.defined()) continue;
    l.header.push_back(static_cast<std::int64_t>(t.scalar_type()));
    l.header.push_back(t.dim());
    for (auto size : t.sizes()) l.header.push_back(size);
  }
  l.total = aligned(static_cast<std::int64_t>(l.header.size()) * 8);
  for (const auto& t : tensors) {
    l.offsets.push_back(l.total);
    if (t.defined()) l.total += aligned(static_cast<std::int64_t>(t.numel()) * t.element_size());
  }
  return l;
}

}  // namespace

bool is_bundle(const at::Tensor& t) {
  return t.scalar_type() == at::kByte && t.dim() == 1;
}

bool bundles(const std::vector<at::Tensor>& tensors) {
  return !(tensors.size() == 1 && !bundled_alone(tensors.front()));
}

std::int64_t message_bytes(const std::vector<at::Tensor>& tensors) {
  if (!bundles(tensors)) return tensors.front().numel() * tensors.front().element_size();
  return layout_of(tensors).total;
}

at::Tensor pack_tensors(const std::vector<at::Tensor>& tensors) {
  if (!bundles(tensors)) return tensors.front();
  at::Device device = at::kCPU;
  for (const auto& t : tensors)
    if (t.defined()) device = t.device();
  Layout layout = layout_of(tensors);
  std::vector<std::int64_t>& header = layout.header;  // from_blob takes a mutable pointer
  const std::vector<std::int64_t>& offsets = layout.offsets;
  const std::int64_t total = layout.total;
  at::Tensor bundle = at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
  const auto header_bytes = static_cast<std::int64_t>(header.size()) * 8;
  at::Tensor words = at::from_blob(header.data(), {header_bytes}, at::kByte);
  bundle.narrow(0, 0, header_bytes).copy_(words);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined() || t.numel() == 0) continue;
    BATON_CHECK(t.device() == device,
                "[comm] the tensors of one message must be on one device, "
                "got ",
                t.device(), " and ", device);
    const std::int64_t bytes = t.numel() * t.element_size();
    at::Tensor flat = t.detach().contiguous().view({-1});
    bundle.narrow(0, offsets[i], bytes).copy_(flat.view(at::kByte));
  }
  return bundle;
}

std::vector<at::Tensor> unpack_tensors(const at::Tensor& message, const std::string& from) {
  if (!is_bundle(message)) return {message};
  const std::int64_t n = message.numel();
  // The header is read on the CPU: from a device, the bundle is copied over
  // once (the tensors stay views of the device bundle).
  at::Tensor bytes = message.device().is_cpu() ? message : message.cpu();
  const auto* words = reinterpret_cast<const std::int64_t*>(bytes.data_ptr<std::uint8_t>());
  const std::int64_t available = n / 8;
  std::int64_t w = 0;
  auto next = [&]() {
    BATON_CHECK(w < available, "[comm] a bundle of tensors from ", from,
                " ends inside its header (", n, " bytes)");
    return words[w++];
  };
  BATON_CHECK(next() == kBundleMagic, "[comm] a message from ", from,
              " is a 1-D uint8 tensor but not a bundle of tensors (a tag collision, or a peer "
              "that is not baton)");
  const std::int64_t count = next();
  BATON_CHECK(count >= 0 && count <= available, "[comm] a bundle from ", from, " claims ", count,
              " tensors");
  struct Entry {
    bool defined = false;
    at::ScalarType dtype = at::kFloat;
    std::vector<std::int64_t> sizes;
  };
  std::vector<Entry> entries(static_cast<size_t>(count));
  for (auto& e : entries) {
    e.defined = next() != 0;
    if (!e.defined) continue;
    const std::int64_t dtype = next();
    BATON_CHECK(dtype >= 0 && dtype < static_cast<std::int64_t>(at::ScalarType::NumOptions),
                "[comm] a bundle from ", from, " names scalar type ", dtype);
    e.dtype = static_cast<at::ScalarType>(dtype);
    const std::int64_t ndim = next();
    BATON_CHECK(ndim >= 0 && ndim <= 64, "[comm] a bundle from ", from, " has a tensor of ", ndim,
                " dimensions");
    for (std::int64_t d = 0; d < ndim; ++d) {
      e.sizes.push_back(next());
      BATON_CHECK(e.sizes.back() >= 0, "[comm] a bundle from ", from, " has a negative size");
    }
  }
  std::int64_t offset = aligned(w * 8);
  std::vector<at::Tensor> out;
  for (const auto& e : entries) {
    if (!e.defined) {
      out.emplace_back();
      continue;
    }
    std::int64_t numel = 1;
    for (auto s : e.sizes) numel *= s;
    const std::int64_t bytes = numel * static_cast<std::int64_t>(c10::elementSize(e.dtype));
    BATON_CHECK(offset + bytes <= n, "[comm] a bundle from ", from, " is ", n,
                " bytes, too short for its tensors");
    // A view into the bundle, which the view keeps alive.
    out.push_back(message.narrow(0, offset, bytes).view(e.dtype).view(e.sizes));
    offset += aligned(bytes);
  }
  return out;
}

}  // namespace baton::comm
