// The umbrella header: everything a user of baton's library needs (not the
// `baton train` command's own modules, baton/train/). The torch-free part
// (schedules, simulator, traces, balancing) is also usable on its own through
// its module headers, without LibTorch.
#pragma once

#include "baton/core/allocator.h"
#include "baton/core/blas_kernels.h"
#include "baton/core/error.h"
#include "baton/core/realtime.h"
#include "baton/partition/balance.h"
#include "baton/partition/partition.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/runnable.h"
#include "baton/schedule/schedule.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"
#include "baton/trace/timeline.h"
#include "baton/trace/writers.h"

#if __has_include(<torch/torch.h>)
#include "baton/comm/communicator.h"
#include "baton/comm/launcher.h"
#include "baton/comm/rank_layout.h"
#include "baton/data/fashion_mnist.h"
#include "baton/data/synthetic.h"
#include "baton/data/text.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/linear.h"
#include "baton/nn/models.h"
#include "baton/nn/weight_grad.h"
#include "baton/pipeline/pipeline.h"
#include "baton/runtime/stage.h"
#include "baton/runtime/step_result.h"
#endif
