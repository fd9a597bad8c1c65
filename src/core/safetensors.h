// The safetensors container: an 8-byte little-endian header length N, N bytes of JSON header
// (padded with spaces to a multiple of 8), then the tensors' raw little-endian bytes. Writing
// (F32 tensors only) and a strict reader that checks the whole layout before anything is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tinyfuse::safetensors {

// Header lengths above this are refused as implausible (the limit safetensors itself uses).
constexpr uint64_t kMaxHeaderSize = 100'000'000;

// One F32 tensor to write.
struct TensorOut {
  std::string name;
  const float* data = nullptr;
  size_t count = 0;
};

// The data section for `tensors` laid out back to back in order (little-endian bytes).
std::vector<uint8_t> data_section(const std::vector<TensorOut>& tensors);
// The JSON header describing that data section, with `metadata` as "__metadata__" (safetensors
// metadata values are strings). Keys are sorted, so header.dump() is canonical.
nlohmann::json make_header(const std::vector<TensorOut>& tensors,
                           const std::map<std::string, std::string>& metadata);
// The whole file: header length, header (padded with spaces to a multiple of 8), data.
std::vector<uint8_t> serialize(const nlohmann::json& header, const std::vector<uint8_t>& data);

// One tensor entry of a parsed header. begin/end are offsets into the data section.
struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Contents {
  uint64_t header_size = 0;   // N
  uint64_t data_offset = 0;   // 8 + N: where the data section starts in the file
  nlohmann::json header;      // the parsed JSON header, "__metadata__" included
  std::vector<TensorEntry> tensors;  // sorted by begin
  bool has_metadata = false;
  std::map<std::string, std::string> metadata;
};

// Checks the layout of a whole file of `size` bytes: the header length, that the header is a
// JSON object of well-formed tensor entries (known dtype, shape matching the byte count), that
// the tensors cover the data section exactly (in bounds, no overlap, no hole) and that the file
// is neither truncated nor followed by extra bytes; and that "__metadata__", if present, maps
// strings to strings. Throws tinyfuse::Error starting with `where` otherwise.
Contents parse(const uint8_t* bytes, size_t size, const std::string& where);

// Bytes per element of a safetensors dtype ("F32" -> 4), 0 if unknown.
size_t dtype_size(const std::string& dtype);

// Reads `count` little-endian floats starting at `bytes`.
std::vector<float> read_f32(const uint8_t* bytes, size_t count);

// CRC-32 (IEEE 802.3, as zlib's crc32 and Python's zlib.crc32), "%08x" for display.
uint32_t crc32(const uint8_t* bytes, size_t size);
uint32_t crc32(const std::string& text);
std::string crc32_hex(uint32_t crc);

}  // namespace tinyfuse::safetensors
