// Records → JSON event lines (Chrome trace-event objects), on the writer thread.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "record.h"

namespace iot {

// A growable text buffer (writer side only).
struct Out {
  char* p = nullptr;
  size_t n = 0, cap = 0;
  void reserve(size_t more) {
    if (n + more <= cap) return;
    size_t c = cap ? cap : 1 << 16;
    while (c < n + more) c *= 2;
    p = static_cast<char*>(realloc(p, c));
    cap = c;
  }
  void put(const char* s, size_t len) { reserve(len); memcpy(p + n, s, len); n += len; }
  void put(const char* s) { put(s, strlen(s)); }
  void ch(char c) { reserve(1); p[n++] = c; }
  void i64(int64_t v);
  void u64hex(uint64_t v);  // 16 hex digits
  // q units of `res` ns (1, 10, 100 or 1000) as µs: 3, 2, 1 or no decimals.
  void usec(int64_t q, int res);
  void json_str(const char* s, size_t len);  // quoted, escaped
};

struct EncodeCtx {
  int pid;
  uint32_t gen;   // file generation: FH lines are written once per (path, gen)
  ClockMap clk;   // record ticks → CLOCK_MONOTONIC ns, for this drain
};

// Append the event line(s) of one record, each ending in ",\n"; returns events written.
int encode_record(Out& out, const RecHeader* r, int tid, const EncodeCtx& ctx);
// A metadata event line for the file hash of `s` (once per generation).
void encode_fh(Out& out, Str* s, int tid, const EncodeCtx& ctx);

}  // namespace iot
