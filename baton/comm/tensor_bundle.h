// Several tensors in one message: a stage boundary that carries hidden states
// with positions and a mask still crosses as one point-to-point message.
//
// A bundle is a 1-D uint8 tensor: a header of int64 words, then each
// tensor's bytes at a 64-byte aligned offset. Header: [kBundleMagic, count,
// then per tensor: defined, scalar type, ndim, size 0, ..., size ndim-1].
// An undefined tensor (a boundary tensor that gets no gradient) is an entry
// with defined = 0 and no bytes. The receiver's tensors are views into the
// received bundle (no copy).
//
// One tensor crosses as itself, with no bundle and no copy (the common
// case), unless it is itself a 1-D uint8 tensor or undefined: those are
// bundled, so that a received 1-D uint8 tensor is always a bundle.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace baton::comm {

inline constexpr std::int64_t kBundleMagic = 0x62756e646c65;  // "bundle"

// What to send for `tensors`: the tensor itself (one defined tensor that is
// not 1-D uint8) or a bundle of them all (contiguous copies on their device,
// which must be the same for every defined tensor).
at::Tensor pack_tensors(const std::vector<at::Tensor>& tensors);

// The bytes of pack_tensors(tensors), from the tensors' sizes and dtypes
// alone (meta tensors will do): a bundle's header and its aligned tensors, or
// the one tensor sent as itself.
std::int64_t message_bytes(const std::vector<at::Tensor>& tensors);

// Whether pack_tensors(tensors) makes a bundle (a copy) rather than sending
// the one tensor as itself.
bool bundles(const std::vector<at::Tensor>& tensors);

// Whether a received message is a bundle (else it is the one tensor sent).
bool is_bundle(const at::Tensor& message);

// The tensors a received message carries; throws baton::Error naming `from`
// for a malformed bundle.
std::vector<at::Tensor> unpack_tensors(const at::Tensor& message, const std::string& from);

}  // namespace baton::comm
