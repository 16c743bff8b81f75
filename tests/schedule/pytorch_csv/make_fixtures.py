#!/usr/bin/env python3
"""Writes the schedule CSVs of tests/schedule/pytorch_csv/ with the PyTorch
wheel (torch.distributed.pipelining), so that csv_format_test checks baton
against what PyTorch itself writes without needing the wheel at test time.

    python3 tests/schedule/pytorch_csv/make_fixtures.py            # rewrite the fixtures
    python3 tests/schedule/pytorch_csv/make_fixtures.py --load A.csv[:FORMAT] ...

No process group is needed: the schedules only read each stage's index, stage
count, group size and rank, so a stand-in object with those attributes builds
them. ScheduleInterleaved1F1B (a PipelineScheduleMulti) writes its own CSV with
_dump_csv. Schedule1F1B is a PipelineScheduleSingle, which has no _dump_csv;
its pipeline_order (every rank's actions, None for an idle step) is written
the way _dump_csv writes one, with csv.writer, one row per rank.

orders/ holds the compute_only order of every multi-stage schedule of the
wheel (Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble,
DualPipeV; 2 stages per rank) for p in {2, 4} and m in {8, 16}, named after
baton's schedule of the same kind: tests/sim/pytorch_orders_test.cpp checks
that baton's generator is no slower than each.

--load feeds CSVs (e.g. from `baton simulate --export-csv`) to the wheel's own
reader, _load_csv (which validates and, for compute_only, lowers them), and
runs the wheel's _simulate on the result: the check that PyTorch accepts what
baton writes. FORMAT is compute_only (default) or compute_comms.
"""
import argparse
import csv
import os
import sys

import torch
from torch.distributed.pipelining import schedules

HERE = os.path.dirname(os.path.abspath(__file__))


class FakeStage:
    """What the schedule constructors read from a stage."""

    def __init__(self, stage_index, num_stages, group_size, group_rank):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.submod = torch.nn.Identity()
        self.stage_index_to_group_rank = {}


def interleaved(p, v, m, rank=0):
    stages = [FakeStage(c * p + rank, p * v, p, rank) for c in range(v)]
    return schedules.ScheduleInterleaved1F1B(stages, m)


def loop_stages(p, v, rank=0):
    return [FakeStage(c * p + rank, p * v, p, rank) for c in range(v)]


def v_stages(p, rank=0):
    return [FakeStage(rank, 2 * p, p, rank), FakeStage(2 * p - 1 - rank, 2 * p, p, rank)]


# baton's name -> how the wheel builds the same kind of schedule (every rank's
# order is computed by any rank's object).
MULTI_STAGE = {
    "interleaved": lambda p, m: schedules.ScheduleInterleaved1F1B(loop_stages(p, 2), m),
    "looped-bfs": lambda p, m: schedules.ScheduleLoopedBFS(loop_stages(p, 2), m),
    "interleaved-zb": lambda p, m: schedules.ScheduleInterleavedZeroBubble(loop_stages(p, 2), m),
    "zb-v": lambda p, m: schedules.ScheduleZBVZeroBubble(v_stages(p), m),
    "dualpipev": lambda p, m: schedules.ScheduleDualPipeV(v_stages(p), m),
}


def write_orders():
    out = os.path.join(HERE, "orders")
    os.makedirs(out, exist_ok=True)
    for name, make in MULTI_STAGE.items():
        for p in (2, 4):
            for m in (8, 16):
                make(p, m)._dump_csv(os.path.join(out, f"{name}_p{p}_m{m}.csv"), format="compute_only")


def write_fixtures():
    p, v, m = 4, 2, 8
    s = interleaved(p, v, m)
    s._dump_csv(os.path.join(HERE, f"interleaved_p{p}_v{v}_m{m}_compute_only.csv"), format="compute_only")
    s._dump_csv(os.path.join(HERE, f"interleaved_p{p}_v{v}_m{m}_compute_comms.csv"), format="compute_comms")
    one = schedules.Schedule1F1B(FakeStage(0, p, p, 0), m)
    with open(os.path.join(HERE, f"1f1b_p{p}_m{m}_compute_only.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        for rank in sorted(one.pipeline_order):
            writer.writerow(one.pipeline_order[rank])
    write_orders()
    print("torch", torch.__version__, "wrote the fixtures in", HERE)


def load(path, fmt):
    with open(path, newline="") as f:
        rows = [[schedules._Action.from_str(x) for x in row] for row in csv.reader(f)]
    p = len(rows)
    stage_ids = {a.stage_index for row in rows for a in row if a is not None and a.stage_index >= 0}
    v = max(1, (max(stage_ids) + 1) // p)
    mbs = {a.microbatch_index for row in rows for a in row if a is not None and a.microbatch_index is not None}
    m = max(mbs) + 1
    # Any valid multi-stage schedule object reads the file; its own order is replaced.
    s = interleaved(p, v, max(m, p))
    s._n_microbatches = m
    s._load_csv(path, format=fmt)
    # The wheel's dry run knows compute and SEND/RECV only; drop UNSHARD, waits etc.
    kinds = {"F", "I", "B", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"}
    order = {r: [a for a in acts if a.computation_type.value in kinds]
             for r, acts in s.pipeline_order_with_comms.items()}
    schedules._simulate_comms_compute(order, lambda i: s.stage_index_to_group_rank[i], s._num_stages)
    print(f"{path}: the wheel loaded it ({fmt}, p={p}, v={v}, m={m}) and simulated it")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", nargs="*", default=None)
    args = parser.parse_args()
    if args.load is None:
        write_fixtures()
        return
    for item in args.load:
        path, _, fmt = item.partition(":")
        load(path, fmt or "compute_only")


if __name__ == "__main__":
    sys.exit(main())
