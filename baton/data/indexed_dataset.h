// Megatron-LM's indexed dataset format (megatron/core/datasets/indexed_dataset.py):
// PREFIX.bin holds the token ids, PREFIX.idx says where each sequence and
// document lies. The .idx, all little-endian, as megatron-core's _IndexWriter
// writes it (version 1):
//   9 bytes   magic "MMIDIDX\x00\x00"
//   u64       version, 1
//   u8        dtype code of the .bin's elements (TokenType: 1 uint8 ... 8 uint16)
//   u64       sequence count n
//   u64       document-index entries d: documents + 1, the first entry 0
//   int32[n]  sequence lengths, in tokens
//   int64[n]  sequence pointers, byte offsets into the .bin
//   int64[d]  document indices: document k is sequences [idx[k], idx[k+1])
// The arrays follow the 34-byte header unaligned. Multimodal datasets add an
// int8 mode per sequence; baton refuses them. Torch-free, so that
// fuzz/indexed_dataset_fuzz.cpp builds without LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "baton/data/token_span.h"

namespace baton::data {

inline constexpr std::string_view kIndexedMagic{"MMIDIDX\0\0", 9};
inline constexpr uint64_t kIndexedVersion = 1;
inline constexpr size_t kIndexedHeaderBytes = 34;

// A validated .idx, read in place: the arrays are views into `bytes`.
struct IndexedIndex {
  std::string_view bytes;  // the whole .idx
  TokenType type = TokenType::kUint16;
  int64_t sequence_count = 0;
  int64_t document_count = 0;  // documents: the document-index entries less one
  int64_t token_count = 0;     // the sum of the sequence lengths

  int32_t sequence_length(int64_t sequence) const;
  int64_t sequence_pointer(int64_t sequence) const;
  // Entry `entry` of the document index, 0 <= entry <= document_count: the
  // first sequence of document `entry` (sequence_count for the last entry).
  int64_t document_index(int64_t entry) const;
  // The bytes the .bin must hold: token_count elements of `type`.
  uint64_t data_bytes() const { return static_cast<uint64_t>(token_count) * token_bytes(type); }
};

// Parses and validates `bytes`, the whole .idx; `name` (its path) starts
// every message. Throws baton::Error, one line naming it, when the file is
// shorter than the header, the magic, version or dtype code is not
// megatron-core's, the counts do not match the file's size, the document
// index does not run from 0 to the sequence count without going back, a
// length is negative, or the sequences are not stored back to back from byte
// 0 (as megatron-core writes them; the tokens of the documents in order are
// then the .bin itself).
IndexedIndex parse_indexed_index(std::string_view bytes, const std::string& name);

// Throws baton::Error naming both files unless the .bin at `bin_name` holds
// `bin_bytes` == index.data_bytes(): shorter is a truncated .bin, longer an
// .idx and a .bin of different datasets.
void check_indexed_data_size(const IndexedIndex& index, uint64_t bin_bytes,
                             const std::string& index_name, const std::string& bin_name);

}  // namespace baton::data
