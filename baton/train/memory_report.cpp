#include "baton/train/memory_report.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>

#include "baton/comm/communicator.h"
#include "baton/comm/device_memory.h"
#include "baton/comm/transport_limits.h"
#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/train/optimizer.h"
#include "baton/train/trainer.h"

namespace baton::train {
namespace {

constexpr int kFields = 13 + 2 * comm::kMemoryCategories;

// "512 B", "5.25 kB", "1.20 MB", "8.07 GB".
std::string format_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

// "12.30 ms".
std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", ms);
  return text;
}

}  // namespace

double RankMemory::peak_activation_bytes() const {
  const bool counted = !measured_on_device && measured_peak_bytes > 0;
  return counted ? measured[static_cast<int>(comm::MemoryCategory::kActivations)]
                 : peak_stage_input_bytes;
}

const char* RankMemory::measured_by() const {
  if (measured_on_device) return "cuda caching allocator";
  return measured_peak_bytes > 0 ? "cpu counter" : "none";
}

RankMemory measure_memory(int rank, const std::vector<torch::Tensor>& parameters,
                          torch::optim::Optimizer& optimizer, double peak_activation_bytes,
                          int weight_versions) {
  RankMemory m;
  m.rank = rank;
  m.weight_versions = weight_versions;
  // Each storage once: ZeRO's shards may be views of the parameters and of
  // their gradients.
  std::set<const void*> seen;
  auto held = [&](const torch::Tensor& t) {
    if (!t.defined() || t.storage().nbytes() == 0) return 0.0;
    if (!seen.insert(t.storage().unsafeGetStorageImpl()).second) return 0.0;
    return static_cast<double>(t.storage().nbytes());
  };
  for (const auto& p : parameters) m.parameter_bytes += held(p);
  for (const auto& p : parameters) m.gradient_bytes += held(p.grad());
  m.optimizer_bytes = optimizer_state_bytes(optimizer);
  m.peak_stage_input_bytes = peak_activation_bytes;
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    m.peak_rss_bytes = usage.ru_maxrss * 1024.0;  // KiB on Linux
  return m;
}

MessageTerms message_terms(const TrainConfig& c, torch::Device device) {
  MessageTerms terms;
  if (!device.is_cpu()) {
    terms.sends_copied_up_to = std::numeric_limits<double>::infinity();
    terms.receives_on_arrival_up_to = std::numeric_limits<double>::infinity();
  } else if (c.transport != TransportKind::kGloo) {
    terms.sends_copied_up_to = static_cast<double>(comm::shm_inline_bytes());
    terms.receives_on_arrival_up_to = static_cast<double>(comm::shm_kept_receive_bytes()) - 1;
  }
  return terms;
}

void take_allocator_peak(RankMemory& m, torch::Device device) {
  if (const auto gpu = comm::device_memory(device)) {
    m.measured_on_device = true;
    m.measured_peak_bytes = static_cast<double>(gpu->peak_allocated_bytes);
    m.measured_requested_peak_bytes = static_cast<double>(gpu->peak_requested_bytes);
    m.measured_reserved_peak_bytes = static_cast<double>(gpu->peak_reserved_bytes);
  } else if (comm::memory_counter_installed()) {
    const comm::MemoryFigures figures = comm::memory_figures();
    m.measured_peak_bytes = static_cast<double>(figures.peak_bytes);
    for (int k = 0; k < comm::kMemoryCategories; ++k)
      m.measured[k] = static_cast<double>(figures.at_peak[k]);
  }
}

void copy_allocator_peak(RankMemory& to, const RankMemory& from) {
  to.measured_on_device = from.measured_on_device;
  to.measured_peak_bytes = from.measured_peak_bytes;
  to.measured_requested_peak_bytes = from.measured_requested_peak_bytes;
  to.measured_reserved_peak_bytes = from.measured_reserved_peak_bytes;
  to.measured = from.measured;
}

std::vector<RankMemory> gather_memory(comm::Communicator& comm, const RankMemory& local) {
  if (comm.world_size() == 1) return {local};
  const int world = comm.world_size();
  std::vector<torch::Tensor> table{torch::zeros({world, kFields}, torch::kFloat64)};
  std::vector<double> values = {local.parameter_bytes,
                                local.gradient_bytes,
                                local.optimizer_bytes,
                                local.peak_stage_input_bytes,
                                local.peak_rss_bytes,
                                static_cast<double>(local.weight_versions),
                                local.reduction_ms,
                                local.exposed_reduction_ms,
                                local.measured_peak_bytes,
                                local.predicted_peak_bytes,
                                local.measured_on_device ? 1.0 : 0.0,
                                local.measured_requested_peak_bytes,
                                local.measured_reserved_peak_bytes};
  values.insert(values.end(), local.measured.begin(), local.measured.end());
  values.insert(values.end(), local.predicted.begin(), local.predicted.end());
  for (int i = 0; i < kFields; ++i) table[0][local.rank][i] = values[i];
  comm.all_reduce_sum(table, "the memory report gather");
  std::vector<RankMemory> out(world);
  for (int r = 0; r < world; ++r) {
    auto row = table[0][r];
    out[r] = RankMemory{r,
                        row[0].item<double>(),
                        row[1].item<double>(),
                        row[2].item<double>(),
                        row[3].item<double>(),
                        row[4].item<double>(),
                        static_cast<int>(row[5].item<double>()),
                        row[6].item<double>(),
                        row[7].item<double>(),
                        row[8].item<double>()};
    out[r].predicted_peak_bytes = row[9].item<double>();
    out[r].measured_on_device = row[10].item<double>() != 0;
    out[r].measured_requested_peak_bytes = row[11].item<double>();
    out[r].measured_reserved_peak_bytes = row[12].item<double>();
    for (int k = 0; k < comm::kMemoryCategories; ++k) {
      out[r].measured[k] = row[13 + k].item<double>();
      out[r].predicted[k] = row[13 + comm::kMemoryCategories + k].item<double>();
    }
  }
  return out;
}

std::string format_memory(const RankMemory& m) {
  const std::string versions = m.weight_versions > 1
                                   ? detail::concat(", weight versions ", m.weight_versions)
                                   : std::string();
  return detail::concat(
      "rank ", m.rank, ": parameters ", format_bytes(m.parameter_bytes), versions, ", gradients ",
      format_bytes(m.gradient_bytes), ", optimizer ", format_bytes(m.optimizer_bytes),
      ", peak activations ", format_bytes(m.peak_activation_bytes()), ", peak RSS ",
      format_bytes(m.peak_rss_bytes),
      m.reduction_ms > 0
          ? detail::concat(", all-reduce ", format_ms(m.reduction_ms), " a step (exposed ",
                           format_ms(m.exposed_reduction_ms), ")")
          : std::string());
}

namespace {

std::string by_category(const std::array<double, comm::kMemoryCategories>& bytes) {
  std::string parts;
  for (int k = 0; k < comm::kMemoryCategories; ++k) {
    parts += detail::concat(k ? ", " : "", comm::to_string(static_cast<comm::MemoryCategory>(k)),
                            " ", format_bytes(bytes[k]));
  }
  return parts;
}

nlohmann::json by_category_json(const std::array<double, comm::kMemoryCategories>& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (int k = 0; k < comm::kMemoryCategories; ++k)
    out[comm::to_string(static_cast<comm::MemoryCategory>(k))] = bytes[k];
  return out;
}

}  // namespace

std::string format_measured_memory(const RankMemory& m) {
  if (m.measured_peak_bytes <= 0) return "";
  if (m.measured_on_device) {
    return detail::concat("rank ", m.rank, ": CUDA caching allocator peak ",
                          format_bytes(m.measured_peak_bytes), " allocated (",
                          format_bytes(m.measured_requested_peak_bytes), " asked for, ",
                          format_bytes(m.measured_reserved_peak_bytes), " reserved)");
  }
  return detail::concat("rank ", m.rank, ": allocator peak ", format_bytes(m.measured_peak_bytes),
                        ": ", by_category(m.measured));
}

std::string format_predicted_memory(const RankMemory& m) {
  if (m.predicted_peak_bytes <= 0) return "";
  std::string ratio;
  if (m.measured_peak_bytes > 0) {
    char text[48];
    std::snprintf(text, sizeof text, " (%.3f of the allocator's)",
                  m.predicted_peak_bytes / m.measured_peak_bytes);
    ratio = text;
  }
  return detail::concat("rank ", m.rank, ": predicted peak ", format_bytes(m.predicted_peak_bytes),
                        ratio, ": ", by_category(m.predicted));
}

double optimizer_state_per_parameter_byte(Optimizer optimizer) {
  // Adam and AdamW: the two moments; SGD here has no momentum.
  return optimizer == Optimizer::Sgd ? 0 : 2;
}

std::string memory_cap_refusal(const std::vector<RankMemory>& all, double cap_gb) {
  const auto most = [&](auto figure) {
    return *std::max_element(all.begin(), all.end(), [&](const RankMemory& a, const RankMemory& b) {
      return figure(a) < figure(b);
    });
  };
  constexpr int kParameters = static_cast<int>(comm::MemoryCategory::kParameters);
  const RankMemory& heaviest = most([](const RankMemory& m) { return m.predicted[kParameters]; });
  const RankMemory& highest = most([](const RankMemory& m) { return m.predicted_peak_bytes; });
  const double cap = cap_gb * 1e9;
  if (highest.predicted_peak_bytes <= cap) return "";
  char given[32];
  std::snprintf(given, sizeof given, "%g", cap_gb);
  if (heaviest.predicted[kParameters] > cap) {
    return detail::concat(
        "[train] --max-memory-gb ", given, ": rank ", heaviest.rank, "'s parameters alone take ",
        format_bytes(heaviest.predicted[kParameters]), ", above the cap of ", format_bytes(cap),
        "; raise the cap or cut the model over more ranks (--pp)");
  }
  const auto largest = std::max_element(highest.predicted.begin(), highest.predicted.end());
  return detail::concat(
      "[train] --max-memory-gb ", given, ": rank ", highest.rank, " is predicted to hold ",
      format_bytes(highest.predicted_peak_bytes), " at its peak, above the cap of ",
      format_bytes(cap), " (its largest part: ",
      comm::to_string(static_cast<comm::MemoryCategory>(largest - highest.predicted.begin())), " ",
      format_bytes(*largest),
      "); raise the cap, or hold less: a schedule with fewer micro-batches in flight (1f1b), "
      "--recompute always, more --pp");
}

void check_memory_cap(comm::Communicator& comm, int rank, const sim::MemoryPrediction& predicted,
                      double cap_gb) {
  RankMemory local;
  local.rank = rank;
  set_prediction(local, predicted);
  const std::string refusal = memory_cap_refusal(gather_memory(comm, local), cap_gb);
  if (refusal.empty()) return;
  throw RefusedBeforeFirstStep(rank == 0 ? refusal : "");
}

void set_prediction(RankMemory& memory, const sim::MemoryPrediction& p) {
  memory.predicted_peak_bytes = p.peak;
  memory.predicted = {p.parameters, p.gradients, p.optimizer, p.activations, p.buffers, p.other};
}

nlohmann::json to_json(const RankMemory& m) {
  return {
      {"rank", m.rank},
      {"predicted_peak_bytes", m.predicted_peak_bytes},
      {"predicted", by_category_json(m.predicted)},
      {"measured_peak_bytes", m.measured_peak_bytes},
      {"measured", m.measured_on_device ? nlohmann::json::object() : by_category_json(m.measured)},
      {"measured_by", m.measured_by()},
      {"parameter_bytes", m.parameter_bytes},
      {"gradient_bytes", m.gradient_bytes},
      {"optimizer_bytes", m.optimizer_bytes},
      {"peak_activation_bytes", m.peak_activation_bytes()},
      {"peak_stage_input_bytes", m.peak_stage_input_bytes},
      {"peak_rss_bytes", m.peak_rss_bytes},
      {"weight_versions", m.weight_versions},
      {"reduction_ms", m.reduction_ms},
      {"exposed_reduction_ms", m.exposed_reduction_ms}};
}

}  // namespace baton::train
