// A JSON string literal: quoted, with `"`, `\` and control bytes escaped; UTF-8 passes through
// (invalid bytes are the reader's problem). Shared by the writer's encoder and the Python
// module's argument formatter.
#pragma once
#include <stddef.h>

namespace iot {
// The most bytes json_quote writes for `len` input bytes.
constexpr size_t json_quoted_max(size_t len) { return len * 6 + 2; }

// Writes the literal at `dst` (room for json_quoted_max(len)); returns the bytes written.
inline size_t json_quote(char* dst, const char* s, size_t len) {
  static const char kHex[] = "0123456789abcdef";
  char* p = dst;
  *p++ = '"';
  for (size_t i = 0; i < len; i++) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = char(c);
    } else if (c < 0x20) {
      *p++ = '\\';
      *p++ = 'u';
      *p++ = '0';
      *p++ = '0';
      *p++ = kHex[c >> 4];
      *p++ = kHex[c & 15];
    } else {
      *p++ = char(c);
    }
  }
  *p++ = '"';
  return size_t(p - dst);
}
}  // namespace iot
