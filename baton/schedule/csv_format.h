// torch.distributed.pipelining's schedule CSV, read and written. As its
// _dump_csv writes it: one row per rank (line r + 1 is rank r), one action per
// field in the compact notation that baton shares with PyTorch's _Action
// ("2F5", "1SEND_F5", "2RECV_F5"). Two formats:
//  - compute_only: F, B, I, W (and REDUCE_GRAD). Empty fields (PyTorch's idle
//    steps) are skipped; every row needs at least one compute action.
//  - compute_comms: the lowered schedule, with SEND_F, RECV_F, SEND_B, RECV_B
//    and PyTorch's WAIT_SEND_F / WAIT_SEND_B (one after each send).
//
// Reading compute_comms, what baton's IR does not hold is translated:
//  - RECV_*: PyTorch posts the receive where the RECV stands and waits for it
//    right before the compute that consumes it; a baton RECV is where the rank
//    waits (its runtime posts every receive when the step starts). So a RECV
//    moves to right before its consumer, which must come later in its row.
//  - WAIT_SEND_*: dropped (baton's executor waits for its sends at the end of
//    the step); each must follow its SEND in the row.
//  - REDUCE_GRAD: baton's REDUCE_GRAD; PyTorch's "1REDUCE_GRAD" is bucket 0
//    of stage 1, and a stage reduced in one bucket is written back that way
//    (several buckets as "1REDUCE_GRAD0", "1REDUCE_GRAD1", which PyTorch's
//    _Action parser reads too).
//  - REDUCE_TIED (tied weights, Chimera's replicated stages): not written;
//    PyTorch's format has no such action.
//  - UNSHARD, RESHARD (FSDP), WAIT_REDUCE_GRAD: dropped; a run with --zero
//    places its own UNSHARD and RESHARD (sharding.h, where its runtime
//    expects them), and its runtime waits for reductions at the end of the
//    step. Baton's text form keeps them.
//  - "(0F3;4B1)OVERLAP_F_B": its sub-actions, in order.
// Writing compute_comms, a WAIT_SEND_F follows the local backward of the same
// stage and micro-batch (by then the peer has consumed the activation, so the
// wait cannot stall), and every other send's wait comes at the end of the row,
// which is PyTorch's own placement and what its loader requires.
#pragma once

#include <string>
#include <string_view>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

enum class CsvFormat { ComputeOnly, ComputeComms };

// "compute_only", "compute_comms"
std::string_view to_string(CsvFormat format);
// Throws baton::Error naming the value for anything else.
CsvFormat parse_csv_format(std::string_view text);

// One row per rank. compute_only writes the compute actions; compute_comms
// writes the lowered schedule (lowering a compute-only one first) with
// WAIT_SEND_* added. REQUIRES: `schedule` is valid. Throws baton::Error for a
// schedule without a flush (Schedule::carries): PyTorch's format has none.
std::string format_csv(const Schedule& schedule, CsvFormat format);

// Reads either format, validates, lowers a schedule without SEND/RECV (a
// compute_only file), and returns the lowered schedule,
// named `name`. Throws baton::Error whose message is one line naming the line,
// column and rule: an unknown action, a bad stage or micro-batch, a RECV after
// its consumer, a missing action, an order that deadlocks. Respects the size
// limits of schedule/limits.h while it reads.
Schedule parse_csv_schedule(std::string_view text, std::string name = "file");

}  // namespace baton::schedule
