#include "baton/data/idx.h"

#include <cstdio>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

uint32_t big_endian_u32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

}  // namespace

std::string format_idx_dims(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "a scalar";
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? " x " : "") + std::to_string(dims[i]);
  return text;
}

IdxArray parse_idx(std::string_view bytes, const std::string& name, size_t expected_ndims) {
  const std::string where = "[data.idx] " + printable(name, 256);
  BATON_CHECK(bytes.size() >= 4, where, " holds ", bytes.size(),
              " bytes, too few for the 4-byte magic number of an IDX file");
  const uint32_t magic = big_endian_u32(bytes, 0);
  const auto type = static_cast<unsigned char>(bytes[2]);
  const auto ndims = static_cast<unsigned char>(bytes[3]);
  BATON_CHECK(bytes[0] == 0 && bytes[1] == 0 && type == kIdxUnsignedByte && ndims >= 1, where,
              " has the magic number ", hex32(magic),
              "; an IDX file of unsigned bytes starts "
              "0x000008NN, NN the number of dimensions (at least 1)");
  const size_t header_bytes = 4 + 4 * size_t{ndims};
  BATON_CHECK(bytes.size() >= header_bytes, where, " holds ", bytes.size(), " bytes, too few for",
              " the header of ", int{ndims}, " dimensions (", header_bytes, " bytes)");
  IdxArray array;
  const size_t payload = bytes.size() - header_bytes;
  // The product of up to 255 32-bit counts overflows; compare it with the
  // payload as it grows, and go on past a zero (which makes it 0).
  bool larger = false, empty = false;
  uint64_t count = 1;
  for (size_t i = 0; i < ndims; ++i) {
    const uint32_t dim = big_endian_u32(bytes, 4 + 4 * i);
    array.dims.push_back(dim);
    if (dim == 0) empty = true;
    if (!larger && !empty && count > payload / dim) larger = true;
    if (!larger && !empty) count *= dim;
  }
  const bool matches = empty ? payload == 0 : !larger && count == payload;
  // Another kind of IDX file whose header does not fit its bytes (a labels
  // header where images belong): named by both magic numbers. One that fits
  // its bytes is named by its shape (check_idx_dims).
  const uint32_t expected_magic = (uint32_t{kIdxUnsignedByte} << 8) | expected_ndims;
  BATON_CHECK(matches || expected_ndims == 0 || ndims == expected_ndims, where,
              " has the magic number ", hex32(magic), " (", magic, ": unsigned bytes in ",
              int{ndims}, ndims == 1 ? " dimension" : " dimensions", ") where ",
              hex32(expected_magic), " (", expected_magic, ": ", expected_ndims,
              expected_ndims == 1 ? " dimension" : " dimensions",
              ") is expected; is it another file of the dataset?");
  const std::string mismatch =
      larger && !empty ? " elements are more than"
                       : detail::concat(" = ", empty ? 0 : count, " elements do not match");
  BATON_CHECK(matches, where, ": its ", format_idx_dims(array.dims), mismatch, " the ", payload,
              " bytes after its ", header_bytes, "-byte header");
  array.values = bytes.substr(header_bytes);
  return array;
}

void check_idx_dims(const IdxArray& array, const std::vector<int64_t>& expected,
                    const std::string& name, const std::string& what) {
  BATON_CHECK(array.dims == expected, "[data.idx] ", printable(name, 256), " holds ",
              format_idx_dims(array.dims), " elements; ", what, " are ", format_idx_dims(expected));
}

void check_idx_labels(const IdxArray& labels, int classes, const std::string& name) {
  BATON_ASSERT(classes >= 1 && classes <= 256, "classes ", classes);
  for (size_t i = 0; i < labels.values.size(); ++i) {
    const int label = static_cast<unsigned char>(labels.values[i]);
    BATON_CHECK(label < classes, "[data.idx] ", printable(name, 256), ": label ", label,
                " at index ", i, " is outside 0..", classes - 1);
  }
}

}  // namespace baton::data
