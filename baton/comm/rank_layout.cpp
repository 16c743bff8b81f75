#include "baton/comm/rank_layout.h"

#include <utility>

#include "baton/comm/comm_state.h"
#include "baton/core/error.h"

namespace baton::comm {

std::shared_ptr<Communicator> solo(std::chrono::milliseconds timeout) {
  auto state =
      std::make_shared<detail::CommState>(compat::BackendPtr(), c10::intrusive_ptr<c10d::Store>(),
                                          0, 1, timeout, at::Device(at::kCPU), "solo");
  return std::make_shared<Communicator>(std::move(state));
}

std::shared_ptr<Communicator> borrow(Communicator& world) {
  return std::shared_ptr<Communicator>(std::shared_ptr<Communicator>(), &world);
}

RankLayout make_rank_layout(std::shared_ptr<Communicator> world, const topology::Topology& grid,
                            int local_rank) {
  BATON_CHECK(world != nullptr, "[comm.rank_layout] no world communicator");
  grid.check_world_size(world->world_size());
  BATON_CHECK(local_rank >= 0, "[comm.rank_layout] local rank must be >= 0, got ", local_rank);
  RankLayout layout;
  layout.grid = grid;
  layout.here = grid.coords(world->rank());
  layout.local_rank = local_rank;
  // Every rank makes its groups in the same order: tp, then dp.
  auto group = [&](topology::GroupKind kind, int size, const char* name) {
    if (size == 1) return solo(world->timeout());
    return std::make_shared<Communicator>(world->new_group(grid.group(kind, world->rank()), name));
  };
  layout.tp = group(topology::GroupKind::Tp, grid.tp(), "tp");
  layout.dp = group(topology::GroupKind::Dp, grid.dp(), "dp");
  layout.world = std::move(world);
  return layout;
}

}  // namespace baton::comm
