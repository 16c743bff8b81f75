// The IDX format of the MNIST and Fashion-MNIST files: a 4-byte magic number
// (two zero bytes, a type code, the number of dimensions), each dimension as
// a big-endian 32-bit count, then the elements in row-major order. baton reads
// the unsigned-byte type (0x08) only. Torch-free, so that fuzz/idx_fuzz.cpp
// builds without LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baton::data {

inline constexpr unsigned char kIdxUnsignedByte = 0x08;

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  // The elements, one byte each: a view into the bytes given to parse_idx,
  // valid while they live. Its size is the product of dims.
  std::string_view values;
};

// Parses `bytes`, the whole of an IDX file; `name` (a path) starts every
// message. Throws baton::Error naming it when the file is shorter than its
// header, the magic number is not 0x000008NN with N >= 1 dimensions, or the
// product of the dimensions differs from the number of bytes after the header.
// `expected_ndims` (0: any) is the dimension count the caller needs: another
// count whose header does not fit the file's bytes is refused naming the
// magic number found and the one expected (one that fits is the caller's to
// check by shape, check_idx_dims).
IdxArray parse_idx(std::string_view bytes, const std::string& name, size_t expected_ndims = 0);

// Throws baton::Error naming `name` and `what` (e.g. "Fashion-MNIST's train
// images") unless `array.dims` equals `expected`.
void check_idx_dims(const IdxArray& array, const std::vector<int64_t>& expected,
                    const std::string& name, const std::string& what);

// Throws baton::Error naming `name`, the index of the first label outside
// 0..classes-1 and its value. REQUIRES: 1 <= classes <= 256.
void check_idx_labels(const IdxArray& labels, int classes, const std::string& name);

// "60000 x 28 x 28"; "a scalar" for no dimensions.
std::string format_idx_dims(const std::vector<int64_t>& dims);

}  // namespace baton::data
