#include "baton/topology/topology.h"

#include <cstdint>

#include "baton/core/error.h"

namespace baton::topology {

Topology::Topology(int dp, int pp, int tp) : dp_(dp), pp_(pp), tp_(tp) {
  const std::int64_t world = static_cast<std::int64_t>(dp) * pp * tp;
  BATON_CHECK(dp >= 1 && pp >= 1 && tp >= 1 && world <= kMaxWorldSize,
              "[topology] the grid dp=", dp, " x pp=", pp, " x tp=", tp,
              " needs every size >= 1 and at most ", kMaxWorldSize, " ranks in all");
}

void Topology::check_rank(int rank) const {
  BATON_CHECK(rank >= 0 && rank < world_size(), "[topology] rank ", rank,
              " is outside the grid dp=", dp_, " x pp=", pp_, " x tp=", tp_, " (ranks 0..",
              world_size() - 1, ")");
}

Coords Topology::coords(int rank) const {
  check_rank(rank);
  Coords c;
  c.tp = rank % tp_;
  c.dp = rank / tp_ % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

int Topology::rank(const Coords& c) const {
  BATON_CHECK(c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_ && c.tp >= 0 && c.tp < tp_,
              "[topology] coordinates (dp ", c.dp, ", pp ", c.pp, ", tp ", c.tp,
              ") are outside the grid dp=", dp_, " x pp=", pp_, " x tp=", tp_);
  return (c.pp * dp_ + c.dp) * tp_ + c.tp;
}

std::vector<int> Topology::group(GroupKind kind, int rank) const {
  const Coords at = coords(rank);
  const int size = kind == GroupKind::Tp ? tp_ : kind == GroupKind::Dp ? dp_ : pp_;
  std::vector<int> members;
  members.reserve(size);
  for (int i = 0; i < size; ++i) {
    Coords c = at;
    (kind == GroupKind::Tp ? c.tp : kind == GroupKind::Dp ? c.dp : c.pp) = i;
    members.push_back(this->rank(c));
  }
  return members;
}

std::vector<std::vector<int>> Topology::groups(GroupKind kind) const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_size(); ++r) {
    std::vector<int> members = group(kind, r);
    if (members.front() == r) out.push_back(std::move(members));
  }
  return out;
}

void Topology::check_world_size(int world_size) const {
  BATON_CHECK(world_size == this->world_size(), "[topology] the grid dp=", dp_, " x pp=", pp_,
              " x tp=", tp_, " needs ", this->world_size(), " ranks, but the world has ",
              world_size);
}

}  // namespace baton::topology
