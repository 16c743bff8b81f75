// Where training batches come from, by model: synthetic data for mlp,
// Fashion-MNIST for cnn, a text file for gpt and llama. Every rank draws the
// same batches (deterministic in the seed and step), so no data moves between
// ranks; a rank holds only the part its stages read (DataRoles).
#pragma once

#include <torch/types.h>

#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

#include "baton/schedule/schedule.h"
#include "baton/train/config.h"

namespace baton::train {

// What a rank reads of each batch: the ranks of the first stage the inputs,
// those of the last stage the targets, a rank holding both both, a middle
// rank neither (runtime/executor.h: only they use them).
struct DataRoles {
  bool inputs = true;
  bool targets = true;
};

// The roles of pipeline rank `pp_rank` in `lowered` (its placement).
DataRoles data_roles(const schedule::Schedule& lowered, int pp_rank);

class DataSource {
 public:
  virtual ~DataSource() = default;
  // The mini-batch of global step `step` (inputs, targets); a part the
  // source's roles do not read is an undefined tensor.
  virtual std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) = 0;
  // Steps in one epoch; 0 when the source has no epochs (synthetic, text).
  virtual int64_t steps_per_epoch() const = 0;
  // Zeros shaped as `rows` inputs: what a rank that reads no inputs profiles
  // layers on (their times and bytes follow the shape, not the values).
  virtual torch::Tensor zero_inputs(int64_t rows) const = 0;
  // Rows of the held-out set for accuracy; 0 when there is none. The same on
  // every rank, whatever its roles.
  virtual int64_t test_size() const { return 0; }
  // Rows [begin, begin + rows) of the held-out set, the parts of the roles.
  virtual std::pair<torch::Tensor, torch::Tensor> test_rows(int64_t begin, int64_t rows) {
    return {};
  }
  // A resume: the batch of step `step` starts at global sample `next_sample`
  // (and step s's at next_sample + (s - step) * batch). Sources whose
  // batches are a function of the step alone ignore it.
  virtual void resume_at(int64_t step, int64_t next_sample) {}
  // The global sample the batch of `step` starts at; -1 for sources without
  // samples.
  virtual int64_t sample_of_step(int64_t step) const { return -1; }
};

// gpt's and llama's vocabulary: 256 (bytes) for --text; for --data,
// PREFIX.model's piece count where that file exists (a --vocab given too
// must agree), else --vocab, which is then required. Throws baton::Error
// naming the file or the flag.
int64_t vocabulary(const TrainConfig& config);

// --data's identity, as a checkpoint records it: {"path", "index_crc32",
// "index_bytes", "data_bytes", "tokens"} (null without --data).
nlohmann::json dataset_identity(const TrainConfig& config);

// --valid's first eval_batches batches in order, the parts `roles` reads,
// as a DataSource's held-out set (test_size, test_rows); null without --valid.
std::unique_ptr<DataSource> make_valid_source(const TrainConfig& config, DataRoles roles);

// Throws baton::Error naming the file when the data is missing or malformed.
// Only the parts `roles` names are read and held (a middle rank holds none,
// and maps no file). With --data and dp > 1, replica `replica` reads only its
// share of each batch's rows (the others stay 0: the Pipeline hands each
// replica its own), so the replicas read disjoint shares.
std::unique_ptr<DataSource> make_data_source(const TrainConfig& config, DataRoles roles = {},
                                             int replica = 0);

// Checks that the data make_data_source needs is there and well formed,
// before ranks start: Fashion-MNIST is decompressed into its cache once and
// its headers, shapes and labels checked; the text file is read. Throws the
// same errors.
void check_data(const TrainConfig& config);

}  // namespace baton::train
