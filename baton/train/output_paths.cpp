#include "baton/train/output_paths.h"

#include <vector>

#include "baton/core/output_files.h"

namespace baton::train {

void check_output_paths(const TrainConfig& c) {
  std::vector<NamedPath> outputs;
  for (const NamedPath& out : std::vector<NamedPath>{{"--metrics", c.metrics},
                                                     {"--trace", c.trace},
                                                     {"--svg", c.svg},
                                                     {"--profile-out", c.profile_out}}) {
    if (!out.path.empty()) outputs.push_back(out);
  }
  ::baton::check_output_paths("[train]", outputs,
                              {{"--schedule-file", c.schedule_file}, {"--text", c.text}});
}

}  // namespace baton::train
