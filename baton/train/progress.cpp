#include "baton/train/progress.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/core/output_files.h"

namespace baton::train {

using Clock = std::chrono::steady_clock;

std::string format_eta(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

void keep_steps_up_to(const std::string& path, int64_t last_step) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;  // a pipe, /dev/stdout: as it is
  std::ifstream in(path);
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool earlier = parsed.is_object() && parsed.contains("step") &&
                         parsed["step"].is_number_integer() &&
                         parsed["step"].get<int64_t>() <= last_step;
    if (earlier) {
      kept += line + "\n";
    } else {
      dropped = true;
    }
  }
  BATON_CHECK(!in.bad(), "[train] cannot read the metrics file \"", path, "\"");
  if (!dropped) return;
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kept;
    out.flush();
    BATON_CHECK(out.good(), "[train] cannot rewrite the metrics file \"", path,
                "\": ", std::strerror(errno));
  }
  BATON_CHECK(std::rename(temporary.c_str(), path.c_str()) == 0,
              "[train] cannot rewrite the metrics file \"", path, "\": ", std::strerror(errno));
}

Progress::Progress(const TrainConfig& config, int64_t total_steps, bool leader, int64_t first_step)
    : config_(config),
      total_(total_steps),
      first_(first_step),
      leader_(leader),
      started_(Clock::now()) {
  if (leader_ && !config_.metrics.empty()) {
    // A resumed run (a restart among them) continues the file: it keeps the
    // lines of the steps its checkpoint holds and adds its own, so that the
    // file reads as one undisturbed run's.
    if (config_.append_metrics) keep_steps_up_to(config_.metrics, first_);
    metrics_.open(config_.metrics, config_.append_metrics ? std::ios::app : std::ios::out);
    BATON_CHECK(metrics_.good(), "[train] cannot write metrics file \"", config_.metrics, "\"");
  }
}

void Progress::write_line(const std::string& line) {
  if (!metrics_.is_open()) return;
  metrics_ << line << "\n";
  metrics_.flush();
  BATON_CHECK(metrics_.good(), "[train] cannot write the metrics file \"", config_.metrics,
              "\": ", std::strerror(errno));
}

void Progress::step_done(int64_t step, double loss, double step_s, const StepExtras& extras) {
  if (!leader_) return;
  const double samples_per_s = config_.batch / std::max(1e-9, step_s);
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const double eta = elapsed / std::max<int64_t>(1, step + 1 - first_) * (total_ - step - 1);
  if ((step + 1) % config_.log_every == 0 || step + 1 == total_) {
    std::printf("step %lld/%lld  loss %.4f  samples/s %.1f  ETA %s\n",
                static_cast<long long>(step + 1), static_cast<long long>(total_), loss,
                samples_per_s, format_eta(eta).c_str());
    flush_stdout("[train]");  // every progress line: a lost one stops the run
  }
  nlohmann::json line{{"step", step + 1},
                      {"loss", loss},
                      {"samples_per_s", samples_per_s},
                      {"step_ms", step_s * 1000},
                      {"elapsed_ms", elapsed * 1000}};
  if (extras.reduction_wait_ms >= 0) line["reduce_wait_ms"] = extras.reduction_wait_ms;
  if (extras.reduction_ms >= 0) line["reduce_ms"] = extras.reduction_ms;
  if (extras.exposed_reduction_ms >= 0) line["reduce_exposed_ms"] = extras.exposed_reduction_ms;
  if (extras.unshard_wait_ms >= 0) line["unshard_wait_ms"] = extras.unshard_wait_ms;
  // JSON has no infinity or NaN: a norm that is not finite is written as null.
  if (!std::isnan(extras.grad_norm) || extras.skipped)
    line["grad_norm"] =
        std::isfinite(extras.grad_norm) ? nlohmann::json(extras.grad_norm) : nullptr;
  if (extras.skipped) line["skipped"] = true;
  if (extras.loss_scale > 0) line["loss_scale"] = extras.loss_scale;
  if (extras.data_ms >= 0) line["data_ms"] = extras.data_ms;
  write_line(line.dump());
}

void Progress::valid_done(int64_t step, double loss) {
  if (!leader_) return;
  const double perplexity = std::exp(loss);
  std::printf("step %lld/%lld  valid loss %.4f  perplexity %.2f\n",
              static_cast<long long>(step + 1), static_cast<long long>(total_), loss, perplexity);
  flush_stdout("[train]");
  write_line(
      nlohmann::json{{"step", step + 1}, {"valid_loss", loss}, {"valid_perplexity", perplexity}}
          .dump());
}

void Progress::finish(double loss, double accuracy, const std::vector<RankMemory>& memory) {
  if (!leader_) return;
  if (accuracy >= 0) std::printf("test accuracy %.4f\n", accuracy);
  std::printf("final loss %.4f, %.1f s\n", loss,
              std::chrono::duration<double>(Clock::now() - started_).count());
  for (const RankMemory& m : memory) std::printf("%s\n", format_memory(m).c_str());
  for (const RankMemory& m : memory) {
    const std::string measured = format_measured_memory(m);
    if (!measured.empty()) std::printf("%s\n", measured.c_str());
    const std::string predicted = format_predicted_memory(m);
    if (!predicted.empty()) std::printf("%s\n", predicted.c_str());
  }
  flush_stdout("[train]");
  nlohmann::json final_line{{"final", true}, {"loss", loss}, {"steps", total_}};
  if (accuracy >= 0) final_line["test_accuracy"] = accuracy;
  final_line["memory"] = nlohmann::json::array();
  for (const RankMemory& m : memory) final_line["memory"].push_back(to_json(m));
  write_line(final_line.dump());
}

}  // namespace baton::train
