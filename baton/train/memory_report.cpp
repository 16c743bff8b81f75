#include "baton/train/memory_report.h"

#include <sys/resource.h>

#include <cstdio>

#include "baton/core/error.h"
#include "baton/train/optimizer.h"

namespace baton::train {
namespace {

constexpr int kFields = 9 + comm::kMemoryCategories;

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

RankMemory measure_memory(int rank, const std::vector<torch::Tensor>& parameters,
                          torch::optim::Optimizer& optimizer, double peak_activation_bytes,
                          int weight_versions) {
  RankMemory m;
  m.rank = rank;
  m.weight_versions = weight_versions;
  for (const auto& p : parameters) {
    m.parameter_bytes += bytes_of(p);
    m.gradient_bytes += bytes_of(p.grad());
  }
  m.optimizer_bytes = optimizer_state_bytes(optimizer);
  m.peak_activation_bytes = peak_activation_bytes;
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    m.peak_rss_bytes = usage.ru_maxrss * 1024.0;  // KiB on Linux
  if (comm::memory_counter_installed()) {
    const comm::MemoryFigures figures = comm::memory_figures();
    m.measured_peak_bytes = static_cast<double>(figures.peak_bytes);
    for (int k = 0; k < comm::kMemoryCategories; ++k)
      m.measured[k] = static_cast<double>(figures.at_peak[k]);
  }
  return m;
}

std::vector<RankMemory> gather_memory(comm::Communicator& comm, const RankMemory& local) {
  if (comm.world_size() == 1) return {local};
  const int world = comm.world_size();
  std::vector<torch::Tensor> table{torch::zeros({world, kFields}, torch::kFloat64)};
  std::vector<double> values = {
      local.parameter_bytes,    local.gradient_bytes,
      local.optimizer_bytes,    local.peak_activation_bytes,
      local.peak_rss_bytes,     static_cast<double>(local.weight_versions),
      local.reduction_ms,       local.exposed_reduction_ms,
      local.measured_peak_bytes};
  values.insert(values.end(), local.measured.begin(), local.measured.end());
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
    for (int k = 0; k < comm::kMemoryCategories; ++k)
      out[r].measured[k] = row[9 + k].item<double>();
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
      ", peak activations ", format_bytes(m.peak_activation_bytes), ", peak RSS ",
      format_bytes(m.peak_rss_bytes),
      m.reduction_ms > 0
          ? detail::concat(", all-reduce ", format_ms(m.reduction_ms), " a step (exposed ",
                           format_ms(m.exposed_reduction_ms), ")")
          : std::string());
}

std::string format_measured_memory(const RankMemory& m) {
  if (m.measured_peak_bytes <= 0) return "";
  std::string parts;
  for (int k = 0; k < comm::kMemoryCategories; ++k) {
    parts += detail::concat(k ? ", " : "", comm::to_string(static_cast<comm::MemoryCategory>(k)),
                            " ", format_bytes(m.measured[k]));
  }
  return detail::concat("rank ", m.rank, ": allocator peak ", format_bytes(m.measured_peak_bytes),
                        ": ", parts);
}

nlohmann::json to_json(const RankMemory& m) {
  nlohmann::json measured = nlohmann::json::object();
  for (int k = 0; k < comm::kMemoryCategories; ++k)
    measured[comm::to_string(static_cast<comm::MemoryCategory>(k))] = m.measured[k];
  return {{"rank", m.rank},
          {"measured_peak_bytes", m.measured_peak_bytes},
          {"measured", measured},
          {"parameter_bytes", m.parameter_bytes},
          {"gradient_bytes", m.gradient_bytes},
          {"optimizer_bytes", m.optimizer_bytes},
          {"peak_activation_bytes", m.peak_activation_bytes},
          {"peak_rss_bytes", m.peak_rss_bytes},
          {"weight_versions", m.weight_versions},
          {"reduction_ms", m.reduction_ms},
          {"exposed_reduction_ms", m.exposed_reduction_ms}};
}

}  // namespace baton::train
