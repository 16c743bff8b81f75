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

std::vector<NamedTensors> gather_from_owners(comm::Communicator& group,
                                             const std::vector<NamedTensors>& held,
                                             const std::string& what) {
  if (group.world_size() == 1) return held;
  // First who holds what: {item index: [[name, shape, dtype], ...]} for the items this member
  // holds.
  json mine = json::object();
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].empty()) continue;
    json entries = json::array();
    for (const auto& [name, tensor] : held[i]) {
      entries.push_back({name, tensor.sizes().vec(), static_cast<int>(tensor.scalar_type())});
    }
    mine[std::to_string(i)] = std::move(entries);
  }
  const std::vector<json> all = all_gather_json(group, mine, what + ": who holds what");
  std::vector<int> owner(held.size(), -1);
  std::vector<json> layout(held.size());
  for (int member = 0; member < static_cast<int>(all.size()); ++member) {
    for (const auto& [key, entries] : all[member].items()) {
      const size_t i = std::stoul(key);
      BATON_CHECK(i < held.size() && owner[i] < 0, "[checkpoint] ", what, ": item ", i,
                  " is held by members ", i < held.size() ? owner[i] : -1, " and ", member,
                  " of the group (one owner each)");
      owner[i] = member;
      layout[i] = entries;
    }
  }
  // Then the values: the owner's, zeros elsewhere, summed.
  std::vector<torch::Tensor> values;
  for (size_t i = 0; i < held.size(); ++i) {
    if (owner[i] < 0) continue;
    if (owner[i] == group.rank()) {
      // On the CPU, as the zeros are (the group reduces there anyway).
      for (const auto& [name, tensor] : held[i]) {
        values.push_back(tensor.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
      }
      continue;
    }
    for (const auto& entry : layout[i]) {
      values.push_back(torch::zeros(
          entry[1].get<std::vector<int64_t>>(),
          torch::TensorOptions().dtype(static_cast<c10::ScalarType>(entry[2].get<int>()))));
    }
  }
  if (!values.empty()) group.all_reduce_sum(values, what);
  std::vector<NamedTensors> out(held.size());
  size_t k = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    if (owner[i] < 0) continue;
    for (const auto& entry : layout[i])
      out[i].emplace_back(entry[0].get<std::string>(), values[k++]);
  }
  return out;
}

}  // namespace baton::checkpoint
