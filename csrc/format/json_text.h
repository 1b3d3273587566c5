// Pieces of reading JSON strings shared by the read side's scanners (json_scan.cc for event
// lines, csrc/export/batch_view.cc for the args objects of rare lines).
#pragma once

#include <stdint.h>

#include <string>
#include <string_view>

namespace iot {

// cp as UTF-8 (a \uXXXX escape, surrogate pairs already combined).
inline void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// The four hex digits at p (of a \u escape), false when they are not.
inline bool hex4(const char* p, const char* end, uint32_t* v) {
  if (end - p < 4) return false;
  uint32_t x = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    x <<= 4;
    if (c >= '0' && c <= '9')
      x |= uint32_t(c - '0');
    else if (c >= 'a' && c <= 'f')
      x |= uint32_t(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      x |= uint32_t(c - 'A' + 10);
    else
      return false;
  }
  *v = x;
  return true;
}

// The JSON string whose opening quote is at p: its value, a view of the text when it has no
// escapes, else unescaped into `buf`; p moves past the closing quote. `strict`: an unknown
// escape is an error (else it stands for its letter).
inline bool read_string(const char*& p, const char* end, std::string_view* out, std::string& buf,
                        bool strict) {
  if (p >= end || *p != '"') return false;
  const char* s = ++p;
  while (p < end && *p != '"' && *p != '\\') p++;
  if (p < end && *p == '"') {
    *out = std::string_view(s, size_t(p++ - s));
    return true;
  }
  buf.assign(s, size_t(p - s));
  while (p < end) {
    char ch = *p++;
    if (ch == '"') {
      *out = buf;
      return true;
    }
    if (ch != '\\') {
      buf.push_back(ch);
      continue;
    }
    if (p >= end) return false;
    char e = *p++;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        buf.push_back(e);
        break;
      case 'b':
        buf.push_back('\b');
        break;
      case 'f':
        buf.push_back('\f');
        break;
      case 'n':
        buf.push_back('\n');
        break;
      case 'r':
        buf.push_back('\r');
        break;
      case 't':
        buf.push_back('\t');
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(p, end, &cp)) return false;
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
          uint32_t lo;
          if (hex4(p + 2, end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
        }
        put_utf8(buf, cp);
        break;
      }
      default:
        if (strict) return false;
        buf.push_back(e);
    }
  }
  return false;
}

}  // namespace iot
