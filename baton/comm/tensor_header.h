// The fixed-size header that describes every point-to-point tensor, so that a
// receiver allocates the payload without being told its shape or dtype.
// Layout (int64 words): [kHeaderMagic, kind, scalar type, ndim,
//                        size 0, ..., size ndim-1, 0...].
// `kind` says what follows the header in the message (see MessageKind).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>

namespace baton::comm::detail {

inline constexpr std::int64_t kHeaderMagic = 0x6261746f6e;  // "baton"
inline constexpr int kHeaderWords = 16;
inline constexpr std::int64_t kHeaderBytes = kHeaderWords * 8;
inline constexpr int kMaxDims = kHeaderWords - 4;

enum class MessageKind : std::int64_t {
  kInline = 0,   // the payload follows the header in the same message
  kResized = 1,  // the payload follows in a second message (the size the
                 // receiver expected was not this tensor's)
  kRemote = 2,   // shared memory: the payload stays in the sender's memory
                 // and the receiver copies it across once (CMA)
  kGloo = 3,     // shared memory: the payload follows over Gloo
};

struct TensorHeader {
  std::array<std::int64_t, kHeaderWords> words{};

  MessageKind kind() const { return static_cast<MessageKind>(words[1]); }
  void set_kind(MessageKind kind) { words[1] = static_cast<std::int64_t>(kind); }
  at::ScalarType dtype() const { return static_cast<at::ScalarType>(words[2]); }
  at::IntArrayRef sizes() const {
    return at::IntArrayRef(&words[4], static_cast<size_t>(words[3]));
  }
  // Payload bytes: numel times the element size.
  std::int64_t payload_bytes() const;
  friend bool operator==(const TensorHeader& a, const TensorHeader& b) {
    return a.words == b.words;
  }
};

// The header describing `tensor`; throws baton::Error when it has more than
// kMaxDims dimensions. Reads only sizes and dtype: no device sync.
TensorHeader encode_header(const at::Tensor& tensor, MessageKind kind = MessageKind::kInline);

// Checks a received header and throws baton::Error naming `from` when it is
// malformed (a tag collision or a peer that is not baton).
void check_header(const TensorHeader& header, const std::string& from);

// An uninitialised tensor of the header's shape and dtype on `device`.
// REQUIRES: check_header(header) passed.
at::Tensor allocate_from_header(const TensorHeader& header, const at::Device& device);

}  // namespace baton::comm::detail
