#include "baton/data/indexed_dataset.h"

#include <cstring>
#include <limits>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .idx is little-endian, as is baton");

// The arrays sit at unaligned offsets: read them by memcpy, which compiles to a plain load.
template <typename T>
T load(std::string_view bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

constexpr size_t kLengthsAt = kIndexedHeaderBytes;

std::string quoted(const std::string& name) {
  return printable(name, 256);
}

}  // namespace

int32_t IndexedIndex::sequence_length(int64_t sequence) const {
  return load<int32_t>(bytes, kLengthsAt + 4 * static_cast<size_t>(sequence));
}

int64_t IndexedIndex::sequence_pointer(int64_t sequence) const {
  const size_t at = kLengthsAt + 4 * static_cast<size_t>(sequence_count);
  return load<int64_t>(bytes, at + 8 * static_cast<size_t>(sequence));
}

int64_t IndexedIndex::document_index(int64_t entry) const {
  const size_t at = kLengthsAt + 12 * static_cast<size_t>(sequence_count);
  return load<int64_t>(bytes, at + 8 * static_cast<size_t>(entry));
}

IndexedIndex parse_indexed_index(std::string_view bytes, const std::string& name) {
  const std::string where = "[data.indexed] " + quoted(name);
  BATON_CHECK(bytes.size() >= kIndexedHeaderBytes, where, " holds ", bytes.size(),
              " bytes, fewer than the ", kIndexedHeaderBytes,
              "-byte header of a Megatron-LM .idx file");
  BATON_CHECK(bytes.substr(0, kIndexedMagic.size()) == kIndexedMagic, where, " starts with \"",
              printable(bytes.substr(0, kIndexedMagic.size())),
              "\", not the magic \"MMIDIDX\\x00\\x00\" of a Megatron-LM .idx file");
  const auto version = load<uint64_t>(bytes, 9);
  BATON_CHECK(version == kIndexedVersion, where, " has version ", version,
              "; baton reads version 1, which megatron-core writes");
  const auto code = static_cast<uint8_t>(bytes[17]);
  IndexedIndex index;
  index.bytes = bytes;
  const char* kind = code == 6 ? " (float64)" : code == 7 ? " (float32)" : "";
  BATON_CHECK(token_type_from_megatron_code(code, &index.type), where, " has dtype code ",
              int{code}, kind,
              "; token ids are stored in one of Megatron's integer codes 1 uint8, 2 int8, "
              "3 int16, 4 int32, 5 int64, 8 uint16");
  const auto sequences = load<uint64_t>(bytes, 18);
  const auto entries = load<uint64_t>(bytes, 26);
  // Sizes in 128 bits: counts near 2^64 must not wrap into a match.
  const unsigned __int128 expected = static_cast<unsigned __int128>(kIndexedHeaderBytes) +
                                     static_cast<unsigned __int128>(sequences) * 12 +
                                     static_cast<unsigned __int128>(entries) * 8;
  BATON_CHECK(expected + sequences != bytes.size() || expected == bytes.size(), where, " holds ",
              bytes.size(), " bytes: its ", sequences, " sequences and ", entries,
              " document-index entries leave one byte per sequence, the modes of a multimodal "
              "dataset; baton reads text datasets");
  BATON_CHECK(expected == bytes.size(), where, " holds ", bytes.size(), " bytes, but its header's ",
              sequences, " sequences and ", entries, " document-index entries need ",
              expected > std::numeric_limits<uint64_t>::max()
                  ? std::string("more than 2^64")
                  : std::to_string(static_cast<uint64_t>(expected)),
              " (34 + 12 per sequence + 8 per entry); is the file cut short or from another tool?");
  index.sequence_count = static_cast<int64_t>(sequences);  // < 2^60: the file holds 12 per
  BATON_CHECK(entries >= 1, where, " has no document-index entries; megatron-core writes at least ",
              "the leading 0");
  index.document_count = static_cast<int64_t>(entries) - 1;
  int64_t previous = 0;
  for (int64_t entry = 0; entry <= index.document_count; ++entry) {
    const int64_t first = index.document_index(entry);
    BATON_CHECK(entry > 0 || first == 0, where, ": document index entry 0 is ", first,
                "; megatron-core's document index starts at 0");
    BATON_CHECK(first >= previous && first <= index.sequence_count, where,
                ": document index entry ", entry, " is ", first, ", outside ", previous, "..",
                index.sequence_count, " (the entries must not decrease and not pass the ",
                index.sequence_count, " sequences)");
    previous = first;
  }
  BATON_CHECK(previous == index.sequence_count, where, ": the last document index entry is ",
              previous, ", not the sequence count ", index.sequence_count,
              "; sequences past it belong to no document");
  const auto item = static_cast<int64_t>(token_bytes(index.type));
  const int64_t max_tokens = std::numeric_limits<int64_t>::max() / item;
  int64_t tokens = 0;
  for (int64_t sequence = 0; sequence < index.sequence_count; ++sequence) {
    const int32_t length = index.sequence_length(sequence);
    const int64_t pointer = index.sequence_pointer(sequence);
    BATON_CHECK(length >= 0, where, ": sequence ", sequence, " has length ", length);
    BATON_CHECK(pointer == tokens * item, where, ": sequence ", sequence, " starts at byte ",
                pointer, ", not at byte ", tokens * item,
                " where the sequences before it end; baton reads sequences stored back to back "
                "in order, as megatron-core writes them");
    BATON_CHECK(length <= max_tokens - tokens, where, ": the sequence lengths add up to more than ",
                max_tokens, " tokens of ", item, " bytes");
    tokens += length;
  }
  index.token_count = tokens;
  return index;
}

void check_indexed_data_size(const IndexedIndex& index, uint64_t bin_bytes,
                             const std::string& index_name, const std::string& bin_name) {
  const uint64_t expected = index.data_bytes();
  BATON_CHECK(bin_bytes >= expected, "[data.indexed] ", quoted(bin_name), " holds ", bin_bytes,
              " bytes, fewer than the ", expected, " (", index.token_count, " ",
              token_type_name(index.type), " tokens) that ", quoted(index_name),
              " says; is it cut short?");
  BATON_CHECK(bin_bytes == expected, "[data.indexed] ", quoted(bin_name), " holds ", bin_bytes,
              " bytes, but ", quoted(index_name), " describes ", expected, " (", index.token_count,
              " ", token_type_name(index.type),
              " tokens): the .idx and the .bin are of different datasets");
}

}  // namespace baton::data
