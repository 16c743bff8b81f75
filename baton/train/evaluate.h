// Test accuracy of a classifier: a forward-only pass of the pipeline over the
// data source's held-out set.
#pragma once

#include "baton/nn/layer_spec.h"
#include "baton/pipeline/pipeline.h"
#include "baton/train/data_source.h"

namespace baton::train {

// Collective. The fraction of the test set whose arg-max output equals the
// label, the same on every rank; -1 when the source has no test set. Runs
// batches of config.batch samples with up to config.microbatches micro-batches.
double test_accuracy(Pipeline& pipeline, DataSource& data, const TrainConfig& config);

// Collective. The model's loss (its mean over the samples) on `data`'s
// held-out set, by the forward-only schedule, the same on every rank; NaN
// when the set is empty.
double valid_loss(Pipeline& pipeline, const nn::ModelSpec& model, DataSource& data,
                  const TrainConfig& config);

}  // namespace baton::train
