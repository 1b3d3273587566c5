// Records → JSON event lines (Chrome trace-event objects), on the writer thread.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "record.h"

namespace iot {

// A growable text buffer. Its memory is mapped, never malloc'd (sysmem.h says why); it may
// start in a caller's buffer (a few lines on the stack) and moves to a mapping when it grows.
// Trivially destructible, so that the process-wide ones run no destructor at exit while the
// writer may still use them: whoever owns one calls release().
struct Out {
  char* p = nullptr;
  size_t n = 0, cap = 0;
  bool mapped = false;  // p is a mapping of ours (else NULL or the caller's buffer)
  bool failed = false;  // memory ran out: what was written is gone, writes go to a scratch
  Out() = default;
  Out(char* buf, size_t size) : p(buf), cap(size) {}
  void reserve(size_t more) {
    if (n + more > cap) grow(n + more);
  }
  // To at least `need` bytes. When no memory can be had, `failed` is set and writing goes on,
  // harmlessly, into a scratch buffer (a tracer never crashes its program for want of memory):
  // the owner throws the text away.
  void grow(size_t need);
  void release();  // unmap (when mapped); empty again, failed no more
  void put(const char* s, size_t len) {
    reserve(len);
    if (__builtin_expect(n + len > cap, 0)) return;  // failed, and longer than the scratch
    memcpy(p + n, s, len);
    n += len;
  }
  void put(const char* s) { put(s, strlen(s)); }
  void ch(char c) {
    reserve(1);
    p[n++] = c;
  }
  void i64(int64_t v);
  void u64hex(uint64_t v);  // 16 hex digits
  // q units of `res` ns (1, 10, 100 or 1000) as µs: 3, 2, 1 or no decimals.
  void usec(int64_t q, int res);
  void json_str(const char* s, size_t len);  // quoted, escaped
  void uvar(uint64_t v) {                    // LEB128 varint (the compact form)
    reserve(10);
    while (v >= 0x80) {
      p[n++] = char(v | 0x80);
      v >>= 7;
    }
    p[n++] = char(v);
  }
};

struct IoPrefixCache;
struct EncodeCtx {
  int pid;
  uint32_t gen;                     // file generation: FH lines are written once per (path, gen)
  ClockMap clk;                     // record ticks → CLOCK_MONOTONIC ns, for this drain
  int res = 1;                      // ns per unit of the written times (IOTRACE_RESOLUTION)
  IoPrefixCache* prefix = nullptr;  // the JSON form's line starts (needed for I/O records)
};

// Times in units of IOTRACE_RESOLUTION (`res` ns), rounded to nearest. An event's start and end
// are rounded alike and its dur is their difference, so coarser times keep nesting and order.
int64_t to_units(int64_t ns, int res);

// The constant start of an I/O event line per call, for one (pid, tid, file generation).
struct IoPrefixCache {
  int pid = -1, tid = -1;
  uint32_t gen = 0;
  uint8_t len[C_COUNT] = {};
  char text[C_COUNT][96] = {};
};

// What an I/O event line needs beyond its record: times in units of `res`, the file hashes.
struct IoTimes {
  int64_t start, dur;
  int res;
  uint64_t fh, fh2;
};
IoTimes io_times(const IoRec* r, const EncodeCtx& ctx);
// The FH lines of the files `r` names that this file generation has not seen yet; returns them.
int encode_new_files(Out& out, const IoRec* r, int tid, const EncodeCtx& ctx);
// The event line of an I/O record (the record's file pointers are not used: t.fh, t.fh2 are).
void encode_io_line(Out& out, IoPrefixCache& cache, const IoRec* r, const IoTimes& t, int tid,
                    const EncodeCtx& ctx);

// A Python / C API complete event, its times in units of `res`.
struct SpanLine {
  const char* name;
  size_t name_len;
  const char* cat;
  size_t cat_len;
  const char* args;  // the body of the args object
  size_t args_len;
  int tid;  // the effective tid (a virtual one for asyncio tasks)
  int64_t start, dur;
  int res;
};
SpanLine span_line(const SpanRec* r, int tid, const EncodeCtx& ctx);
void encode_span_line(Out& out, const SpanLine& l, const EncodeCtx& ctx);

// Append the event line(s) of one record (the live file's layout: an R_IO record is an IoLive),
// each ending in ",\n"; returns events written.
int encode_record(Out& out, const RecHeader* r, int tid, const EncodeCtx& ctx);
// A metadata event line for the file hash of `s` (once per generation).
void encode_fh(Out& out, Str* s, int tid, const EncodeCtx& ctx);

}  // namespace iot
