#include "baton/partition/partition.h"

#include <algorithm>
#include <charconv>

#include "baton/core/error.h"

namespace baton::partition {
namespace {

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

const char* plural(long long n) {
  return n == 1 ? "" : "s";
}

}  // namespace

Partition::Partition(std::vector<int> layers_per_stage) : counts_(std::move(layers_per_stage)) {
  first_.reserve(counts_.size() + 1);
  first_.push_back(0);
  for (size_t s = 0; s < counts_.size(); ++s) {
    BATON_CHECK(counts_[s] >= 1, "[partition] stage ", s, " has ", counts_[s],
                " layers; every stage needs at least one layer");
    first_.push_back(first_.back() + counts_[s]);
  }
}

std::vector<int> Partition::boundaries() const {
  return std::vector<int>(first_.begin(), first_.end() - (first_.empty() ? 0 : 1));
}

int Partition::stage_of_layer(int layer) const {
  BATON_CHECK(layer >= 0 && layer < layers(), "[partition.stage_of_layer] layer ", layer,
              " is outside the model's ", layers(), " layers");
  // first_ is strictly increasing: the stage is the last one starting at or before `layer`.
  const auto after = std::upper_bound(first_.begin(), first_.end(), layer);
  return static_cast<int>(after - first_.begin()) - 1;
}

std::string Partition::to_string() const {
  std::string out;
  for (size_t s = 0; s < counts_.size(); ++s) {
    if (s > 0) out += ',';
    out += std::to_string(counts_[s]);
  }
  return out;
}

std::ostream& operator<<(std::ostream& out, const Partition& partition) {
  return out << partition.to_string();
}

Partition parse_partition(std::string_view text, int stages, int layers) {
  const std::string shown(trim(text));
  BATON_CHECK(!shown.empty(), "[partition.balance] --balance is empty; expected ", stages,
              " comma-separated layer counts such as 3,5,4");
  std::vector<int> counts;
  long long sum = 0;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view token = trim(rest.substr(0, comma));
    int count = 0;
    const auto [end, status] = std::from_chars(token.data(), token.data() + token.size(), count);
    BATON_CHECK(!token.empty() && status == std::errc() && end == token.data() + token.size(),
                "[partition.balance] --balance ", shown, ": \"", std::string(token),
                "\" is not a layer count");
    BATON_CHECK(count >= 1, "[partition.balance] --balance ", shown, ": stage ", counts.size(),
                " has ", count, " layers; every stage needs at least one layer");
    counts.push_back(count);
    sum += count;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  BATON_CHECK(static_cast<int>(counts.size()) == stages, "[partition.balance] --balance ", shown,
              " gives ", counts.size(), " stage", plural(static_cast<long long>(counts.size())),
              " but the pipeline has ", stages);
  BATON_CHECK(sum == layers, "[partition.balance] --balance ", shown, " sums to ", sum, " layer",
              plural(sum), " but the model has ", layers);
  return Partition(std::move(counts));
}

}  // namespace baton::partition
