// The dp x pp x tp grid of ranks. The world is dp * pp * tp ranks numbered in
// Megatron-LM's order: tensor-parallel index fastest, then data-parallel, then
// pipeline, so the tp peers of a rank are neighbouring ranks (on one node):
//
//   rank = (pp_index * dp + dp_index) * tp + tp_index
//
// A rank belongs to one group of each kind: its tp group (same dp and pp
// index), its dp group (same pp and tp index: the replicas that reduce the
// gradients of the same parameters) and its pp group (same dp and tp index:
// one pipeline, stage after stage). Group members are listed in ascending
// rank order, which is the order of the varying index.
#pragma once

#include <vector>

namespace baton::topology {

// Largest world a Topology accepts; far beyond any cluster, and small enough
// that every rank fits in an int.
inline constexpr int kMaxWorldSize = 1 << 20;

struct Coords {
  int dp = 0;
  int pp = 0;
  int tp = 0;

  friend bool operator==(const Coords& a, const Coords& b) {
    return a.dp == b.dp && a.pp == b.pp && a.tp == b.tp;
  }
};

enum class GroupKind { Tp, Dp, Pp };

class Topology {
 public:
  // Throws baton::Error naming all three sizes when one is below 1 or their
  // product exceeds kMaxWorldSize.
  Topology(int dp, int pp, int tp);

  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int tp() const { return tp_; }
  int world_size() const { return dp_ * pp_ * tp_; }

  // REQUIRES (throws otherwise): 0 <= rank < world_size().
  Coords coords(int rank) const;
  // REQUIRES (throws otherwise): every index within its size.
  int rank(const Coords& coords) const;

  // The members of `rank`'s group of `kind`, ascending; `rank` is among them.
  std::vector<int> group(GroupKind kind, int rank) const;
  std::vector<int> tp_group(int rank) const { return group(GroupKind::Tp, rank); }
  std::vector<int> dp_group(int rank) const { return group(GroupKind::Dp, rank); }
  std::vector<int> pp_group(int rank) const { return group(GroupKind::Pp, rank); }

  // Every group of `kind`, ordered by its lowest rank; together they hold
  // each rank exactly once (world_size() / size-of-kind groups).
  std::vector<std::vector<int>> groups(GroupKind kind) const;

  // Throws baton::Error naming the grid when `world_size` != dp * pp * tp
  // (a launcher started a different number of processes).
  void check_world_size(int world_size) const;

 private:
  void check_rank(int rank) const;

  int dp_, pp_, tp_;
};

}  // namespace baton::topology
