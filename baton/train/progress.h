// What rank 0 tells the user while training runs: a progress line every
// --log-every steps, one JSON line per step in --metrics, and the final
// summary (loss, accuracy, time, memory per rank). A step's metrics line holds
// its loss, samples_per_s, step_ms (rank 0's step() and optimizer step) and
// elapsed_ms (rank 0's time since training started, at the step's end: with
// overlapping steps, differences of it give the steady step time).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "baton/train/config.h"
#include "baton/train/memory_report.h"

namespace baton::train {

// What a step reports beyond its loss and time.
struct StepExtras {
  // dp > 1 (else negative: not written): the step's wait for its gradient all-reduces.
  double reduction_wait_ms = -1;
  // dp > 1 (else negative: not written): the leader's gradient all-reduce
  // time in the step and its part exposed past the leader's last compute.
  double reduction_ms = -1;
  double exposed_reduction_ms = -1;
  // --zero with dp > 1 (else negative: not written): the step's wait for its
  // UNSHARD all-gathers.
  double unshard_wait_ms = -1;
  // With --clip-grad-norm (else NaN: not written): the gradients' global
  // norm before the clip, and whether the step was skipped for it.
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  bool skipped = false;
  // fp16 (else 0: not written): the loss scale of the step's backward.
  double loss_scale = 0;
  // The leader's time to read the step's batch (DataSource::batch), before
  // the step's timing starts (negative: not written).
  double data_ms = -1;
};

class Progress {
 public:
  // `leader`: only the leader prints and writes; the others do nothing.
  // Opens the metrics file; throws baton::Error naming it when it cannot.
  // `first_step`: the steps done before (a resumed run), for the ETA.
  Progress(const TrainConfig& config, int64_t total_steps, bool leader, int64_t first_step = 0);

  // After step `step` (0-based) took `step_s` seconds and had mean `loss`.
  // Throws WriteError (output_files.h) when a progress line or a metrics
  // line is lost.
  void step_done(int64_t step, double loss, double step_s, const StepExtras& extras = {});

  // After step `step` (0-based), the held-out loss: a line "valid loss X
  // perplexity Y" and a metrics line {"step", "valid_loss", "valid_perplexity"}.
  void valid_done(int64_t step, double loss);

  // The summary: accuracy < 0 means none. Writes the final metrics line with
  // every rank's memory.
  void finish(double loss, double accuracy, const std::vector<RankMemory>& memory);

 private:
  void write_line(const std::string& line);

  const TrainConfig& config_;
  int64_t total_;
  int64_t first_ = 0;
  bool leader_;
  std::ofstream metrics_;
  std::chrono::steady_clock::time_point started_;
};

// Keeps the lines of the metrics file `path` whose "step" is at most
// `last_step` and drops the rest (the steps of a run that died after its
// checkpoint, and its summary): how a resumed run continues the file. A path
// that is not a regular file is left alone. Throws baton::Error naming it.
void keep_steps_up_to(const std::string& path, int64_t last_step);

// "m:ss" for a number of seconds.
std::string format_eta(double seconds);

}  // namespace baton::train
