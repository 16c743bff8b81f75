#include "baton/train/output_paths.h"

#include <vector>

#include "baton/core/output_files.h"

namespace baton::train {

void check_output_paths(const TrainConfig& c) {
  std::vector<NamedPath> outputs;
  for (const NamedPath& out : std::vector<NamedPath>{{"--metrics", c.metrics},
                                                     {"--trace", c.trace},
                                                     {"--svg", c.svg},
                                                     {"--profile-out", c.profile_out},
                                                     {"--save", c.save, /*folder=*/true}}) {
    if (!out.path.empty()) outputs.push_back(out);  // given ones only: "" means not given here
  }
  std::vector<NamedPath> inputs{{"--config", c.config_file},
                                {"--schedule-file", c.schedule_file},
                                {"--text", c.text},
                                {"--data-dir", c.data_dir, /*folder=*/true}};
  // Resuming from the folder a run saves into (or a kept step of it) is how a run continues.
  if (!c.resume.empty() && (c.save.empty() || !path_within(c.resume, c.save))) {
    inputs.push_back({"--resume", c.resume, /*folder=*/true});
  }
  ::baton::check_output_paths("[train]", outputs, inputs);
}

}  // namespace baton::train
