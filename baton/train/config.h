// The training configuration: a TOML file (flat keys named like the CLI's
// flags, with '_' for '-') with command-line flags overriding it. Each
// setting is declared once, in options.h's table.
//
//   model = "cnn"          # mlp | cnn | gpt | llama | resnet
//   pp = 2
//   schedule = "1f1b"
//   microbatches = 4
//   batch = 64
//   epochs = 1             # or steps = 200
//   lr = 0.001
//   optimizer = "adam"     # sgd | adam | adamw
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/choices.h"

namespace baton::train {

// The longest --timeout accepted: a week; beyond that it is a typo.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;
// The largest --bucket-mb: 1 TiB, far above any stage's gradients.
inline constexpr int kMaxBucketMb = 1 << 20;
// Saves kept in --save's folder when --keep-last is not given.
inline constexpr int kDefaultKeepLast = 2;

struct TrainConfig {
  // Model
  std::string model = "mlp";    // mlp | cnn | gpt | llama | resnet
  int layers = 8;               // mlp: Linear layers; gpt: transformer blocks; resnet: blocks
  int hidden = 256;             // mlp, gpt; resnet: the first stage's bottleneck width
  int heads = 4;                // gpt
  int context = 64;             // gpt: tokens per sample
  bool tie_embeddings = false;  // gpt: the LM head's weight is the token embedding's
  int in_features = 64;         // mlp (synthetic data)
  int classes = 10;             // mlp (synthetic data)
  std::string text;             // gpt corpus; empty: /usr/share/common-licenses/GPL-3
  // gpt, llama: a tokenized corpus (data/token_dataset.h) instead of text:
  // PREFIX of PREFIX.idx/.bin (megatron) or a flat file (flat-uint16,
  // flat-uint32); its vocabulary from PREFIX.model, else `vocab`.
  std::string data;
  std::string data_format = "megatron";
  int vocab = 0;  // 0: not given (PREFIX.model's, or 256 for text)
  // A held-out corpus in the same format, evaluated every `eval_every`
  // steps (and at the end) on its first `eval_batches` batches, in order.
  std::string valid;
  int eval_every = 0;
  int eval_batches = 4;
  std::string data_dir;   // cnn, resnet: Fashion-MNIST .gz folder; empty: Debian's
  std::string cache_dir;  // cache root, a folder per data_dir in it; empty: ~/.cache/baton
  // cnn, resnet: each training image moved by up to augment_shift pixels
  // (0 to 8) and mirrored with probability 1/2, drawn from (seed, step)
  // (data::augment_images).
  bool augment = false;
  int augment_shift = 2;
  // cnn, resnet, mlp: the test set's accuracy at the end of training; off,
  // the run ends after its last step (to time or measure the steps alone:
  // the resnet's 10,000 test images take minutes on one thread).
  bool test_set = true;
  // Pipeline, data and tensor parallelism: dp * pp * tp ranks
  int pp = 2;
  int dp = 1;                       // replicas of the pipeline; batch is the global batch over them
  double bucket_mb = 25;            // dp gradient buckets, MiB (DDP's bucket_cap_mb)
  bool overlap_grad_reduce = true;  // REDUCE_GRAD right after each bucket's last backward
  // Refuse a layout whose predicted peak on any rank (the activation model,
  // sim/memory_model.h) exceeds this many GB (1e9 bytes); 0: no cap.
  double max_memory_gb = 0;
  // Global-norm gradient clipping (PipelineOptions::clip_grad_norm); 0: off.
  // The flag and the TOML key take a finite norm above 0 only.
  double clip_grad_norm = 0;
  // The layers' compute dtype: fp32 | bf16 | fp16 (PipelineOptions::precision).
  Precision precision = Precision::Fp32;
  int zero = 0;                  // ZeRO stage 0-3 over dp (PipelineOptions::zero)
  bool prefetch_unshard = true;  // each UNSHARD one compute ahead of its stage's first
  int tp = 1;  // tensor-parallel ranks per stage (gpt, llama, mlp; PipelineOptions::tp)
  bool tp_scatter_gather = true;  // Megatron's scatter/gather of boundary activations over tp
  std::string schedule = "1f1b";
  int virtual_stages = 0;  // 0: the schedule's default (given values must be >= 1)
  // A schedule file (text or PyTorch CSV) instead of `schedule`: its ranks
  // must equal pp, its micro-batches set `microbatches`.
  std::string schedule_file;
  // End every step with a blocking all-reduce of the loss (PipelineOptions::step_barrier).
  bool step_barrier = false;
  int microbatches = 4;
  std::string balance = "uniform";         // uniform|params|time|memory|optimal|"3,5,..."
  Recompute recompute = Recompute::Never;  // never | except_last | always | selective
  // Schedule pipemare only (runtime/pipemare.h; a value other than these
  // defaults with another schedule is refused): T1's learning-rate warm-up in
  // steps (0: off), T2's discrepancy correction on or off, and T2's decay D
  // in [0, 1).
  int pipemare_warmup = 100;
  bool pipemare_correction = true;
  double pipemare_decay = 0.5;
  // Optimisation
  int batch = 64;
  int steps = 0;   // 0: not given; run `epochs` epochs (or 100 steps without a dataset)
  int epochs = 0;  // 0: not given (given values of steps and epochs must be >= 1)
  double lr = 0.001;
  LrSchedule lr_schedule = LrSchedule::Constant;  // constant | cosine (decays to 0 over the run)
  int warmup_steps = 0;  // linear warm-up from lr / N over the first N steps (learning_rate)
  Optimizer optimizer = Optimizer::Adam;
  // L2 penalty (sgd, adam) or decoupled decay (adamw), finite and >= 0.
  // AdamW's default is LibTorch's 0.01; -1 stands for "not given".
  double weight_decay = -1;
  // Cross entropy against targets smoothed by this much (nn::ModelOptions), in [0, 1).
  double label_smoothing = 0;
  uint64_t seed = 1;
  // Processes
  int threads = 0;         // intra-op threads per rank; 0: cores / local ranks
  double timeout_s = 300;  // every wait between ranks, at most kMaxTimeoutSeconds
  TransportKind transport = TransportKind::kAuto;  // point-to-point: auto | shm | gloo
  // cpu | cuda (each rank on cuda:LOCAL_RANK, NCCL between them) | cuda:N
  // (every rank on GPU N): a string, as it carries an index (parse_device).
  std::string device = "cpu";
  bool realtime = false;  // each rank in SCHED_FIFO (baton/core/realtime.h)
  // Output
  std::string metrics;       // JSON lines file
  std::string trace;         // Chrome trace of the last step's measured timeline
  std::string svg;           // SVG of the last step's measured timeline
  bool compare_sim = false;  // print measured vs simulated step time
  std::string profile_out;   // write the layers' profile (JSON) and exit without training
  int log_every = 1;         // progress line every N steps
  // Checkpoints (baton/pipeline/checkpoint.h)
  std::string save;    // folder to save into at the end (and every save_every steps)
  int save_every = 0;  // 0: only at the end; needs save
  // Folder of a checkpoint to continue from (up to steps in all); "auto":
  // --save's newest checkpoint when it has one, else a fresh start
  // (resolve_resume_auto). A resumed run continues --metrics
  // (progress.h, keep_steps_up_to).
  std::string resume;
  // The local launcher (--nproc) restarts every rank from --save's newest
  // checkpoint up to this many times when a rank dies; needs --save.
  int max_restarts = 0;
  // Derived, not a flag: --resume was given (a restart's too, even an auto
  // that resolved to a fresh start), so --metrics is continued instead of
  // truncated. Set by resolve_resume_auto.
  bool append_metrics = false;
  // Derived, not flags: this process runs one rank (RANK set), and baton's
  // launcher checked the input before starting it. --data's whole-corpus
  // checks run where nothing did (check_data), never on every rank.
  bool in_rank = false;
  bool launcher_checked = false;
  // Saves kept in `save` (SaveOptions::keep_last), at least 1; 0: not given
  // (kDefaultKeepLast).
  int keep_last = 0;
  // What a resume may change from the checkpoint's run: a comma-separated
  // subset of batch, seed, lr-schedule, clip-grad-norm, precision (empty:
  // none; a change is refused).
  std::string allow_resume_change;
  // The TOML file the config was read from (empty: none): an input that no
  // output may overwrite.
  std::string config_file;
};

// TrainConfig::allow_resume_change split at its commas ({} when empty).
std::vector<std::string> resume_change_keys(const TrainConfig& c);

// A config holds a few dozen keys; anything larger is not one.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

// Reads a TOML file into `config` (only keys present change). Throws
// baton::Error naming the file, the key and the problem for a file that is
// missing, not regular (/dev/zero) or larger than kMaxConfigBytes, malformed
// TOML, unknown keys, values of the wrong type, integers out of their range,
// and steps, epochs or virtual below 1. The deprecated key "checkpoint" sets
// `recompute` and appends one line to *deprecations (when given).
void load_toml(const std::string& path, TrainConfig& config,
               std::vector<std::string>* deprecations = nullptr);

// load_toml for TOML text already in memory; `name` stands for the file in
// messages. Throws only baton::Error (fuzz/config_toml_fuzz.cpp).
void load_toml_text(std::string_view text, const std::string& name, TrainConfig& config,
                    std::vector<std::string>* deprecations = nullptr);

// Checks values that need no model or world: positive sizes, known names,
// a finite lr and timeout, threads within available_cores().
void check_config(const TrainConfig& config);

// The cores this process may run on (its CPU affinity), at least 1.
int available_cores();

}  // namespace baton::train
