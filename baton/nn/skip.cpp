#include "baton/nn/skip.h"

#include "baton/core/error.h"

namespace baton::nn {
namespace {

thread_local SkipFrame* current_frame = nullptr;

}  // namespace

// Without a frame installed: a per-thread one that is never current_frame.
SkipFrame& SkipFrame::current() {
  if (current_frame != nullptr) return *current_frame;
  thread_local SkipFrame fallback(/*keep=*/false, /*install=*/false);
  return fallback;
}

SkipFrame::SkipFrame(bool keep) : SkipFrame(keep, /*install=*/true) {}

SkipFrame::SkipFrame(bool keep, bool install) : keep_(keep), outer_(current_frame) {
  if (install) current_frame = this;  // the innermost frame is the current one
}

SkipFrame::~SkipFrame() {
  if (current_frame == this) current_frame = outer_;
}

void stash(const std::string& name, const torch::Tensor& tensor) {
  SkipFrame& frame = SkipFrame::current();
  BATON_CHECK(frame.keep_ || frame.values_.count(name) == 0, "[nn.skip] \"", name,
              "\" is stashed twice in one forward (each name is stashed once and popped once)");
  frame.values_[name] = tensor;
}

torch::Tensor pop(const std::string& name) {
  SkipFrame& frame = SkipFrame::current();
  auto it = frame.values_.find(name);
  BATON_CHECK(it != frame.values_.end(), "[nn.skip] \"", name,
              "\" is popped but no earlier layer of this forward stashed it");
  torch::Tensor out = it->second;
  if (!frame.keep_) frame.values_.erase(it);
  return out;
}

}  // namespace baton::nn
