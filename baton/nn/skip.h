// Skip connections across layers, and so across stages (torchgpipe's
// @skippable stash/pop, in C++). A layer stashes a tensor under a name in
// its forward; a later layer, possibly several stages on, pops it:
//
//   struct EncoderImpl : torch::nn::Module, baton::nn::Skippable {
//     baton::nn::SkipNames skip_names() const override { return {{"enc1"}, {}}; }
//     torch::Tensor forward(torch::Tensor x) {
//       x = conv(x);
//       baton::nn::stash("enc1", x);
//       return pool(x);
//     }
//   };
//   // ... and a later layer: x = torch::cat({up(x), baton::nn::pop("enc1")}, 1);
//
// The layers declare their names (Skippable for a Sequential's children,
// LayerSpec::stash/pop for lazily built layers), so that the schedule knows
// every skip before it runs: a skip whose two layers land on different
// stages becomes SEND/RECV actions from the stashing stage's rank straight to
// the popping stage's rank (schedule::Skip), and its gradient comes back the
// same way. Inside one stage, or in one process, a pop takes the stashed
// tensor directly.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

namespace baton::nn {

struct SkipNames {
  std::vector<std::string> stash;  // names this layer stashes
  std::vector<std::string> pop;    // names this layer pops
};

// A module that stashes or pops declares the names (a Sequential's child).
class Skippable {
 public:
  virtual ~Skippable() = default;
  virtual SkipNames skip_names() const = 0;
};

// Inside a layer's forward: keeps `tensor` for the later layer that pops
// `name`; returns the tensor stashed under `name` (each once per forward).
// Throws baton::Error naming the name when it is stashed twice in one
// forward, or popped when nothing stashed it.
void stash(const std::string& name, const torch::Tensor& tensor);
torch::Tensor pop(const std::string& name);

// Where stash() and pop() keep the tensors in flight: the innermost
// SkipFrame installed on this thread, or else a default one per thread (so
// a model's layers called in order in one process just work).
class SkipFrame {
 public:
  // `keep`: stash() replaces and pop() leaves the tensor (profiling, which
  // runs each layer several times).
  explicit SkipFrame(bool keep = false);
  ~SkipFrame();
  SkipFrame(const SkipFrame&) = delete;
  SkipFrame& operator=(const SkipFrame&) = delete;

  // The tensors stashed and not yet popped, by name.
  std::map<std::string, torch::Tensor>& values() { return values_; }

 private:
  friend void stash(const std::string&, const torch::Tensor&);
  friend torch::Tensor pop(const std::string&);
  // The innermost installed frame, or this thread's fallback.
  static SkipFrame& current();
  SkipFrame(bool keep, bool install);
  bool keep_;
  std::map<std::string, torch::Tensor> values_;
  SkipFrame* outer_;
};

}  // namespace baton::nn
