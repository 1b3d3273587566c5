// The layer split: each complete event's own time, its duration less the events nested in it
// on its thread, summed per (process, layer). A Python span's own time is what it spent outside
// the calls it made; an MPI-IO call's is what the MPI library spent outside the POSIX calls it
// made for it. Own times of one thread add up to the time it spent in any traced event.
//
// Events of a thread come in the order they ended, as the tracer commits them (a call's record
// when it returns, a span's when it closes): an event's children came before it, and are the
// run of not yet claimed events at the top of the thread's stack that started within it. The
// stack holds a running sum of durations, so a parent takes its children's time in one
// subtraction. A thread whose events nest nothing (a loop of reads) would grow its stack
// without end: past kCap entries, the older half's neighbours merge in pairs (an event that
// starts inside a merged pair then takes both or neither: an error of at most one pair, and
// only for a parent around more than kCap/2 events that opens after others of its thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nesting {

class Nesting {
 public:
  static constexpr size_t kCap = 512;  // a thread's stack entries, at most

  // One event of process `proc` (a task-wide number), thread `tid`, of layer `layer` (< 256).
  void add(int64_t proc, int64_t tid, int layer, int64_t ts, int64_t dur) {
    if (dur < 0) dur = 0;
    Stack& st = stack_of(proc, tid);
    const int64_t end = ts + dur;
    Entry* e = st.v.data();
    size_t n = st.n;
    const int64_t top_cum = n ? e[n - 1].cum : 0;
    while (n && e[n - 1].ts >= ts && e[n - 1].end <= end) n--;
    const int64_t base = n ? e[n - 1].cum : 0;
    const int64_t nested = top_cum - base;
    Sums& s = sums_of(proc, layer);
    s.count++;
    s.dur += dur;
    s.own += dur > nested ? dur - nested : 0;
    if (n == st.v.size()) {
      st.v.resize(n ? 2 * n : 8);
      e = st.v.data();
    }
    e[n++] = Entry{ts, end, base + dur};
    st.n = n > kCap ? halve(e, n) : n;
  }

  // (process, layer) -> calls, their time, their own time; in the order first seen.
  struct Sums {
    int64_t count = 0, dur = 0, own = 0;
  };
  std::vector<std::pair<int64_t, int>> keys;
  std::vector<Sums> sums;

  void clear() {
    stacks_.clear();
    last_stack_ = nullptr;
    last_sums_key_ = -1;
    index_.clear();
    keys.clear();
    sums.clear();
  }

 private:
  struct Entry {
    int64_t ts, end, cum;  // start, end; durations summed from the stack's bottom to here
  };
  struct Stack {
    std::vector<Entry> v;  // its entries are the first n
    size_t n = 0;
  };
  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const {
      return size_t(uint64_t(p.first) * 0x9E3779B97F4A7C15ull ^ uint64_t(p.second));
    }
  };
  std::unordered_map<std::pair<int64_t, int64_t>, Stack, PairHash> stacks_;
  std::pair<int64_t, int64_t> last_key_{INT64_MIN, INT64_MIN};
  Stack* last_stack_ = nullptr;
  std::unordered_map<int64_t, size_t> index_;  // proc * 256 + layer -> sums slot
  int64_t last_sums_key_ = -1;
  size_t last_sums_ = 0;

  Stack& stack_of(int64_t proc, int64_t tid) {
    std::pair<int64_t, int64_t> k{proc, tid};
    if (k != last_key_ || !last_stack_) {  // runs of one thread: no hashing
      last_stack_ = &stacks_[k];
      last_key_ = k;
    }
    return *last_stack_;
  }
  Sums& sums_of(int64_t proc, int layer) {
    const int64_t key = proc * 256 + layer;
    if (key == last_sums_key_) return sums[last_sums_];  // runs of one layer: no hashing
    last_sums_key_ = key;
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(proc * 256 + layer, sums.size()).first;
      keys.emplace_back(proc, layer);
      sums.emplace_back();
    }
    last_sums_ = it->second;
    return sums[it->second];
  }
  // The older half's neighbours merged in pairs (a pair spans from its first's start to its
  // second's end); the newer half stays as it is, so a parent of up to kCap/2 calls is exact.
  // The entries left.
  static size_t halve(Entry* e, size_t n) {
    const size_t old = n / 2 & ~size_t(1);
    size_t w = 0;
    for (size_t i = 0; i < old; i += 2) e[w++] = Entry{e[i].ts, e[i + 1].end, e[i + 1].cum};
    for (size_t i = old; i < n; i++) e[w++] = e[i];
    return w;
  }
};

}  // namespace nesting
