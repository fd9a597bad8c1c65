#include "core/safetensors.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>

#ifdef TINYFUSE_WITH_ZLIB
#include <zlib.h>
#endif

#include "core/json_text.h"
#include "core/text.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::safetensors {

namespace {

using json = nlohmann::json;

bool little_endian_host() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, i ? " %02x" : "%02x", p[i]);
    out += buf;
  }
  return out;
}

// A guess at what a foreign file is, from its first bytes ("" when unknown).
std::string sniff(const uint8_t* p, size_t n) {
  struct Magic {
    const char* bytes;
    size_t len;
    const char* what;
  };
  static const Magic magics[] = {
      {"\x89PNG\r\n\x1a\n", 8, "a PNG image"},     {"\xff\xd8\xff", 3, "a JPEG image"},
      {"PK\x03\x04", 4, "a ZIP archive (PyTorch .pt files are ZIP archives)"},
      {"\x1f\x8b", 2, "a gzip file"},               {"\x7f" "ELF", 4, "an ELF binary"},
      {"%PDF", 4, "a PDF document"},                {"\x93NUMPY", 6, "a NumPy .npy file"},
      {"\x89HDF\r\n\x1a\n", 8, "an HDF5 file"},     {"GIF8", 4, "a GIF image"},
  };
  for (const Magic& m : magics)
    if (n >= m.len && std::memcmp(p, m.bytes, m.len) == 0) return m.what;
  if (n > 0 && (p[0] == '{' || p[0] == '[')) return "a JSON file";
  return "";
}

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw Error(where + ": " + what); }

}  // namespace

size_t dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"U16", 2}, {"I16", 2},
      {"F16", 2},  {"BF16", 2}, {"U32", 4}, {"I32", 4},     {"F32", 4},     {"U64", 8}, {"I64", 8},
      {"F64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

// ---- writing -------------------------------------------------------------------------------

std::vector<uint8_t> data_section(const std::vector<TensorOut>& tensors) {
  size_t total = 0;
  for (const TensorOut& t : tensors) total += t.count * sizeof(float);
  std::vector<uint8_t> out(total);
  uint8_t* dst = out.data();
  const bool le = little_endian_host();
  for (const TensorOut& t : tensors) {
    const size_t bytes = t.count * sizeof(float);
    if (bytes == 0) continue;
    if (le) {
      std::memcpy(dst, t.data, bytes);
    } else {
      for (size_t i = 0; i < t.count; ++i) {
        uint32_t u;
        std::memcpy(&u, &t.data[i], 4);
        for (int b = 0; b < 4; ++b) dst[4 * i + b] = static_cast<uint8_t>(u >> (8 * b));
      }
    }
    dst += bytes;
  }
  return out;
}

json make_header(const std::vector<TensorOut>& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const TensorOut& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.count) * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", {static_cast<uint64_t>(t.count)}}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  json meta = json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  return header;
}

std::vector<uint8_t> serialize(const json& header, const std::vector<uint8_t>& data) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// ---- reading -------------------------------------------------------------------------------

Contents parse(const uint8_t* bytes, size_t size, const std::string& where) {
  if (size == 0) fail(where, "the file is empty (0 bytes); not a checkpoint");
  if (size < 8)
    fail(where, "truncated at byte " + std::to_string(size) + " of at least 8: a safetensors file starts with an 8-byte "
                "header length (or this is not a checkpoint)");
  Contents c;
  c.header_size = read_u64_le(bytes);
  if (c.header_size > kMaxHeaderSize || c.header_size < 2) {
    const std::string guess = sniff(bytes, size);
    fail(where, "not a safetensors file / tinyfuse checkpoint: its first 8 bytes (" + hex_bytes(bytes, 8) +
                    ") give a header length of " + std::to_string(c.header_size) + " bytes, which is implausible" +
                    (guess.empty() ? "" : "; the file looks like " + guess));
  }
  c.data_offset = 8 + c.header_size;
  if (c.data_offset > size)
    fail(where, "truncated at byte " + std::to_string(size) + " of at least " + std::to_string(c.data_offset) +
                    ": its header length field says the JSON header alone is " + std::to_string(c.header_size) +
                    " bytes (the file is cut short, or that field is corrupt)");
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  if (text[0] != '{') {
    const std::string guess = sniff(bytes, size);
    fail(where, "not a safetensors file / tinyfuse checkpoint: the header does not start with '{'" +
                    (guess.empty() ? "" : "; the file looks like " + guess));
  }
  try {
    c.header = parse_json_text(text, text + c.header_size);
  } catch (const JsonError& e) {
    fail(where, "the " + std::to_string(c.header_size) + "-byte JSON header does not parse (" + e.what() +
                    "); the file is corrupt or not a safetensors file");
  }
  if (!c.header.is_object()) fail(where, "the JSON header is not an object");

  for (const auto& [name, entry] : c.header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(where, "\"__metadata__\" must be an object of strings, got " + json_excerpt(entry));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(where, "\"__metadata__\"." + shorten(k, 80) + " must be a string (safetensors metadata), got " + json_excerpt(v));
        c.metadata[k] = v.get<std::string>();
      }
      c.has_metadata = true;
      continue;
    }
    const std::string what = "tensor \"" + shorten(name, 80) + "\"";
    if (!entry.is_object()) fail(where, what + ": the entry must be an object, got " + json_excerpt(entry));
    for (const auto& [k, v] : entry.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(where, what + ": unknown field \"" + k + "\"");
    TensorEntry t;
    t.name = name;
    const auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) fail(where, what + ": \"dtype\" is missing or not a string");
    t.dtype = dt->get<std::string>();
    const size_t es = dtype_size(t.dtype);
    if (es == 0) fail(where, what + ": unknown dtype \"" + shorten(t.dtype, 40) + "\"");
    const auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) fail(where, what + ": \"shape\" is missing or not an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) fail(where, what + ": shape " + json_excerpt(*sh) + " must hold non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      t.shape.push_back(v);
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
      numel *= v;
    }
    const auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(where, what + ": \"data_offsets\" must be [begin, end] with non-negative integers");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.end < t.begin) fail(where, what + ": data_offsets " + json_excerpt(*off) + " end before they begin");
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / es || numel * es != t.end - t.begin)
      fail(where, what + ": shape " + json_excerpt(*sh) + " of " + t.dtype + " does not match the " +
                      std::to_string(t.end - t.begin) + " bytes of data_offsets " + json_excerpt(*off));
    c.tensors.push_back(std::move(t));
  }

  // The tensors must cover the data section exactly: from 0, back to back, no overlap, no hole.
  std::sort(c.tensors.begin(), c.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t pos = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& t : c.tensors) {
    if (t.begin < pos)
      fail(where, "tensor \"" + shorten(t.name, 80) + "\" (bytes " + std::to_string(t.begin) + ".." + std::to_string(t.end) +
                      ") overlaps tensor \"" + shorten(prev->name, 80) + "\" (bytes " + std::to_string(prev->begin) + ".." +
                      std::to_string(prev->end) + ")");
    if (t.begin > pos)
      fail(where, "the data section has a hole at bytes " + std::to_string(pos) + ".." + std::to_string(t.begin) +
                      " before tensor \"" + shorten(t.name, 80) + "\"");
    pos = t.end;
    prev = &t;
  }
  if (pos > std::numeric_limits<uint64_t>::max() - c.data_offset)
    fail(where, "the tensors' data_offsets are implausibly large (" + std::to_string(pos) + " bytes)");
  const uint64_t total = c.data_offset + pos;
  if (size < total)
    fail(where, "truncated at byte " + std::to_string(size) + " of " + std::to_string(total) +
                    " (the header describes " + std::to_string(pos) + " bytes of tensor data)");
  if (size > total)
    fail(where, "has " + std::to_string(size - total) + " unexpected bytes after the last tensor (the file is " +
                    std::to_string(size) + " bytes, the header describes " + std::to_string(total) + ")");
  return c;
}

std::vector<float> read_f32(const uint8_t* bytes, size_t count) {
  std::vector<float> out(count);
  if (count == 0) return out;
  if (little_endian_host()) {
    std::memcpy(out.data(), bytes, count * sizeof(float));
  } else {
    for (size_t i = 0; i < count; ++i) {
      uint32_t u = 0;
      for (int b = 3; b >= 0; --b) u = (u << 8) | bytes[4 * i + b];
      std::memcpy(&out[i], &u, 4);
    }
  }
  return out;
}

// ---- CRC-32 --------------------------------------------------------------------------------

uint32_t crc32(const uint8_t* bytes, size_t size) {
#ifdef TINYFUSE_WITH_ZLIB
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (size > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
#else
  // Table-driven CRC-32 with the reflected IEEE polynomial, as zlib computes it.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
#endif
}

uint32_t crc32(const std::string& text) { return crc32(reinterpret_cast<const uint8_t*>(text.data()), text.size()); }

std::string crc32_hex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return buf;
}

}  // namespace tinyfuse::safetensors
