#include "baton/pipeline/checkpoint_gather.h"

#include <torch/torch.h>

#include "baton/core/error.h"

namespace baton::checkpoint {

using nlohmann::json;

std::vector<json> all_gather_json(comm::Communicator& group, const json& local,
                                  const std::string& what) {
  if (group.world_size() == 1) return {local};
  // Each member's text travels as bytes in two all-reduces: lengths, then the bytes at its offset.
  const std::string text = local.dump();
  const int size = group.world_size(), rank = group.rank();
  std::vector<torch::Tensor> lengths{torch::zeros({size}, torch::kLong)};
  lengths[0][rank] = static_cast<int64_t>(text.size());
  group.all_reduce_sum(lengths, what + " (lengths)");
  std::vector<int64_t> offsets(size + 1, 0);
  for (int r = 0; r < size; ++r) offsets[r + 1] = offsets[r] + lengths[0][r].item<int64_t>();
  std::vector<torch::Tensor> bytes{torch::zeros({offsets[size]}, torch::kInt)};
  int32_t* data = bytes[0].data_ptr<int32_t>();
  for (size_t i = 0; i < text.size(); ++i)
    data[offsets[rank] + i] = static_cast<unsigned char>(text[i]);
  group.all_reduce_sum(bytes, what);
  data = bytes[0].data_ptr<int32_t>();
  std::vector<json> out;
  for (int r = 0; r < size; ++r) {
    std::string part(static_cast<size_t>(offsets[r + 1] - offsets[r]), '\0');
    for (size_t i = 0; i < part.size(); ++i) part[i] = static_cast<char>(data[offsets[r] + i]);
    out.push_back(json::parse(part));
  }
  return out;
}

std::vector<NamedTensors> gather_shards(comm::Communicator& group,
                                        const std::vector<NamedTensors>& held,
                                        const std::vector<ShardSpan>& spans,
                                        const std::string& what) {
  BATON_ASSERT(held.size() == spans.size(), "one span per item");
  torch::NoGradGuard no_grad;
  // Each member's span of every entry, zeros elsewhere (on the CPU, where
  // the group reduces anyway), summed: exact, and the same on every member.
  std::vector<torch::Tensor> values;
  for (size_t i = 0; i < held.size(); ++i) {
    const ShardSpan& span = spans[i];
    int64_t numel = 1;
    for (int64_t d : span.sizes) numel *= d;
    for (const auto& [name, tensor] : held[i]) {
      if (tensor.dim() == 0) continue;  // a scalar (Adam's step) is every member's
      BATON_CHECK(tensor.numel() == span.length, "[checkpoint] ", what, ": item ", i, " \"", name,
                  "\" has ", tensor.numel(), " elements for a shard of ", span.length);
      torch::Tensor whole = torch::zeros({numel}, tensor.options().device(torch::kCPU));
      whole.narrow(0, span.begin, span.length).copy_(tensor.detach().reshape({-1}));
      values.push_back(whole);
    }
  }
  if (!values.empty()) group.all_reduce_sum(values, what);
  std::vector<NamedTensors> out(held.size());
  size_t k = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    for (const auto& [name, tensor] : held[i]) {
      out[i].emplace_back(name,
                          tensor.dim() == 0 ? tensor.clone() : values[k++].view(spans[i].sizes));
    }
  }
  return out;
}

}  // namespace baton::checkpoint
