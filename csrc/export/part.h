// What the two writers of `iotrace export` share: one input file's events written as a piece of
// the output (a part file the export joins), the file names that restore `fname`, the slices
// held back for flows, and the threads seen.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "batch_view.h"

namespace iotx {

inline char* put_varint(char* o, uint64_t v) {
  if (v < 0x80) {  // most values: a byte or two
    *o = char(v);
    return o + 1;
  }
  if (v < 0x4000) {
    o[0] = char(v | 0x80);
    o[1] = char(v >> 7);
    return o + 2;
  }
  while (v >= 0x80) *o++ = char(v | 0x80), v >>= 7;
  *o++ = char(v);
  return o;
}

inline char* put_fixed64(char* o, uint64_t v) {
  for (int i = 0; i < 8; i++) o[i] = char(v >> (8 * i));
  return o + 8;
}

// A growing byte buffer with the protobuf primitives. The hot paths take room() for a whole
// message and write it through a pointer (appending byte by byte costs a check each).
class Buf {
 public:
  char* room(size_t k) {
    if (size_t(cap_ - end_) < k) grow(k);
    return end_;
  }
  void advance(char* e) { end_ = e; }
  void byte(uint8_t b) { *room(1) = char(b), end_++; }
  void bytes(const void* p, size_t n) {
    if (n) memcpy(room(n), p, n), end_ += n;
  }
  void bytes(std::string_view v) { bytes(v.data(), v.size()); }
  void varint(uint64_t v) { end_ = put_varint(room(10), v); }
  void fixed64(uint64_t v) { end_ = put_fixed64(room(8), v); }
  void tag(uint32_t field, uint32_t wire) { varint(field << 3 | wire); }
  void ld(uint32_t field, std::string_view payload) {
    tag(field, 2);
    varint(payload.size());
    bytes(payload);
  }
  size_t size() const { return size_t(end_ - begin_); }
  char* data() { return begin_; }
  void clear() { end_ = begin_; }
  std::string_view view() const { return std::string_view(begin_, size()); }
  std::string str() const { return std::string(view()); }

 private:
  void grow(size_t k) {
    size_t n = size(), cap = std::max<size_t>(2 * size_t(cap_ - begin_), n + k + 256);
    std::unique_ptr<char[]> d(new char[cap]);
    if (n) memcpy(d.get(), begin_, n);
    data_ = std::move(d);
    begin_ = data_.get();
    end_ = begin_ + n;
    cap_ = begin_ + cap;
  }
  std::unique_ptr<char[]> data_;
  char *begin_ = nullptr, *end_ = nullptr, *cap_ = nullptr;
};

inline size_t varint_len(uint64_t v) {
  return size_t(70 - __builtin_clzll(v | 1)) / 7;  // (significant bits + 6) / 7
}

// Event kinds by phase: X slices, i/I instants, C counters; anything else is not written.
enum Kind : uint8_t { K_NONE, K_SLICE, K_INSTANT, K_COUNTER };
Kind kind_of_phase(std::string_view ph);

// Where a piece goes: a file descriptor the writer appends to (owned by the caller).
class FdOut {
 public:
  explicit FdOut(int fd) : fd_(fd) {}
  void write(const char* p, size_t n);  // throws std::runtime_error on a write error

 private:
  int fd_;
};

class PartWriter {
 public:
  PartWriter(int fd, int64_t pid, int64_t pid_shift) : out_(fd), pid_(pid), shift_(pid_shift) {}
  virtual ~PartWriter() = default;

  void add_name(std::string_view hash, std::string_view path) { names_.set(hash, path); }
  void add_names(const std::pair<std::string_view, std::string_view>* pairs, size_t n) {
    names_.set_many(pairs, n);
  }
  // The hashes written without a path so far (no FH line for them yet).
  std::vector<std::string> unresolved() const { return lister_.unresolved(); }
  // The tids of the events written (threads are named at the end).
  std::vector<int64_t> tids() const {
    std::vector<int64_t> v(tids_.begin(), tids_.end());
    std::sort(v.begin(), v.end());
    return v;
  }

  // Writes the rows (increasing row numbers) of `b` in that order. The slices among rows
  // flow_rows[i] (increasing, a subset of rows) start the flows flow_ids[i].
  virtual void encode(const BatchView& b, const int64_t* rows, size_t n, const int64_t* flow_rows,
                      const uint64_t* flow_ids, size_t n_flows) = 0;
  // Keeps slice `row` back (a candidate end or start of a flow) with the flows it starts so
  // far; returns its slot for release().
  virtual int hold(const BatchView& b, int64_t row, const uint64_t* flows, size_t n_flows) = 0;
  // Writes a held slice, ending flow `flow_in` (0: none) and starting `outs` besides its own.
  virtual void release(int slot, uint64_t flow_in, const uint64_t* outs, size_t n_outs) = 0;
  // Names a thread (after the events: the last name a file gave it).
  virtual void thread(int64_t tid, std::string_view name) = 0;
  virtual void close() = 0;

 protected:
  int64_t tid_of(const BatchView& b, int64_t r) const {
    return b.tid.has(r) ? b.tid.at(r) : pid_;  // an event without tid: the main thread's
  }
  // tid among tids(): set lookups only for a tid not met lately (a budget's merged slices
  // take turns on hundreds of tracks: a look-up each was 2% of that export in a std::set, 5% of
  // the merged slices' writing in a hash set with 64 slots before it).
  void seen(int64_t tid) {
    const unsigned k = unsigned(uint64_t(tid) & (kSeen - 1));
    if ((seen_set_[k >> 6] >> (k & 63) & 1) && seen_[k] == tid) return;
    seen_[k] = tid;
    seen_set_[k >> 6] |= uint64_t(1) << (k & 63);
    tids_.insert(tid);
  }
  // Kind per code of the batch's ph dictionary.
  void kinds(const BatchView& b);
  Kind kind(const BatchView& b, int64_t r) const {
    return b.ph.has(r) ? Kind(kinds_[size_t(b.ph.code(r))]) : K_NONE;
  }

  FdOut out_;
  int64_t pid_;    // the traced pid (the default tid)
  int64_t shift_;  // vpid - pid: moves pids and tids apart when there are several hosts
  FileNames names_;
  ArgLister lister_{names_};
  std::unordered_set<int64_t> tids_;
  // The last tid met of each tid % kSeen, and which of them are set (a budget's merged tracks
  // are numbered from 0 up: hundreds of them each have a slot).
  static constexpr unsigned kSeen = 1024;
  int64_t seen_[kSeen] = {};
  uint64_t seen_set_[kSeen / 64] = {};
  std::vector<uint8_t> kinds_;
};

}  // namespace iotx
