// The compact text form of a schedule: one line per rank (line r is rank r),
// actions separated by spaces, e.g. "0F0 0F1 0B0 0F2 0B1 0B2". Lines that start
// with '#' are comments; one of the form
//   # baton schedule: name=1f1b pp=2 stages=2 microbatches=3 map=loop
// declares what the file holds. Without it, p is the number of action lines,
// m and the number of stages are read off the actions, and the stage-to-rank
// map is the one the compute actions show. "carries=1" in the header marks a
// schedule without a flush (Schedule::carries, e.g. 2bw).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// Header comment plus one line per rank; parse_schedule reads it back.
std::string format_schedule(const Schedule& schedule);

// Throws baton::Error naming the line and token on malformed input.
Schedule parse_schedule(std::string_view text, std::string name = "file");

// Whether `path` names a PyTorch schedule CSV (it ends in ".csv").
bool is_csv_path(std::string_view path);

// Reads and parses a schedule file; the error names the path. A path ending in
// ".csv" is read as torch.distributed.pipelining's CSV (csv_format.h), which
// comes back lowered and validated; any other as the text form above.
Schedule load_schedule_file(const std::string& path);

// Aligned columns, one row per rank ("rank 0 | 0F0 0F1 ..."); the actions at
// (rank, index) in `marks` are drawn as ">0B3<" so an error can point at them.
// A grid of more than 16 ranks or 32 columns is cut to the ranks and columns
// near the first 8 marks (near rank 0, column 0 without marks), with "..."
// where ranks or columns are left out; the text is at most about 16 KiB.
std::string format_grid(const Schedule& schedule,
                        const std::vector<std::pair<int, size_t>>& marks = {});

// For readers of other formats (csv_format.cpp). Sets stages and micro-batches from the largest
// indices the actions name, and the map from their placement (Custom when a pair has compute on two
// ranks). Throws when they name far more (stage, micro-batch) pairs than `action_count` actions
// could cover.
void infer_shape(Schedule& schedule, size_t action_count);
// The bytes of a schedule file, at most 1 GiB; throws naming the path.
std::string read_schedule_file(const std::string& path);

}  // namespace baton::schedule
