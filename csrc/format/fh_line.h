// The file-name lines (`FH`) of a trace read without a JSON parser when they are as the tracer
// writes them: {"ph":"M","name":"FH","pid":N,"tid":N,"args":{"name":"PATH","value":"HASH"}}
// with PATH and HASH free of escapes and control characters (then the JSON text is the value).
// A job that reads a million files has a million of them. Any other line (another layout, an
// escape) is left to the caller's JSON parser. Shared by the format's line scanner
// (json_scan.cc: a reader may ask for the names apart from the other metadata lines), the
// analyzer's names (_kernels.cpp) and iotrace export's (_export.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace iot {

// Bytes of a 64-bit word that are < 0x20, or equal to c (their high bits; exact for bytes
// < 0x80, and a word of such bytes only is what the callers skip).
inline uint64_t swar_below_space(uint64_t w) {
  return (w - 0x2020202020202020ull) & ~w & 0x8080808080808080ull;
}
inline uint64_t swar_equal(uint64_t w, unsigned char c) {
  const uint64_t x = w ^ (0x0101010101010101ull * c);
  return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

// A JSON string's body at p (after its opening quote) up to its closing quote, when it holds
// no escape and no control character; else nullptr. Eight bytes a step while none of them is
// a quote, a backslash, a control character or above 0x7F (a path's bytes, mostly).
inline const char* plain_json_string(const char* p, const char* end) {
  for (; end - p >= 8; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if ((w & 0x8080808080808080ull) | swar_below_space(w) | swar_equal(w, '"') |
        swar_equal(w, '\\'))
      break;
  }
  for (; p < end; p++) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') return p;
    if (c == '\\' || c < 0x20) return nullptr;
  }
  return nullptr;
}

inline bool take(const char*& p, const char* end, const char* lit) {
  const size_t n = std::strlen(lit);
  if (size_t(end - p) < n || std::memcmp(p, lit, n) != 0) return false;
  p += n;
  return true;
}

// A JSON integer of at most 18 digits (no leading zero), as any parser reads it.
inline bool take_int(const char*& p, const char* end) {
  if (p < end && *p == '-') p++;
  const char* s = p;
  while (p < end && *p >= '0' && *p <= '9') p++;
  return p > s && p - s <= 18 && !(*s == '0' && p - s > 1);
}

// The path and the hash of one line (trailing newline and blanks allowed); false for any
// other line. The bytes are not checked to be UTF-8.
inline bool fh_line(std::string_view line, std::string_view& path, std::string_view& hash) {
  const char* b = line.data();
  const char* end = b + line.size();
  while (end > b && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) end--;
  const char* p = b;
  const char *path0, *path1, *hash0, *hash1;
  if (!(take(p, end, "{\"ph\":\"M\",\"name\":\"FH\",\"pid\":") && take_int(p, end) &&
        take(p, end, ",\"tid\":") && take_int(p, end) && take(p, end, ",\"args\":{\"name\":\"") &&
        (path0 = p, path1 = plain_json_string(p, end)) &&
        (p = path1 + 1, take(p, end, ",\"value\":\"")) &&
        (hash0 = p, hash1 = plain_json_string(p, end)) && (p = hash1 + 1, take(p, end, "}}")) &&
        p == end))
    return false;
  path = std::string_view(path0, size_t(path1 - path0));
  hash = std::string_view(hash0, size_t(hash1 - hash0));
  return true;
}

// The 64-bit number 16 lowercase hex digits write (the tracer's file hashes); false for any
// other string.
inline bool hex16(std::string_view v, uint64_t& x) {
  struct Digits {  // a byte's value as a lowercase hex digit, 0x80 for any other byte
    uint8_t of[256];
    constexpr Digits() : of() {
      for (int c = 0; c < 256; c++)
        of[c] = c >= '0' && c <= '9'   ? uint8_t(c - '0')
                : c >= 'a' && c <= 'f' ? uint8_t(c - 'a' + 10)
                                       : 0x80;
    }
  };
  static constexpr Digits kDigits;
  if (v.size() != 16) return false;
  uint64_t r = 0;
  unsigned bad = 0;  // no branch a digit: a million file hashes in a trace of a million files
  for (char c : v) {
    const unsigned d = kDigits.of[static_cast<unsigned char>(c)];
    bad |= d;
    r = r << 4 | (d & 15);
  }
  if (bad & 0x80) return false;
  x = r;
  return true;
}

// The 16 lowercase hex digits of a number (hex16's inverse: how the tracer writes a file hash).
inline void hex16_text(uint64_t x, char* out) {
  static const char digits[] = "0123456789abcdef";
  for (int k = 15; k >= 0; k--, x >>= 4) out[k] = digits[x & 15];
}

// f(hash number, path) for each file name a reader kept apart (Batch.names: the hashes as
// uint64, the paths' int64 offsets, the paths back to back), in order; std::invalid_argument
// when the buffers do not agree (the offsets' count, one past the paths).
template <class F>
void for_each_name_apart(const void* hashes, size_t hash_bytes, const void* offsets,
                         size_t offset_bytes, const char* paths, size_t path_bytes, F&& f) {
  const size_t n = hash_bytes / sizeof(uint64_t);
  if (offset_bytes != (n + 1) * sizeof(int64_t))
    throw std::invalid_argument("names: offsets do not match the hashes");
  const char* h = static_cast<const char*>(hashes);
  const char* o = static_cast<const char*>(offsets);
  for (size_t i = 0; i < n; i++) {
    uint64_t x;
    int64_t a, b;
    std::memcpy(&x, h + 8 * i, 8);
    std::memcpy(&a, o + 8 * i, 8);
    std::memcpy(&b, o + 8 * (i + 1), 8);
    if (a < 0 || a > b || uint64_t(b) > path_bytes)
      throw std::invalid_argument("names: an offset past the paths");
    f(x, std::string_view(paths + a, size_t(b - a)));
  }
}

// Whether bytes are UTF-8 as a strict decoder (Python's, orjson) takes them: no overlong
// form, no surrogate, nothing past U+10FFFF.
inline bool utf8(std::string_view v) {
  const auto* s = reinterpret_cast<const unsigned char*>(v.data());
  const size_t n = v.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {  // ASCII eight bytes a step
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    if (w & 0x8080808080808080ull) break;
  }
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07;
    else
      return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += len;
  }
  return true;
}

}  // namespace iot
