#include "baton/comm/tag.h"

#include "baton/core/error.h"

namespace baton::comm {

std::string to_string(const Tag& tag) {
  return ::baton::detail::concat("stage ", tag.stage, " micro-batch ", tag.microbatch,
                                 tag.dir == Direction::kForward ? " forward" : " backward");
}

Tag loss_tag(int stages) {
  return Tag{stages - 1, kReservedMicrobatch, Direction::kForward};
}

Tag tied_sum_tag(int group) {
  return Tag{group, kReservedMicrobatch, Direction::kBackward};
}

namespace detail {

int c10d_tag(const Tag& tag, Part part) {
  BATON_CHECK(tag.stage >= 0 && tag.stage < kMaxStages, "[comm.tag] stage must be in [0, ",
              kMaxStages, "), got ", tag.stage);
  BATON_CHECK(tag.microbatch >= 0 && tag.microbatch < kMaxMicrobatches,
              "[comm.tag] micro-batch must be in [0, ", kMaxMicrobatches, "), got ",
              tag.microbatch);
  const std::int64_t value =
      ((static_cast<std::int64_t>(tag.microbatch) * kMaxStages + tag.stage) * 2 +
       static_cast<int>(tag.dir)) *
          2 +
      static_cast<int>(part);
  return static_cast<int>(value);
}

}  // namespace detail
}  // namespace baton::comm
