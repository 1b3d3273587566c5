// Pieces of reading JSON strings shared by the read side's scanners (json_scan.cc for event
// lines, csrc/export/batch_view.cc for the args objects of rare lines).
#pragma once

#include <stdint.h>

#include <string>

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

}  // namespace iot
