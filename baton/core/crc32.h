// CRC-32 (the IEEE 802.3 / zlib / PNG polynomial, reflected, 0xEDB88320), computed by zlib:
// what Python's zlib.crc32 and `gzip` compute. Checkpoints record it per file
// so that a corrupt file is named before any parser reads it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton {

// The CRC-32 of `size` bytes at `data`, continuing from `crc` (0 to start):
// crc32(b, nb, crc32(a, na)) == crc32(a followed by b).
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace baton
