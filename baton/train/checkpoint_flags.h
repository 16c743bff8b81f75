// What `baton train` adds to the façade's checkpoints (Pipeline::save/load):
// --save DIR, --save-every N and --resume DIR. A checkpoint's `extra` holds
// the training configuration, the learning-rate schedule's position and the
// data position (the next batch index: batches are a function of (seed,
// step)); --steps stays the total, so a resumed run continues from the saved
// step up to it.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "baton/pipeline/pipeline.h"
#include "baton/train/config.h"
#include "baton/train/data_source.h"

namespace baton::train {

// --resume auto: --save when it holds a checkpoint (its manifest), else
// nothing (a fresh start). Every rank resolves it alike, before training.
// Other values are left as they are. Sets append_metrics when --resume was
// given at all.
void resolve_resume_auto(TrainConfig& config);

// The step of the newest checkpoint in `folder`, or -1 when it holds none.
int64_t newest_checkpoint_step(const std::string& folder);

// Before any rank starts: --resume names a whole checkpoint
// (checkpoint::check: every file's size and CRC-32) of this model (same
// model, layers, hidden, heads, context, in_features, classes,
// tie_embeddings), optimizer, and a step below --steps; --save names a folder
// baton may save into (checkpoint::prepare_save_folder: empty, leftovers of
// an unfinished save, or a checkpoint folder; created now when missing), and
// one that holds a checkpoint only when --resume continues it (names it or a
// step inside it): a fresh run never saves over another run's steps. Throws
// baton::Error naming the flag, the file and the mismatch.
void check_checkpoint_flags(const TrainConfig& config);

// How this run's saves rotate: --keep-last, and the step folder --resume
// read is never removed. Call before the run's first save.
SaveOptions save_options(const TrainConfig& config);

// With --resume, restores the pipeline and optimizer and returns the step to
// continue from (collective-free); 0 without it.
// `data` continues at the checkpoint's next sample (DataSource::resume_at).
int64_t resume_if_asked(const TrainConfig& config, Pipeline& pipeline,
                        torch::optim::Optimizer& optimizer, int64_t total_steps, DataSource& data);

// After `steps_done` steps: saves into --save when --save-every divides it or
// it is the last step (a collective).
// The data position saved is the step, and with --data the next global
// sample, its epoch and `dataset` (dataset_identity), which a resume on
// another dataset must allow (--allow-resume-change data).
void save_if_due(const TrainConfig& config, const Pipeline& pipeline,
                 torch::optim::Optimizer& optimizer, int64_t steps_done, int64_t total_steps,
                 const SaveOptions& options, const DataSource& data,
                 const nlohmann::json& dataset = nullptr);

}  // namespace baton::train
