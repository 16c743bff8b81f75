#include "baton/core/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace baton {

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  // zlib's crc32 takes a uInt length: feed it in pieces that fit.
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {
    const size_t piece = std::min<size_t>(size, UINT_MAX);
    c = ::crc32(c, p, static_cast<uInt>(piece));
    p += piece;
    size -= piece;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace baton
