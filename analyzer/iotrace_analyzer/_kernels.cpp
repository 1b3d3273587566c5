// iotrace_analyzer._kernels: the summary's figures of one block of events, in a few passes
// over its columns (summary.Partial.add turns them into its tables). numpy column arithmetic
// made dozens of passes and temporaries per block; here each figure is a counter bumped once
// per row. Rows are grouped by process (`proc`, an index into the block's processes).
//
// In: the block's int64 columns as Arrow holds them (values, validity bitmap, bit offset: no
// copy, nulls read as 0), dictionary codes (-1: null) with per-value flags computed in Python
// (ph is "X"; category is I/O, compute, process; call reads or writes; file is a pipe or
// socket). Out: a dict of numpy
// arrays, documented in figures() below.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fh_line.h"
#include "nesting.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using U8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

// An Arrow int64 column: (values, validity bitmap or an empty array, offset of row 0 in the
// bitmap). A null reads as 0.
struct Col {
  I64 values;
  U8 bitmap;
  int64_t off = 0;
  const int64_t* v = nullptr;
  const uint8_t* bm = nullptr;
  explicit Col(const py::tuple& t)
      : values(t[0].cast<I64>()), bitmap(t[1].cast<U8>()), off(t[2].cast<int64_t>()) {
    v = values.data();
    bm = bitmap.shape(0) ? bitmap.data() : nullptr;
  }
  int64_t rows() const { return values.shape(0); }
  bool ok(int64_t i) const { return !bm || ((bm[(i + off) >> 3] >> ((i + off) & 7)) & 1); }
  int64_t at(int64_t i) const { return ok(i) ? v[i] : 0; }
};

constexpr uint8_t kCatIo = 1, kCatCompute = 2, kCatProcess = 4;
// kCall: a call the tracer records (in an I/O or process category, the tracer's own event; a
// program's @trace event may use those category names too)
constexpr uint8_t kRead = 1, kWrite = 2, kOpen = 4, kSync = 8, kCall = 16;
// a file that is another process's end of a pipe or socket: waiting there is not storage I/O
constexpr uint8_t kFileIpc = 1;
constexpr int64_t kSizeEdges[] = {0,       100,     1 << 10,  10 << 10,  100 << 10,
                                  1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30};
constexpr int kSizeBins = int(sizeof(kSizeEdges) / sizeof(kSizeEdges[0]));
constexpr size_t kSamplePoints = 512;  // offset samples per (file, process) and block, at most

template <class T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> a(v.size());
  if (!v.empty()) std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

// A big vector handed to numpy without a copy: the array owns it.
template <class T>
py::array_t<T> give_array(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free_it(owned, [](void* o) { delete static_cast<std::vector<T>*>(o); });
  return py::array_t<T>({owned->size()}, {sizeof(T)}, owned->data(), free_it);
}

// Disjoint runs of intervals per group, groups in order: (bounds[n + 1], starts, ends).
struct Runs {
  std::vector<int64_t> bounds, starts, ends;
};

// The union of one group's intervals as they come, merged on the fly: rows in start order
// (a thread's calls) extend or close the current run, so only runs are stored, never rows.
// Rows out of order still give the exact union: their runs are sorted and merged at the end.
struct RunBuilder {
  std::vector<int64_t> s, e;
  int64_t rs = 0, reach = 0;
  bool open = false, sorted = true;

  void add(int64_t st, int64_t en) {
    if (open && st <= reach && en >= rs) {
      if (st < rs) sorted = false, rs = st;
      if (en > reach) reach = en;
      return;
    }
    if (open) {
      s.push_back(rs), e.push_back(reach);
      if (st < rs) sorted = false;
    }
    open = true, rs = st, reach = en;
  }

  // Close the current run; sorted and disjoint runs from then on.
  void finish() {
    if (open) s.push_back(rs), e.push_back(reach), open = false;
    if (sorted) return;
    std::vector<uint32_t> order(s.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return s[a] < s[b]; });
    std::vector<int64_t> ms, me;
    for (uint32_t i : order) {
      if (!ms.empty() && s[i] <= me.back()) {
        me.back() = std::max(me.back(), e[i]);
      } else {
        ms.push_back(s[i]), me.push_back(e[i]);
      }
    }
    s.swap(ms), e.swap(me);
    sorted = true;
  }
};

// The runs of every group, one after the other.
Runs join_runs(std::vector<RunBuilder>& groups) {
  Runs r;
  for (auto& g : groups) g.finish();
  if (groups.size() == 1) {  // one process: its runs as they are
    r.bounds = {0, int64_t(groups[0].s.size())};
    r.starts.swap(groups[0].s), r.ends.swap(groups[0].e);
    return r;
  }
  size_t total = 0;
  for (auto& g : groups) total += g.s.size();
  r.bounds.reserve(groups.size() + 1);
  r.starts.reserve(total), r.ends.reserve(total);
  for (auto& g : groups) {
    r.bounds.push_back(int64_t(r.starts.size()));
    r.starts.insert(r.starts.end(), g.s.begin(), g.s.end());
    r.ends.insert(r.ends.end(), g.e.begin(), g.e.end());
  }
  r.bounds.push_back(int64_t(r.starts.size()));
  return r;
}

// The union of two sets of runs, group by group (both sorted and disjoint per group).
Runs union_runs(const Runs& a, const Runs& b) {
  if (b.starts.empty()) return a;
  if (a.starts.empty()) return b;
  Runs r;
  const size_t groups = a.bounds.size() - 1;
  r.bounds.reserve(groups + 1);
  r.starts.reserve(a.starts.size() + b.starts.size());
  r.ends.reserve(a.starts.size() + b.starts.size());
  for (size_t g = 0; g < groups; g++) {
    r.bounds.push_back(int64_t(r.starts.size()));
    const size_t g0 = r.starts.size();
    int64_t i = a.bounds[g], j = b.bounds[g];
    const int64_t ia = a.bounds[g + 1], jb = b.bounds[g + 1];
    while (i < ia || j < jb) {
      const bool from_a = j >= jb || (i < ia && a.starts[size_t(i)] <= b.starts[size_t(j)]);
      const int64_t st = from_a ? a.starts[size_t(i)] : b.starts[size_t(j)];
      const int64_t en = from_a ? a.ends[size_t(i++)] : b.ends[size_t(j++)];
      if (r.starts.size() > g0 && st <= r.ends.back()) {
        r.ends.back() = std::max(r.ends.back(), en);
      } else {
        r.starts.push_back(st), r.ends.push_back(en);
      }
    }
  }
  r.bounds.push_back(int64_t(r.starts.size()));
  return r;
}

py::dict runs_dict(Runs&& r) {
  py::dict d;
  d["bounds"] = give_array(std::move(r.bounds));
  d["starts"] = give_array(std::move(r.starts));
  d["ends"] = give_array(std::move(r.ends));
  return d;
}

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return size_t(p.first * 0x9E3779B97F4A7C15ull ^ uint64_t(p.second) * 0xC2B2AE3D27D4EB4Full);
  }
};

// A counter keyed by a pair of int64, remembering the order keys came in.
template <int K>
struct PairSums {
  std::unordered_map<std::pair<int64_t, int64_t>, size_t, PairHash> index;
  std::vector<std::pair<int64_t, int64_t>> keys;
  std::vector<int64_t> sums[K];
  std::pair<int64_t, int64_t> last{INT64_MIN, INT64_MIN};
  size_t last_i = 0;
  size_t slot(int64_t a, int64_t b) {
    std::pair<int64_t, int64_t> k{a, b};
    if (k == last) return last_i;  // runs of one key: no hashing
    auto it = index.find(k);
    if (it == index.end()) {
      it = index.emplace(k, keys.size()).first;
      keys.push_back(k);
      for (auto& s : sums) s.push_back(0);
    }
    last = k;
    return last_i = it->second;
  }
  py::dict out(const char* a, const char* b, std::initializer_list<const char*> names) const {
    return out(a, b, names.begin(), int(names.size()));
  }
  // the keys as columns `a` and `b`, then sums[i] as column names[i], for the first `n` sums
  py::dict out(const char* a, const char* b, const char* const* names, int n = K) const {
    py::dict d;
    std::vector<int64_t> ka, kb;
    for (auto& k : keys) ka.push_back(k.first), kb.push_back(k.second);
    d[a] = to_array(ka);
    d[b] = to_array(kb);
    for (int i = 0; i < n && i < K; i++) d[names[i]] = to_array(sums[i]);
    return d;
  }
};

// Per (fhash, process): calls, their time, bytes read and written, metadata calls and their
// time, read and write calls and their time, opens, the furthest byte read (a maximum, not a
// sum: bytes read past it were read before), and the access pattern's sequential and random
// calls per direction (summary.py FILE_SUMS).
constexpr int kFileSums = 16;
constexpr int kReadExtent = 11, kReadSeq = 12;  // kReadSeq + 2 * dir (+1: random)
const char* const kFileSumNames[kFileSums] = {"count",      "dur",       "read",      "written",
                                              "meta_count", "meta_dur",  "reads",     "writes",
                                              "read_dur",   "write_dur", "opens",     "read_extent",
                                              "read_seq",   "read_rand", "write_seq", "write_rand"};

// A block's (fhash code, process) slots in the order they came, found through an array indexed
// by code and process when the block's codes and processes allow it (a block of a million-file
// job has thousands of codes: no node, no allocation per slot), else a map. Per slot: the
// sums of kFileSumNames, side by side (an event on a file adds to a dozen of them: two cache
// lines, not one line in each of sixteen arrays), and the calls per direction and size bin.
struct FileSlots {
  int64_t n = 1;
  std::vector<int32_t> cache;  // code * n + process -> slot, -1
  std::unordered_map<int64_t, uint32_t> map;
  std::vector<int64_t> fh, proc;
  std::vector<int64_t> sums;  // slot * kFileSums + sum
  int64_t& sum(size_t slot, int c) { return sums[slot * kFileSums + size_t(c)]; }
  std::vector<int64_t> column(int c) const {
    std::vector<int64_t> out(fh.size());
    for (size_t k = 0; k < out.size(); k++) out[k] = sums[k * kFileSums + size_t(c)];
    return out;
  }
  // slot * 2 * kSizeBins + direction * kSizeBins + bin -> calls (of one block: int32; a
  // million files' slots are 80 MB written and scanned, not 160)
  std::vector<int32_t> bins;

  void init(int64_t codes, int64_t procs) {
    n = procs > 0 ? procs : 1;
    if (codes * n <= (int64_t(1) << 22)) cache.assign(size_t(codes * n), -1);
  }
  size_t size() const { return fh.size(); }
  uint32_t slot(int64_t f, int64_t p) {
    const int64_t key = f * n + p;
    if (!cache.empty()) {
      int32_t& c = cache[size_t(key)];
      if (c < 0) c = int32_t(add(f, p));
      return uint32_t(c);
    }
    auto it = map.find(key);
    if (it == map.end()) it = map.emplace(key, add(f, p)).first;
    return it->second;
  }
  uint32_t add(int64_t f, int64_t p) {
    fh.push_back(f), proc.push_back(p);
    sums.resize(sums.size() + kFileSums, 0);
    bins.resize(bins.size() + 2 * kSizeBins, 0);
    return uint32_t(fh.size() - 1);
  }
};

// Everything figures() finds, in C++ containers: filled without the GIL, then turned into
// numpy arrays with it.
struct Found {
  int64_t x_events = 0, start_j = INT64_MAX, end_j = INT64_MIN;
  std::vector<int64_t> cnt, io_cnt, rd, wr, io_dur, first, last;
  std::vector<int64_t> call_cnt, call_dur, call_bytes, call_err;
  std::vector<int64_t> hist[2];
  Runs unions[4];                 // io, comp, both, all
  int same_as[4] = {0, 1, 2, 3};  // unions[k] is unions[same_as[k]]
  Runs ipc;                       // calls on pipes and sockets (not in io)
  std::vector<uint8_t> stdio_fh;  // per fhash code: written through fd 1 or 2 (a log)
  Runs cat_runs;
  PairSums<2> sizes_;     // (name, size) -> count
  FileSlots files;        // (fhash, process) -> kFileSumNames, calls per size bin
  PairSums<2> cat_names;  // (cat, name) -> count, dur
  PairSums<2> cats;       // (process, cat) -> count, dur
  PairSums<1> threads;    // (process, tid)
  PairSums<4> tl;         // (bin, process) -> read, written, ops, I/O call time
  // offsets against time of each files slot: a uniform sample of its data calls, every
  // 2^stride-th call kept, the stride doubled (every other point dropped) each time 512
  // points are kept (sample()); the calls as they come: slot, job-clock start, offset,
  // length, direction
  std::vector<int64_t> pt_slot, pt_ts, pt_off, pt_len;
  std::vector<uint8_t> pt_dir;
  // streams: a files slot's (its id), or a process's calls without a hash (n slots + k)
  std::vector<int64_t> stream_fh, stream_proc;
  struct Dir {
    int64_t consecutive = 0, sequential = 0, random = 0;
    std::vector<int64_t> head_stream, head_off, tail_end;
  } dirs[2];
};

void compute(Found& F, I32& ph, U8& ph_x, I32& cat, U8& cat_kind, I32& name, U8& name_kind,
             const Col& ts, const Col& dur, const Col& ret, const Col& nbytes, const Col& size,
             const Col& offset, const Col& err, I32& fh, U8& fh_kind, const Col& fd, const Col& tid,
             I64& proc, int64_t n_procs, I64& shifts, int64_t tl_exp);

// The uniform sample of each files slot's calls with an offset, as a sampler that keeps every
// 2^stride-th call and doubles the stride (drops every other point) each time kSamplePoints
// are kept would leave it: of a slot's n calls, those whose index is a multiple of 2^s, s the
// number of k >= 0 with (kSamplePoints - 1) * 2^k <= n - 1 (the calls at which it was full).
// Points by slot, in call order within one; seen and stride per slot.
void sample(const Found& F, std::vector<int64_t>& slot, std::vector<int64_t>& ts,
            std::vector<int64_t>& off, std::vector<int64_t>& len, std::vector<int64_t>& dir,
            std::vector<int64_t>& seen, std::vector<int64_t>& stride) {
  const size_t n = F.files.size(), m = F.pt_slot.size();
  seen.assign(n, 0), stride.assign(n, 0);
  for (int64_t s : F.pt_slot) seen[size_t(s)]++;
  for (size_t s = 0; s < n; s++) {
    int64_t k = 0;
    while (seen[s] > 0 && (int64_t(kSamplePoints - 1) << k) <= seen[s] - 1) k++;
    stride[s] = k;
  }
  std::vector<int64_t> at(n + 1, 0), i_in(n, 0);
  std::vector<uint8_t> keep(m, 0);
  for (size_t q = 0; q < m; q++) {
    const size_t s = size_t(F.pt_slot[q]);
    keep[q] = (i_in[s]++ & ((int64_t(1) << stride[s]) - 1)) == 0;
    at[s + 1] += keep[q];
  }
  for (size_t s = 0; s < n; s++) at[s + 1] += at[s];
  const size_t total = size_t(at[n]);
  slot.resize(total), ts.resize(total), off.resize(total), len.resize(total), dir.resize(total);
  for (size_t q = 0; q < m; q++) {
    if (!keep[q]) continue;
    const size_t s = size_t(F.pt_slot[q]);
    const size_t w = size_t(at[s]++);
    slot[w] = int64_t(s), ts[w] = F.pt_ts[q], off[w] = F.pt_off[q], len[w] = F.pt_len[q],
    dir[w] = F.pt_dir[q];
  }
}

py::dict figures(I32 ph, U8 ph_x, I32 cat, U8 cat_kind, I32 name, U8 name_kind, py::tuple ts,
                 py::tuple dur, py::tuple ret, py::tuple nbytes, py::tuple size, py::tuple offset,
                 py::tuple err, I32 fh, U8 fh_kind, py::tuple fd, py::tuple tid, I64 proc,
                 int64_t n_procs, I64 shifts, int64_t tl_exp) {
  Found F;
  const Col ts_c(ts), dur_c(dur), ret_c(ret), bytes_c(nbytes), size_c(size), off_c(offset),
      err_c(err), fd_c(fd), tid_c(tid);
  const int64_t rows = ts_c.rows();
  for (const Col* c : {&dur_c, &ret_c, &bytes_c, &size_c, &off_c, &err_c, &fd_c, &tid_c})
    if (c->rows() != rows || (c->bm && c->bitmap.shape(0) * 8 < rows + c->off))
      throw std::invalid_argument("figures: columns of different lengths");
  if (ph.shape(0) != rows || cat.shape(0) != rows || name.shape(0) != rows || fh.shape(0) != rows ||
      (proc.shape(0) && proc.shape(0) != rows))
    throw std::invalid_argument("figures: columns of different lengths");
  {
    py::gil_scoped_release nogil;
    compute(F, ph, ph_x, cat, cat_kind, name, name_kind, ts_c, dur_c, ret_c, bytes_c, size_c, off_c,
            err_c, fh, fh_kind, fd_c, tid_c, proc, n_procs, shifts, tl_exp);
  }
  py::dict out;
  out["x_events"] = F.x_events;
  out["start_j"] = F.start_j;
  out["end_j"] = F.end_j;
  py::dict procs;
  procs["events"] = to_array(F.cnt);
  procs["io_events"] = to_array(F.io_cnt);
  procs["bytes_read"] = to_array(F.rd);
  procs["bytes_written"] = to_array(F.wr);
  procs["io_call_time"] = to_array(F.io_dur);
  procs["first"] = to_array(F.first);
  procs["last"] = to_array(F.last);
  out["procs"] = procs;
  const char* kinds[4] = {"io", "comp", "both", "all"};
  py::dict unions;
  py::dict made[4];
  for (int j = 0; j < 4; j++) {
    if (F.same_as[j] == j) made[j] = runs_dict(std::move(F.unions[j]));
    unions[kinds[j]] = made[F.same_as[j]];
  }
  unions["ipc"] = runs_dict(std::move(F.ipc));
  out["unions"] = unions;
  py::dict calls;
  calls["count"] = to_array(F.call_cnt);
  calls["dur"] = to_array(F.call_dur);
  calls["bytes"] = to_array(F.call_bytes);
  calls["errors"] = to_array(F.call_err);
  out["calls"] = calls;
  out["sizes"] = F.sizes_.out("name", "size", {"count"});
  {
    py::dict d;
    d["fhash"] = to_array(F.files.fh);
    d["proc"] = to_array(F.files.proc);
    for (int c = 0; c < kFileSums; c++) d[kFileSumNames[c]] = give_array(F.files.column(c));
    out["files"] = d;
    std::vector<int64_t> slot, bin, count;  // sparse, by files slot
    for (size_t k = 0; k < F.files.bins.size(); k++)
      if (F.files.bins[k])
        slot.push_back(int64_t(k / (2 * kSizeBins))), bin.push_back(int64_t(k % (2 * kSizeBins))),
            count.push_back(F.files.bins[k]);
    py::dict z;
    z["slot"] = to_array(slot), z["bin"] = to_array(bin), z["count"] = to_array(count);
    out["file_sizes"] = z;
  }
  out["threads"] = F.threads.out("proc", "tid", {"count"});
  py::dict c = F.cats.out("proc", "cat", {"count", "dur"});
  c["runs"] = runs_dict(std::move(F.cat_runs));
  out["cats"] = c;
  out["cat_names"] = F.cat_names.out("cat", "name", {"count", "dur"});
  out["timeline"] = F.tl.out("bin", "proc", {"read", "written", "ops", "io_dur"});
  {  // the offset samples as columns: files slot, job-clock start, offset, length, direction
    std::vector<int64_t> slot, ts_, off_, len_, dir_, seen, stride;
    sample(F, slot, ts_, off_, len_, dir_, seen, stride);
    py::dict d;
    d["slot"] = to_array(slot), d["ts"] = to_array(ts_), d["offset"] = to_array(off_);
    d["length"] = to_array(len_), d["dir"] = to_array(dir_);
    d["seen"] = to_array(seen), d["stride"] = to_array(stride);
    out["offsets"] = d;
  }
  {
    std::vector<int64_t> logs;  // the fhash codes written through fd 1 or 2
    for (size_t k = 0; k < F.stdio_fh.size(); k++)
      if (F.stdio_fh[k]) logs.push_back(int64_t(k));
    out["stdio_fh"] = to_array(logs);
  }
  out["stream_fh"] = to_array(F.stream_fh);
  out["stream_proc"] = to_array(F.stream_proc);
  const char* dir_names[2] = {"read", "write"};
  for (int dir = 0; dir < 2; dir++) {
    const Found::Dir& r = F.dirs[dir];
    py::dict d;
    d["consecutive"] = r.consecutive;
    d["sequential"] = r.sequential;
    d["random"] = r.random;
    d["head_stream"] = to_array(r.head_stream);
    d["head_off"] = to_array(r.head_off);
    d["tail_end"] = to_array(r.tail_end);
    d["hist"] = to_array(F.hist[dir]);
    out[dir_names[dir]] = d;
  }
  return out;
}

void compute(Found& F, I32& ph, U8& ph_x, I32& cat, U8& cat_kind, I32& name, U8& name_kind,
             const Col& ts, const Col& dur, const Col& ret, const Col& nbytes, const Col& size,
             const Col& offset, const Col& err, I32& fh, U8& fh_kind, const Col& fd, const Col& tid,
             I64& proc, int64_t n_procs, I64& shifts, int64_t tl_exp) {
  const int64_t rows = ts.rows();
  {  // room for the most the block can have (a point per row; a files slot per code and
     // process): the block's thousands of slots and points are not grown by copies
    const size_t pts = size_t(rows);
    for (auto* v : {&F.pt_slot, &F.pt_ts, &F.pt_off, &F.pt_len}) v->reserve(pts);
    F.pt_dir.reserve(pts);
    const size_t slots = std::min(
        pts, size_t(fh.shape(0) ? fh_kind.shape(0) : 0) * size_t(std::max<int64_t>(n_procs, 1)));
    F.files.fh.reserve(slots), F.files.proc.reserve(slots);
    F.files.sums.reserve(slots * kFileSums), F.files.bins.reserve(slots * 2 * kSizeBins);
  }
  const int32_t* ph_ = ph.data();
  const uint8_t* ph_x_ = ph_x.data();
  const int32_t* cat_ = cat.data();
  const uint8_t* cat_kind_ = cat_kind.data();
  const int32_t* name_ = name.data();
  const uint8_t* name_kind_ = name_kind.data();
  const int32_t* fh_ = fh.data();
  const uint8_t* fh_kind_ = fh_kind.data();
  const int64_t n_fh = fh_kind.shape(0);
  F.stdio_fh.assign(size_t(n_fh), 0);
  const int64_t* proc_ = proc.shape(0) ? proc.data() : nullptr;
  const int64_t* shift_ = shifts.data();
  const int64_t n = n_procs;
  const int64_t n_names = name_kind.shape(0);

  std::vector<int64_t>&cnt = F.cnt, &io_cnt = F.io_cnt, &rd = F.rd, &wr = F.wr, &io_dur = F.io_dur,
  &first = F.first, &last = F.last;
  cnt.assign(n, 0), io_cnt.assign(n, 0), rd.assign(n, 0), wr.assign(n, 0), io_dur.assign(n, 0);
  first.assign(n, INT64_MAX), last.assign(n, INT64_MIN);
  std::vector<int64_t>&call_cnt = F.call_cnt, &call_dur = F.call_dur, &call_bytes = F.call_bytes,
  &call_err = F.call_err;
  call_cnt.assign(n_names, 0), call_dur.assign(n_names, 0), call_bytes.assign(n_names, 0);
  call_err.assign(n_names, 0);
  std::vector<int64_t>* hist = F.hist;
  hist[0].assign(kSizeBins, 0), hist[1].assign(kSizeBins, 0);
  // the unions per process of I/O, compute and other complete events (both and all are
  // made of them at the end), and per @trace category (cats' slots)
  std::vector<RunBuilder> unions[4];  // io, comp, other, ipc
  for (auto& u : unions) u.resize(size_t(n));
  std::vector<RunBuilder> cat_runs;
  auto& sizes_ = F.sizes_;
  auto& files = F.files;
  files.init(n_fh, n);
  auto& cat_names = F.cat_names;
  auto& cats = F.cats;
  auto& threads = F.threads;
  auto& tl = F.tl;
  int64_t &x_events = F.x_events, &start_j = F.start_j, &end_j = F.end_j;
  // access pattern: per direction and stream (fhash, process: its files slot; or a process's
  // calls without a hash), the offset where the stream's previous call ended, followed row by
  // row while each stream's calls come in start order
  struct Cursor {
    int64_t ts = INT64_MIN, end = 0;
    bool seen = false;
  };
  std::vector<Cursor> cursor[2];                 // per files slot
  std::vector<Cursor> bare_cursor[2];            // per process without a hash (bare_of)
  std::unordered_map<int64_t, int64_t> bare_of;  // process -> its stream without a hash
  bool in_order[2] = {true, true};

  // What one row is: complete event, its category's and call's kinds, bytes moved.
  struct Row {
    bool x, io, comp, rd, wr, own, ipc;
    uint8_t ck;
    int64_t d, moved;
  };
  auto row = [&](int64_t i) {
    Row r;
    r.x = ph_[i] >= 0 && ph_x_[ph_[i]];
    r.ck = cat_[i] >= 0 ? cat_kind_[cat_[i]] : 0;
    const uint8_t nk = name_[i] >= 0 ? name_kind_[name_[i]] : 0;
    r.own = (r.ck & (kCatIo | kCatProcess)) && (nk & kCall);
    r.io = r.x && (r.ck & kCatIo) && (nk & kCall);
    r.ipc = r.io && fh_[i] >= 0 && fh_[i] < n_fh && (fh_kind_[fh_[i]] & kFileIpc);
    r.comp = r.x && (r.ck & kCatCompute);
    r.rd = r.io && (nk & kRead), r.wr = r.io && (nk & kWrite);
    const int64_t d = dur.at(i);
    r.d = r.x && d > 0 ? d : 0;
    r.moved = 0;
    if (r.rd || r.wr) r.moved = nbytes.ok(i) ? nbytes.v[i] : std::max<int64_t>(ret.at(i), 0);
    return r;
  };
  // a stream's id: its files slot, or -1 - k for the k-th process's calls without a hash
  auto stream = [&](int64_t p, int64_t f) {
    if (f >= 0) return f;
    auto it = bare_of.find(p);
    if (it == bare_of.end()) {
      it = bare_of.emplace(p, int64_t(bare_of.size())).first;
      bare_cursor[0].emplace_back(), bare_cursor[1].emplace_back();
    }
    return -1 - it->second;
  };
  auto cur = [&](int dir, int64_t sid) -> Cursor& {
    if (sid >= 0) {
      if (size_t(sid) >= cursor[dir].size()) cursor[dir].resize(files.size());
      return cursor[dir][size_t(sid)];
    }
    return bare_cursor[dir][size_t(-1 - sid)];
  };

  for (int64_t i = 0; i < rows; i++) {
    const int64_t p = proc_ ? proc_[i] : 0;
    const Row r = row(i);
    const int64_t d = r.d, moved = r.moved;
    const int64_t t = ts.at(i), end = t + d;
    x_events += r.x;
    cnt[p]++;
    first[p] = std::min(first[p], t);
    last[p] = std::max(last[p], end);
    start_j = std::min(start_j, t + shift_[p]);
    end_j = std::max(end_j, end + shift_[p]);
    threads.sums[0][threads.slot(p, tid.at(i))]++;
    // a wait on a pipe or socket is not I/O time (another process is being waited for)
    if (r.io && !r.ipc) unions[0][p].add(t, end);
    if (r.ipc) unions[3][p].add(t, end);
    if (r.comp) unions[1][p].add(t, end);
    if (r.x && !(r.io && !r.ipc) && !r.comp) unions[2][p].add(t, end);
    if (r.x && !r.own) {  // an @trace category's event
      const size_t g = cats.slot(p, cat_[i]);
      cats.sums[0][g]++;
      cats.sums[1][g] += d;
      if (g >= cat_runs.size()) cat_runs.resize(g + 1);
      cat_runs[g].add(t, end);
      const size_t c = cat_names.slot(cat_[i], name_[i]);
      cat_names.sums[0][c]++;
      cat_names.sums[1][c] += d;
    }
    if (!r.io) continue;
    io_cnt[p]++;
    io_dur[p] += d;
    rd[p] += r.rd ? moved : 0;
    wr[p] += r.wr ? moved : 0;
    const int32_t nc = name_[i];
    if (nc >= 0) {
      call_cnt[nc]++;
      call_dur[nc] += d;
      call_bytes[nc] += moved;
      call_err[nc] += err.ok(i);
      if (size.ok(i)) sizes_.sums[0][sizes_.slot(nc, size.v[i])]++;
    }
    int64_t f = -1;  // the row's files slot
    if (fh_[i] >= 0) {
      f = int64_t(files.slot(fh_[i], p));
      int64_t* fs = &files.sum(size_t(f), 0);
      fs[0]++;
      fs[1] += d;
      fs[2] += r.rd ? moved : 0;
      fs[3] += r.wr ? moved : 0;
      // open, stat, close, lseek...: neither a data call nor a sync (which is the writes' cost)
      const bool meta = !(r.rd || r.wr) && !(nc >= 0 && (name_kind_[nc] & kSync));
      fs[4] += meta;
      fs[5] += meta ? d : 0;
      fs[6] += r.rd, fs[7] += r.wr;
      fs[8] += r.rd ? d : 0, fs[9] += r.wr ? d : 0;
      fs[10] += nc >= 0 && (name_kind_[nc] & kOpen);
      if (r.rd && offset.ok(i)) fs[kReadExtent] = std::max(fs[kReadExtent], offset.v[i] + moved);
    }
    const size_t b = tl.slot((t + shift_[p]) >> tl_exp, p);
    tl.sums[0][b] += r.rd ? moved : 0;
    tl.sums[1][b] += r.wr ? moved : 0;
    tl.sums[2][b]++;
    tl.sums[3][b] += d;
    if (!(r.rd || r.wr)) continue;
    // stdout or stderr redirected to a file: a log, not data
    if (r.wr && fh_[i] >= 0 && fh_[i] < n_fh && fd.ok(i) && (fd.v[i] == 1 || fd.v[i] == 2))
      F.stdio_fh[size_t(fh_[i])] = 1;
    const int dir = r.rd ? 0 : 1;
    if (f >= 0 && offset.ok(i)) {  // sampled at the end (sample())
      F.pt_slot.push_back(f), F.pt_ts.push_back(t + shift_[p]), F.pt_off.push_back(offset.v[i]);
      F.pt_len.push_back(moved), F.pt_dir.push_back(uint8_t(dir));
    }
    const int64_t sz = size.ok(i) ? size.v[i] : moved;
    int bin = int(std::upper_bound(std::begin(kSizeEdges), std::end(kSizeEdges), sz) -
                  std::begin(kSizeEdges)) -
              1;
    hist[dir][bin < 0 ? 0 : bin]++;
    if (f >= 0)
      files.bins[size_t(f) * 2 * kSizeBins + size_t(dir * kSizeBins + (bin < 0 ? 0 : bin))]++;
    if (!offset.ok(i) || !in_order[dir]) continue;
    // The first call of a stream in this block is its head (Python decides with what the
    // stream carried from the block before); each later one is compared with the previous.
    const int64_t sid = stream(p, f);
    Cursor& c = cur(dir, sid);
    Found::Dir& o = F.dirs[dir];
    if (!c.seen) {
      c.seen = true;
      o.head_stream.push_back(sid), o.head_off.push_back(offset.v[i]);
    } else if (t < c.ts) {
      in_order[dir] = false;  // a stream's calls out of start order: sorted below
      continue;
    } else {
      o.consecutive += offset.v[i] == c.end;
      const bool seq = offset.v[i] >= c.end;
      o.sequential += seq, o.random += !seq;
      if (f >= 0) files.sum(size_t(f), kReadSeq + 2 * dir + !seq)++;
    }
    c.ts = t, c.end = offset.v[i] + moved;
  }

  // both = io | comp, all = both | other; the same runs are not built twice (a POSIX trace's
  // three are one)
  for (int j = 0; j < 2; j++) F.unions[j] = join_runs(unions[j]);
  if (F.unions[1].starts.empty())
    F.same_as[2] = 0;
  else
    F.unions[2] = union_runs(F.unions[0], F.unions[1]);
  F.ipc = join_runs(unions[3]);
  Runs other = join_runs(unions[2]);
  if (other.starts.empty())
    F.same_as[3] = F.same_as[2];
  else
    F.unions[3] = union_runs(F.unions[F.same_as[2]], other);
  cat_runs.resize(cats.keys.size());
  F.cat_runs = join_runs(cat_runs);
  for (int dir = 0; dir < 2; dir++) {
    Found::Dir& o = F.dirs[dir];
    if (in_order[dir]) {
      for (int64_t sid : o.head_stream) o.tail_end.push_back(cur(dir, sid).end);
      continue;
    }
    // Out of order (threads sharing a stream): the direction's calls sorted by (stream, ts).
    o = Found::Dir();
    for (size_t slot = 0; slot < files.size(); slot++)
      for (int k = 0; k < 2; k++) files.sum(slot, kReadSeq + 2 * dir + k) = 0;
    std::vector<int64_t> st, tss, off, en;
    for (int64_t i = 0; i < rows; i++) {
      const Row r = row(i);
      if (!(dir == 0 ? r.rd : r.wr) || !offset.ok(i)) continue;
      const int64_t p = proc_ ? proc_[i] : 0;
      st.push_back(stream(p, fh_[i] >= 0 ? int64_t(files.slot(fh_[i], p)) : -1)),
          tss.push_back(ts.at(i));
      off.push_back(offset.v[i]), en.push_back(offset.v[i] + r.moved);
    }
    const size_t m = st.size();
    std::vector<uint32_t> order(m);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      return st[x] != st[y] ? st[x] < st[y] : tss[x] < tss[y];
    });
    for (size_t k = 0; k < m; k++) {
      const uint32_t i = order[k];
      if (k == 0 || st[order[k - 1]] != st[i]) {
        if (k) o.tail_end.push_back(en[order[k - 1]]);
        o.head_stream.push_back(st[i]);
        o.head_off.push_back(off[i]);
        continue;
      }
      const int64_t pe = en[order[k - 1]];
      o.consecutive += off[i] == pe;
      const bool seq = off[i] >= pe;
      o.sequential += seq, o.random += !seq;
      if (st[i] >= 0) files.sum(size_t(st[i]), kReadSeq + 2 * dir + !seq)++;
    }
    if (m) o.tail_end.push_back(en[order[m - 1]]);
  }
  // the streams' ids as the output numbers them: the slots', then those without a hash
  const int64_t n_slots = int64_t(files.size());
  F.stream_fh = files.fh, F.stream_proc = files.proc;
  std::vector<int64_t> bare_proc(bare_of.size());
  for (auto& kv : bare_of) bare_proc[size_t(kv.second)] = kv.first;
  for (int64_t p : bare_proc) F.stream_fh.push_back(-1), F.stream_proc.push_back(p);
  for (auto& o : F.dirs)
    for (int64_t& sid : o.head_stream)
      if (sid < 0) sid = n_slots + (-1 - sid);
}

// An index of keys (uint64, int64) -> 0, 1, 2... in the order they came: open addressing, at
// most half full, each slot the key's index and 32 bits of its hash (a probe that meets
// another key rarely reads the keys), the keys in arrays (a million files cost tens of bytes
// each, not a node each).
// keys looked up this many ahead of their turn (KeyIndex::prefetch): about a cache miss's
// latency of work
constexpr size_t kAhead = 8;

class KeyIndex {
 public:
  std::vector<uint64_t> kv;
  std::vector<int64_t> ka;

  size_t size() const { return kv.size(); }

  // (index, whether the key is new)
  std::pair<uint32_t, bool> add(uint64_t v, int64_t a) {
    if ((kv.size() + 1) * 2 > table_.size()) grow();
    const uint64_t h = hash(v, a);
    const uint64_t tag = h >> 32;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t e = table_[i];
      if (e == kEmpty) {
        table_[i] = tag << 32 | kv.size();
        kv.push_back(v), ka.push_back(a);
        return {uint32_t(kv.size() - 1), true};
      }
      const uint32_t k = uint32_t(e);
      if ((e >> 32) == tag && kv[k] == v && ka[k] == a) return {k, false};
    }
  }

  // The key's slot brought towards the cache, for an add or find a few keys later: a table of
  // a million keys is a cache miss per lookup, and a loop over keys known ahead overlaps them.
  void prefetch(uint64_t v, int64_t a) const {
    if (table_.empty()) return;
    const uint64_t* at = &table_[hash(v, a) & mask_];
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" ::"m"(*at));  // (GCC 12 drops a __builtin_prefetch in such loops)
#else
    __builtin_prefetch(at);
#endif
  }

  // the key's index, or -1
  int64_t find(uint64_t v, int64_t a) const {
    if (table_.empty()) return -1;
    const uint64_t h = hash(v, a);
    const uint64_t tag = h >> 32;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t e = table_[i];
      if (e == kEmpty) return -1;
      const uint32_t k = uint32_t(e);
      if ((e >> 32) == tag && kv[k] == v && ka[k] == a) return k;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::vector<uint64_t> table_;
  size_t mask_ = 0;
  static uint64_t hash(uint64_t v, int64_t a) {
    uint64_t h = (v ^ (uint64_t(a) * 0x9E3779B97F4A7C15ull)) * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 29);
  }
  void grow() {
    const size_t n = table_.empty() ? 1024 : table_.size() * 2;
    table_.assign(n, kEmpty);
    mask_ = n - 1;
    for (size_t k = 0; k < kv.size(); k++) {
      if (k + kAhead < kv.size()) prefetch(kv[k + kAhead], ka[k + kAhead]);
      const uint64_t h = hash(kv[k], ka[k]);
      size_t i = h & mask_;
      while (table_[i] != kEmpty) i = (i + 1) & mask_;
      table_[i] = (h >> 32) << 32 | k;
    }
  }
};

// ---------------------------------------------------------------------------- file names

// A file-name line (`FH`) of a bytes object (fh_line.h).
bool fh_line(const py::handle& h, std::string_view& path, std::string_view& hash) {
  if (!PyBytes_Check(h.ptr())) return false;
  return iot::fh_line(
      std::string_view(PyBytes_AS_STRING(h.ptr()), size_t(PyBytes_GET_SIZE(h.ptr()))), path, hash);
}

// ---------------------------------------------------------------------------- hash strings
// A string array as (offsets n + 1, bytes, validity: one byte per value or empty).
struct Strings {
  I64 off;
  py::array_t<uint8_t, py::array::c_style> data;
  U8 valid;
  int64_t size() const { return off.shape(0) - 1; }
  bool ok(int64_t i) const { return !valid.shape(0) || valid.data()[i]; }
  std::string_view at(int64_t i) const {
    return {reinterpret_cast<const char*>(data.data()) + off.data()[i],
            size_t(off.data()[i + 1] - off.data()[i])};
  }
};

py::object str_of(std::string_view v) {
  PyObject* o = PyUnicode_DecodeUTF8(v.data(), Py_ssize_t(v.size()), nullptr);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// Per value: the uint64 that 16 lowercase hex digits write (ok 1), else ok 0.
py::tuple hex_values(I64 off, py::array_t<uint8_t, py::array::c_style> data, U8 valid) {
  const Strings s{off, data, valid};
  const int64_t n = s.size();
  std::vector<uint64_t> value(size_t(n > 0 ? n : 0), 0);
  std::vector<uint8_t> ok(size_t(n > 0 ? n : 0), 0);
  for (int64_t i = 0; i < n; i++) {
    if (!s.ok(i)) continue;
    uint64_t x;
    if (iot::hex16(s.at(i), x)) value[size_t(i)] = x, ok[size_t(i)] = 1;
  }
  return py::make_tuple(give_array(std::move(value)), give_array(std::move(ok)));
}

// parquet.resolve_names' lookup: per value of a dictionary of hashes its path's code among
// the distinct paths (-1: none, or a null value), and those paths in order of first use.
py::tuple name_codes(I64 off, py::array_t<uint8_t, py::array::c_style> data, U8 valid,
                     const py::dict& names) {
  const Strings s{off, data, valid};
  const int64_t n = s.size();
  std::vector<int32_t> code(size_t(n > 0 ? n : 0), -1);
  py::dict uniq;
  py::list paths;
  for (int64_t i = 0; i < n; i++) {
    if (!s.ok(i)) continue;
    const py::object key = str_of(s.at(i));
    PyObject* name = PyDict_GetItemWithError(names.ptr(), key.ptr());
    if (!name) {
      if (PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    PyObject* have = PyDict_GetItemWithError(uniq.ptr(), name);
    if (!have) {
      if (PyErr_Occurred()) throw py::error_already_set();
      const py::int_ c(py::len(paths));
      if (PyDict_SetItem(uniq.ptr(), name, c.ptr())) throw py::error_already_set();
      paths.append(py::reinterpret_borrow<py::object>(name));
      code[size_t(i)] = int32_t(py::len(paths) - 1);
    } else {
      code[size_t(i)] = int32_t(PyLong_AsLong(have));
    }
  }
  return py::make_tuple(give_array(std::move(code)), paths);
}

std::string_view utf8_of(const py::handle& o) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(o.ptr(), &n);
  if (!p) throw py::error_already_set();
  return {p, size_t(n)};
}

// One trace file's names, fhash -> path, as a dict would hold them (a later name of a hash
// replaces its earlier one, in place): the tracer's hashes (16 hex digits) as numbers and the
// paths back to back in one buffer (a million names: tens of MB, no Python object each), any
// other hash in a dict of its own. Looked up a block's dictionary of hashes at a time.
class Names {
 public:
  // The FH lines among a block's metadata lines (fh_line; bytes that are not UTF-8 are left
  // too), into this table: (the other lines, the hashes of the paths that start with one of
  // `ipc_prefixes`: pipes and sockets, the lines taken).
  py::tuple fh(const py::list& lines, const std::vector<std::string>& ipc_prefixes) {
    py::list rest, ipc;
    int64_t taken = 0;
    for (const py::handle& h : lines) {
      std::string_view path, hash;
      if (!fh_line(h, path, hash) || !iot::utf8(path) || !iot::utf8(hash)) {
        rest.append(h);
        continue;
      }
      taken++;
      if (is_ipc(path, ipc_prefixes)) ipc.append(str_of(hash));
      put(hash, path);
    }
    return py::make_tuple(rest, ipc, taken);
  }

  // The file names a reader kept apart (Batch.names: the hashes' numbers, the paths' int64
  // offsets and bytes), into this table: (the hashes of pipes and sockets among them, as
  // `fh` gives them; how many).
  py::tuple put_numbers(const py::buffer& hashes, const py::buffer& offsets,
                        const py::buffer& bytes, const std::vector<std::string>& ipc_prefixes) {
    const py::buffer_info h = hashes.request(), o = offsets.request(), b = bytes.request();
    std::vector<uint64_t> ipc;
    size_t n = 0;
    const size_t count = size_t(h.size * h.itemsize) / sizeof(uint64_t);
    const char* ahead = static_cast<const char*>(h.ptr);
    // with the GIL: the Parquet thread looks names up meanwhile (codes, with a limit)
    iot::for_each_name_apart(h.ptr, size_t(h.size * h.itemsize), o.ptr, size_t(o.size * o.itemsize),
                             static_cast<const char*>(b.ptr), size_t(b.size * b.itemsize),
                             [&](uint64_t x, std::string_view path) {
                               if (n + kAhead < count) {
                                 uint64_t y;
                                 std::memcpy(&y, ahead + 8 * (n + kAhead), 8);
                                 index_.prefetch(y, 0);
                               }
                               if (is_ipc(path, ipc_prefixes)) ipc.push_back(x);
                               put_number(x, path);
                               n++;
                             });
    py::list out;
    char text[16];
    for (uint64_t v : ipc) {
      iot::hex16_text(v, text);
      out.append(str_of(std::string_view(text, 16)));
    }
    return py::make_tuple(out, n);
  }

  void set(const py::str& hash, const py::str& path) { put(utf8_of(hash), utf8_of(path)); }

  py::object get(const py::object& hash) const {
    if (!PyUnicode_Check(hash.ptr())) return py::none();
    const std::string_view h = utf8_of(hash);
    uint64_t x;
    if (iot::hex16(h, x)) {
      const int64_t k = index_.find(x, 0);
      return k < 0 ? py::none() : str_of(path(size_t(k)));
    }
    const py::object o = other_.attr("get")(hash);
    return o;
  }

  bool contains(const py::object& hash) const { return !get(hash).is_none(); }
  int64_t hex_count() const { return int64_t(index_.size()); }
  bool other_empty() const { return other_empty_; }
  size_t size() const { return index_.size() + py::len(other_); }

  // parquet.resolve_names' lookup of a dictionary of hashes: per value its path's code (-1:
  // none, or null) and the paths found, in the dictionary's order (one per value found: a
  // dictionary's hashes are distinct, and Arrow and Parquet take a path twice if two hashes
  // name it; no hashing of paths). The paths come as the offsets and bytes of an Arrow string
  // array. `limit` >= 0: the names as they were when the table had that many hex hashes (a
  // later one is not seen); then the GIL is kept (another thread reads while the reader
  // thread may add).
  py::tuple codes(I64 off, py::array_t<uint8_t, py::array::c_style> data, U8 valid,
                  int64_t limit) const {
    const Strings s{off, data, valid};
    const int64_t n = s.size();
    std::vector<int32_t> code(size_t(n > 0 ? n : 0), -1);
    std::vector<int64_t> offsets{0};
    std::vector<uint8_t> bytes;
    auto run = [&] {
      offsets.reserve(size_t(n) + 1);
      int64_t near = -1;
      for (int64_t i = 0; i < n; i++) {
        std::string_view p;
        if (!s.ok(i) || !find(s.at(i), p, limit, near)) continue;
        code[size_t(i)] = int32_t(offsets.size() - 1);
        bytes.insert(bytes.end(), p.begin(), p.end());
        offsets.push_back(int64_t(bytes.size()));
      }
    };
    if (other_empty_ &&
        limit < 0) {  // no Python object to look at: without the GIL (the Parquet thread runs)
      py::gil_scoped_release nogil;
      run();
    } else {
      run();
    }
    return py::make_tuple(give_array(std::move(code)), give_array(std::move(offsets)),
                          give_array(std::move(bytes)));
  }

  // The values (non-null) of a dictionary of hashes that have no name.
  py::list missing(I64 off, py::array_t<uint8_t, py::array::c_style> data, U8 valid) const {
    const Strings s{off, data, valid};
    py::list out;
    std::string_view p;
    int64_t near = -1;
    for (int64_t i = 0; i < s.size(); i++)
      if (s.ok(i) && !find(s.at(i), p, -1, near)) out.append(str_of(s.at(i)));
    return out;
  }

  // The paths of hashes given as numbers (keys.py: the tracer's 16 hex digits): (offsets and
  // bytes of an Arrow string array, 1 where the hash has a path). Other hashes: `other`.
  py::tuple paths(py::array_t<uint64_t, py::array::c_style | py::array::forcecast> values) const {
    const int64_t n = values.shape(0);
    std::vector<int64_t> offsets(size_t(n) + 1, 0);
    std::vector<uint8_t> bytes, found(size_t(n), 0);
    int64_t near = -1;
    for (int64_t i = 0; i < n; i++) {
      const int64_t k = entry(values.data()[i], near);
      if (k >= 0) {
        const std::string_view p = path(size_t(k));
        bytes.insert(bytes.end(), p.begin(), p.end());
        found[size_t(i)] = 1;
      }
      offsets[size_t(i) + 1] = int64_t(bytes.size());
    }
    return py::make_tuple(give_array(std::move(offsets)), give_array(std::move(bytes)),
                          give_array(std::move(found)));
  }

  const py::dict& other() const { return other_; }

  // (the hex hashes' numbers, their paths' offsets and bytes (an Arrow string array's),
  // the other hashes' dict), the hex ones in the order they came; without those of `skip`
  // (numbers of hex hashes: the names a task's rows of files carry already).
  py::tuple table(const py::object& skip) const {
    const size_t n = index_.size();
    std::vector<uint8_t> drop(n, 0);
    if (!skip.is_none()) {
      const auto v = skip.cast<py::array_t<uint64_t, py::array::c_style | py::array::forcecast>>();
      int64_t near = -1;
      for (int64_t i = 0; i < v.shape(0); i++) {
        const int64_t k = entry(v.data()[i], near);
        if (k >= 0) drop[size_t(k)] = 1;
      }
    }
    size_t total = 0, kept = 0;
    for (size_t k = 0; k < n; k++)
      if (!drop[k]) total += len_[k], kept++;
    std::vector<int64_t> offsets(kept + 1, 0);
    std::vector<uint8_t> bytes;
    std::vector<uint64_t> values;
    bytes.reserve(total), values.reserve(kept);
    for (size_t k = 0; k < n; k++) {
      if (drop[k]) continue;
      const std::string_view p = path(k);
      bytes.insert(bytes.end(), p.begin(), p.end());
      values.push_back(index_.kv[k]);
      offsets[values.size()] = int64_t(bytes.size());
    }
    return py::make_tuple(give_array(std::move(values)), give_array(std::move(offsets)),
                          give_array(std::move(bytes)), other_);
  }

 private:
  KeyIndex index_;  // (hash number, 0) -> entry
  std::string arena_;
  std::vector<uint64_t> at_;
  std::vector<uint32_t> len_;
  py::dict other_;
  bool other_empty_ = true;

  std::string_view path(size_t k) const { return {arena_.data() + at_[k], len_[k]}; }

  // a pipe's or a socket's name (file_class.IPC_PREFIXES)
  static bool is_ipc(std::string_view path, const std::vector<std::string>& prefixes) {
    for (const std::string& pre : prefixes)
      if (path.substr(0, pre.size()) == pre) return true;
    return false;
  }

  void put(std::string_view hash, std::string_view p) {
    uint64_t x;
    if (!iot::hex16(hash, x)) {
      if (PyDict_SetItem(other_.ptr(), str_of(hash).ptr(), str_of(p).ptr()))
        throw py::error_already_set();
      other_empty_ = false;
      return;
    }
    put_number(x, p);
  }

  void put_number(uint64_t x, std::string_view p) {
    const auto k = index_.add(x, 0);
    if (k.second) at_.push_back(0), len_.push_back(0);
    if (!k.second && path(k.first) == p) return;
    at_[k.first] = arena_.size(), len_[k.first] = uint32_t(p.size());
    arena_.append(p);
  }

  // The entry of hash number x, or -1. `near`: the entry this pass found last. A block's
  // hashes mostly come in the order their names came (a file named, then used), so the entry
  // after it is tried first: a lookup among a million keys is a cache miss or two.
  int64_t entry(uint64_t x, int64_t& near) const {
    const size_t next = size_t(near + 1);
    if (next < index_.kv.size() && index_.kv[next] == x) return ++near;
    const int64_t k = index_.find(x, 0);
    if (k >= 0) near = k;
    return k;
  }

  bool find(std::string_view hash, std::string_view& p, int64_t limit, int64_t& near) const {
    uint64_t x;
    if (iot::hex16(hash, x)) {
      const int64_t k = entry(x, near);
      if (k < 0 || (limit >= 0 && k >= limit)) return false;
      p = path(size_t(k));
      return true;
    }
    if (other_empty_) return false;
    PyObject* o = PyDict_GetItemWithError(other_.ptr(), str_of(hash).ptr());
    if (!o) {
      if (PyErr_Occurred()) throw py::error_already_set();
      return false;
    }
    p = utf8_of(o);
    return true;
  }
};

// Numbers written as 16 lowercase hex digits, back to back (the bytes of a string array whose
// values are 16 bytes each).
py::array_t<uint8_t> hex_strings(
    py::array_t<uint64_t, py::array::c_style | py::array::forcecast> values) {
  const int64_t n = values.shape(0);
  py::array_t<uint8_t> out(n * 16);
  char* o = reinterpret_cast<char*>(out.mutable_data());
  const uint64_t* v = values.data();
  for (int64_t i = 0; i < n; i++) iot::hex16_text(v[i], o + i * 16);
  return out;
}

// The order of rows by a number, greatest first, then by a string (bytes, as Arrow compares
// UTF-8), then by row: Arrow's stable sort_indices on (key descending, name ascending). A
// million files' times tie often (30K distinct among 1M) and their paths share a long prefix:
// each row carries the 16 bytes of its name after the prefix all names share, so that most
// comparisons are of numbers in place, not of paths at random. Keys are not NaN.
py::array_t<int64_t> order_by_key_then_name(
    py::array_t<double, py::array::c_style | py::array::forcecast> key, I64 offsets,
    py::array_t<uint8_t, py::array::c_style> data) {
  const int64_t n = key.shape(0);
  if (offsets.shape(0) != n + 1)
    throw std::invalid_argument("order: offsets do not match the keys");
  const double* k = key.data();
  const int64_t* off = offsets.data();
  const char* d = reinterpret_cast<const char*>(data.data());
  for (int64_t i = 0; i <= n; i++)
    if (off[i] < 0 || off[i] > data.shape(0) || (i && off[i] < off[i - 1]))
      throw std::invalid_argument("order: an offset past the names");
  struct Row {
    double key;
    uint64_t head[2];  // the name's 16 bytes after the shared prefix, big-endian, 0-padded
    int64_t row;
  };
  std::vector<Row> rows(size_t(n > 0 ? n : 0));
  std::vector<int64_t> out(rows.size());
  {
    py::gil_scoped_release nogil;
    auto name = [&](int64_t i) {
      return std::string_view(d + off[i], size_t(off[i + 1] - off[i]));
    };
    size_t shared = n ? name(0).size() : 0;
    for (int64_t i = 1; i < n && shared; i++) {
      const std::string_view a = name(0), b = name(i);
      size_t j = 0;
      const size_t m = std::min({shared, a.size(), b.size()});
      while (j < m && a[j] == b[j]) j++;
      shared = j;
    }
    for (int64_t i = 0; i < n; i++) {
      Row& r = rows[size_t(i)];
      r.key = k[i], r.row = i;
      const std::string_view s = name(i).substr(shared);
      unsigned char b[16] = {};
      std::memcpy(b, s.data(), std::min<size_t>(s.size(), 16));
      r.head[0] = r.head[1] = 0;
      for (int j = 0; j < 16; j++) r.head[j / 8] = r.head[j / 8] << 8 | b[j];
    }
    std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      if (a.key != b.key) return a.key > b.key;
      if (a.head[0] != b.head[0]) return a.head[0] < b.head[0];
      if (a.head[1] != b.head[1]) return a.head[1] < b.head[1];
      const int c = name(a.row).substr(shared).compare(name(b.row).substr(shared));  // as memcmp
      return c != 0 ? c < 0 : a.row < b.row;
    });
    for (size_t i = 0; i < rows.size(); i++) out[i] = rows[i].row;
  }
  return give_array(std::move(out));
}

// Paths (an Arrow string array's offsets and bytes) cut at their last '/': the folder (before
// it) and the tail of the name from its first '.' (the whole name when it has none), each as
// codes into its distinct values, in order of first appearance. Flags per path: 1, no '/'
// (no folder: code -1); 2, ends with a newline (a regex's `$` also matches before it).
// Distinct strings -> 0, 1, 2... in the order they came: open addressing, at most half full,
// on a hash of 8 bytes at a time kept beside each index: no node to follow, a string compared
// only when the hashes match (path_parts of a million paths in a thousand folders: 106 -> 83 ns
// a path, against std::unordered_map).
class ViewIndex {
 public:
  std::vector<std::string_view> list;

  int32_t add(std::string_view v) {
    if ((list.size() + 1) * 2 > table_.size()) grow();
    const uint64_t h = hash(v);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Entry& e = table_[i];
      if (e.index < 0) {
        e = Entry{h, int32_t(list.size())};
        list.push_back(v);
        return e.index;
      }
      if (e.hash == h && list[size_t(e.index)] == v) return e.index;
    }
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    int32_t index = -1;
  };
  std::vector<Entry> table_;
  size_t mask_ = 0;

  static uint64_t hash(std::string_view v) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
    size_t i = 0;
    for (; i + 8 <= v.size(); i += 8) {
      uint64_t w;
      memcpy(&w, v.data() + i, 8);
      h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
      h ^= h >> 29;
    }
    uint64_t w = 0;
    if (i < v.size()) memcpy(&w, v.data() + i, v.size() - i);
    h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 32);
  }
  void grow() {
    std::vector<Entry> old(table_.empty() ? 64 : table_.size() * 2);
    old.swap(table_);
    mask_ = table_.size() - 1;
    for (const Entry& e : old) {
      if (e.index < 0) continue;
      size_t i = e.hash & mask_;
      while (table_[i].index >= 0) i = (i + 1) & mask_;
      table_[i] = e;
    }
  }
};

py::tuple path_parts(I64 offsets, py::array_t<uint8_t, py::array::c_style> data) {
  const int64_t n = offsets.shape(0) - 1;
  const int64_t* off = offsets.data();
  const char* d = reinterpret_cast<const char*>(data.data());
  std::vector<int32_t> dir_code(size_t(n > 0 ? n : 0)), tail_code(size_t(n > 0 ? n : 0));
  std::vector<uint8_t> flags(size_t(n > 0 ? n : 0), 0);
  ViewIndex dirs, tails;
  {
    py::gil_scoped_release nogil;
    for (int64_t i = 0; i < n; i++) {
      const char* s = d + off[i];
      const char* e = d + off[i + 1];
      if (e > s && e[-1] == '\n') flags[size_t(i)] |= 2;
      const char* slash = e;
      while (slash > s && slash[-1] != '/') slash--;
      const char* name = slash;  // after the last '/', or the whole path
      if (slash == s) {
        flags[size_t(i)] |= 1;
        dir_code[size_t(i)] = -1;
      } else {
        dir_code[size_t(i)] = dirs.add(std::string_view(s, size_t(slash - 1 - s)));
      }
      const char* dot = name;
      while (dot < e && *dot != '.') dot++;
      std::string_view tv = dot < e ? std::string_view(dot, size_t(e - dot))
                                    : std::string_view(name, size_t(e - name));
      tail_code[size_t(i)] = tails.add(tv);
    }
  }
  py::list dl, tl;
  for (auto v : dirs.list) dl.append(py::str(v.data(), v.size()));
  for (auto v : tails.list) tl.append(py::str(v.data(), v.size()));
  return py::make_tuple(give_array(std::move(dir_code)), dl, give_array(std::move(tail_code)), tl,
                        give_array(std::move(flags)));
}

// ---------------------------------------------------------------------------- a task's files

template <class T>
py::array_t<T> array_of(const py::dict& d, const char* key) {
  return d[key].cast<py::array_t<T, py::array::c_style | py::array::forcecast>>();
}

// What a task knows of its files, block after block (summary.Partial): per (hash, pid) the
// sums of kFileSumNames, calls per (file, direction and size bin), each stream's end (the
// access pattern of a stream that goes on in the next block) and each (hash, pid)'s uniform
// sample of offsets. fold() takes a block's figures (figures(): its files slots, streams and
// samples, numbered within the block) with the block's hashes as numbers (keys.py: a value
// and a kind per dictionary code) and the block's processes (a number and a pid each); keys
// keep the order they first came in, as Arrow's group-by of the blocks' tables kept it.
// A column of per-slot sums as int32 until a value does not fit, then int64 (a million files'
// 16 sums: 64 MB, not 128), given to Python in the type it has.
struct SumCol {
  std::vector<int32_t> narrow;
  std::vector<int64_t> wide;
  bool is_wide = false;

  void push0() { is_wide ? wide.push_back(0) : narrow.push_back(0); }
  int64_t get(size_t s) const { return is_wide ? wide[s] : narrow[s]; }
  void set(size_t s, int64_t y) {
    if (is_wide) {
      wide[s] = y;
      return;
    }
    if (y < INT32_MIN || y > INT32_MAX) {
      wide.assign(narrow.begin(), narrow.end());
      std::vector<int32_t>().swap(narrow);
      is_wide = true;
      wide[s] = y;
      return;
    }
    narrow[s] = int32_t(y);
  }
  py::object take() {
    if (is_wide) return give_array(std::move(wide));
    return give_array(std::move(narrow));
  }
};

class FileState {
 public:
  // The (hash, process) slots: one lookup per slot and block; the process numbered by the
  // caller (a pid may have several: the images of an exec'd process).
  KeyIndex files;  // (hash value, process number * 4 + kind)
  std::vector<int64_t> slot_proc;
  SumCol sums[kFileSums];
  // calls per (slot, direction * kSizeBins + size bin): two bins in the slot, more beside
  std::vector<int8_t> bin_[2];
  std::vector<int64_t> bin_count_[2];
  KeyIndex more_bins;  // (slot, bin)
  std::vector<int64_t> more_count;
  // where each (slot's, or a process's calls without a hash) stream ended, per direction
  std::vector<int64_t> end_[2];
  std::vector<uint8_t> begun;  // bit dir: the stream has had a call
  KeyIndex no_hash;            // (0, process number): streams of calls without a hash
  std::vector<int64_t> no_hash_end[2];
  std::vector<uint8_t> no_hash_begun;
  std::vector<int64_t> proc_pid;  // process number -> pid
  // offset samples per (hash, pid) (two processes of one pid share theirs): while each pid
  // is one process's, an entry per slot, its slot beside it (no second index of a million
  // keys); keyed by (hash value, pid * 4 + kind) from the first pid of two processes on
  KeyIndex samples;
  bool keyed = false;
  std::vector<uint32_t> entry_slot;  // (not keyed) each entry's slot
  std::unordered_map<int64_t, int64_t> pid_proc;
  std::vector<int32_t> slot_sample;  // the slot's samples entry, -1 before its first
  // an entry's points are a range of the pool's columns (a merge that outgrows its range
  // writes a new one at the end; the pool is compacted when half of it is left behind)
  struct Sample {
    int64_t seen = 0;
    int32_t stride = 0;
    uint32_t count = 0, room = 0;
    uint64_t at = 0;
  };
  std::vector<Sample> sample;
  std::vector<int64_t> pool_ts, pool_off, pool_len;
  std::vector<int8_t> pool_dir;
  size_t pool_live = 0;

  // The block's access counts that the streams carried from blocks before decide, per
  // direction: first, consecutive, sequential, random.
  py::tuple fold(const py::dict& f,
                 py::array_t<uint64_t, py::array::c_style | py::array::forcecast> value,
                 py::array_t<int8_t, py::array::c_style | py::array::forcecast> kind, I64 pk,
                 I64 pid) {
    const uint64_t* val = value.data();
    const int8_t* knd = kind.data();
    const int64_t* pk_ = pk.data();
    const int64_t n_codes = value.shape(0);
    for (int64_t p = 0; p < pk.shape(0); p++) {
      if (pk_[p] < 0) throw std::invalid_argument("fold: process numbers from 0");
      if (size_t(pk_[p]) >= proc_pid.size()) proc_pid.resize(size_t(pk_[p]) + 1, INT64_MIN);
      proc_pid[size_t(pk_[p])] = pid.data()[p];
      if (!keyed && pid_proc.emplace(pid.data()[p], pk_[p]).first->second != pk_[p]) key_samples();
    }
    auto slot_of = [&](int64_t code, int64_t p) {
      if (code < 0 || code >= n_codes) throw std::invalid_argument("fold: hash code out of range");
      const auto at = files.add(val[code], pk_[p] * 4 + knd[code]);
      if (at.second) {
        slot_proc.push_back(pk_[p]);
        for (auto& s : sums) s.push0();
        for (int d = 0; d < 2; d++)
          bin_[d].push_back(-1), bin_count_[d].push_back(0), end_[d].push_back(0);
        begun.push_back(0);
        slot_sample.push_back(-1);
      }
      return at.first;
    };
    // the block's arrays (with the GIL), then the folding without it (the Parquet thread runs)
    const py::dict fl = f["files"];
    const I64 fh = array_of<int64_t>(fl, "fhash"), proc = array_of<int64_t>(fl, "proc");
    std::vector<I64> cols;
    for (const char* name : kFileSumNames) cols.push_back(array_of<int64_t>(fl, name));
    const py::dict fs = f["file_sizes"];
    const I64 fs_slot = array_of<int64_t>(fs, "slot"), fs_bin = array_of<int64_t>(fs, "bin"),
              fs_count = array_of<int64_t>(fs, "count");
    const I64 s_fh = f["stream_fh"].cast<I64>(), s_proc = f["stream_proc"].cast<I64>();
    const char* dirs[2] = {"read", "write"};
    std::vector<I64> heads;  // per direction: head_stream, head_off, tail_end
    for (int dir = 0; dir < 2; dir++) {
      const py::dict d = f[dirs[dir]];
      for (const char* k : {"head_stream", "head_off", "tail_end"})
        heads.push_back(array_of<int64_t>(d, k));
    }
    const py::dict off = f["offsets"];
    const I64 o_slot = array_of<int64_t>(off, "slot"), o_ts = array_of<int64_t>(off, "ts"),
              o_off = array_of<int64_t>(off, "offset"), o_len = array_of<int64_t>(off, "length"),
              o_dir = array_of<int64_t>(off, "dir"), o_seen = array_of<int64_t>(off, "seen"),
              o_stride = array_of<int64_t>(off, "stride");
    int64_t carried[2][4] = {};  // per direction: first, consecutive, sequential, random
    {
      py::gil_scoped_release nogil;
      const int64_t n_slots = fh.shape(0);
      std::vector<uint32_t> slot_file(size_t(n_slots > 0 ? n_slots : 0));
      for (int64_t j = 0; j < n_slots; j++) {
        if (j + int64_t(kAhead) < n_slots) {  // (a code out of range is refused by slot_of)
          const int64_t c = fh.data()[j + kAhead], p = proc.data()[j + kAhead];
          if (c >= 0 && c < n_codes && p >= 0 && p < pk.shape(0))
            files.prefetch(val[c], pk_[p] * 4 + knd[c]);
        }
        const uint32_t s = slot_of(fh.data()[j], proc.data()[j]);
        slot_file[size_t(j)] = s;
        for (int c = 0; c < kFileSums; c++) {
          const int64_t x = cols[size_t(c)].data()[j], y = sums[c].get(s);
          sums[c].set(s, c == kReadExtent ? std::max(y, x) : y + x);
        }
      }
      for (int64_t j = 0; j < fs_slot.shape(0); j++) {
        const uint32_t s = slot_file[size_t(fs_slot.data()[j])];
        const int8_t b = int8_t(fs_bin.data()[j]);
        const int64_t c = fs_count.data()[j];
        int d = 0;
        while (d < 2 && bin_[d][s] != b && bin_[d][s] >= 0) d++;
        if (d < 2) {
          bin_[d][s] = b, bin_count_[d][s] += c;
          continue;
        }
        const auto at = more_bins.add(s, b);
        if (at.second) more_count.push_back(0);
        more_count[at.first] += c;
      }
      // streams: a block's first call of a stream against where the stream ended before
      for (int dir = 0; dir < 2; dir++) {
        const I64 &hs = heads[size_t(3 * dir)], &ho = heads[size_t(3 * dir + 1)],
                  &te = heads[size_t(3 * dir + 2)];
        int64_t* c4 = carried[dir];
        for (int64_t h = 0; h < hs.shape(0); h++) {
          const int64_t sid = hs.data()[h];
          const int64_t code = s_fh.data()[sid], p = s_proc.data()[sid];
          int64_t* end;
          uint8_t* flag;
          uint32_t s = 0;
          if (code >= 0) {  // a files slot's stream: the block numbers it as the slot
            s = sid < n_slots ? slot_file[size_t(sid)] : slot_of(code, p);
            end = &end_[dir][s], flag = &begun[s];
          } else {
            const auto at = no_hash.add(0, pk_[p]);
            if (at.second)
              no_hash_end[0].push_back(0), no_hash_end[1].push_back(0), no_hash_begun.push_back(0);
            end = &no_hash_end[dir][at.first], flag = &no_hash_begun[at.first];
          }
          const int64_t o = ho.data()[h];
          if (!(*flag & (1 << dir))) {
            c4[0]++;
            *flag |= uint8_t(1 << dir);
          } else {
            c4[1] += o == *end;
            const bool seq = o >= *end;
            c4[2] += seq, c4[3] += !seq;
            if (code >= 0) {
              SumCol& c = sums[kReadSeq + 2 * dir + !seq];
              c.set(s, c.get(s) + 1);
            }
          }
          *end = te.data()[h];
        }
      }
      // samples: the block's, merged into each (hash, pid)'s as activity._merge_sample does
      const int64_t n_pts = o_slot.shape(0);
      for (int64_t a = 0; a < n_pts;) {
        const int64_t j = o_slot.data()[a];
        int64_t b = a;
        while (b < n_pts && o_slot.data()[b] == j) b++;
        const uint32_t s = slot_file[size_t(j)];
        bool fresh = false;
        if (slot_sample[s] < 0 && !keyed) {
          slot_sample[s] = int32_t(sample.size());
          sample.emplace_back(), entry_slot.push_back(s);
          fresh = true;
        } else if (slot_sample[s] < 0) {
          const int64_t code = fh.data()[j];
          const auto at = samples.add(val[code], pid.data()[proc.data()[j]] * 4 + knd[code]);
          if (at.second) sample.emplace_back();
          slot_sample[s] = int32_t(at.first);
          fresh = at.second;
        }
        merge_sample(sample[size_t(slot_sample[s])], fresh, o_seen.data()[j],
                     int(o_stride.data()[j]), o_ts.data() + a, o_off.data() + a, o_len.data() + a,
                     o_dir.data() + a, size_t(b - a));
        a = b;
      }
      if (pool_ts.size() > (1u << 20) && pool_ts.size() > 2 * pool_live) compact_pool();
    }
    py::list counts;
    for (auto& c4 : carried) counts.append(py::make_tuple(c4[0], c4[1], c4[2], c4[3]));
    return py::tuple(counts);
  }

  // Everything, as columns in the order the keys came (the state is emptied).
  py::dict take() {
    py::dict out;
    {  // (before the files' keys are given away: an entry not keyed is its slot's)
      const size_t n = sample.size();
      std::vector<uint64_t> value(n);
      std::vector<int64_t> pid(n), kind(n), seen(n), stride(n), bounds(n + 1, 0), ts, off, len;
      std::vector<int8_t> dir;
      compact_pool();  // the entries' points one after the other, in their order
      for (size_t i = 0; i < n; i++) {
        if (keyed) {
          value[i] = samples.kv[i], pid[i] = samples.ka[i] >> 2, kind[i] = samples.ka[i] & 3;
        } else {
          const uint32_t s = entry_slot[i];
          value[i] = files.kv[s], pid[i] = proc_pid[size_t(slot_proc[s])],
          kind[i] = files.ka[s] & 3;
        }
        seen[i] = sample[i].seen, stride[i] = sample[i].stride;
        bounds[i + 1] = bounds[i] + sample[i].count;
      }
      ts.swap(pool_ts), off.swap(pool_off), len.swap(pool_len), dir.swap(pool_dir);
      py::dict d;
      d["value"] = give_array(std::move(value));
      d["kind"] = give_array(std::move(kind));
      d["pid"] = give_array(std::move(pid));
      d["seen"] = give_array(std::move(seen));
      d["stride"] = give_array(std::move(stride));
      d["bounds"] = give_array(std::move(bounds));
      d["ts"] = give_array(std::move(ts));
      d["offset"] = give_array(std::move(off));
      d["length"] = give_array(std::move(len));
      d["dir"] = give_array(std::move(dir));
      out["samples"] = d;
    }
    {
      const size_t n = files.size();
      std::vector<int64_t> pid(n), kind(n);
      std::vector<uint8_t> sampled(n, 0);  // the slots whose (hash, pid) has offset samples
      for (size_t i = 0; i < n; i++) {
        pid[i] = proc_pid[size_t(slot_proc[i])], kind[i] = files.ka[i] & 3;
        sampled[i] = slot_sample[i] >= 0;
      }
      // a pid with two process numbers: the slots are not per (hash, pid)
      std::unordered_map<int64_t, int64_t> proc_of_pid;
      bool per_pid = true;
      for (size_t p = 0; p < proc_pid.size(); p++)
        if (proc_pid[p] != INT64_MIN && !proc_of_pid.emplace(proc_pid[p], int64_t(p)).second)
          per_pid = false;
      py::dict d;
      d["value"] = give_array(std::move(files.kv));
      d["kind"] = give_array(std::move(kind));
      d["pid"] = give_array(std::move(pid));
      d["sampled"] = give_array(std::move(sampled));
      d["per_pid"] = per_pid;
      for (int c = 0; c < kFileSums; c++) d[kFileSumNames[c]] = sums[c].take();
      out["files"] = d;
    }
    {
      std::vector<int64_t> file, bin, count;
      for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < bin_[d].size(); i++)
          if (bin_[d][i] >= 0)
            file.push_back(int64_t(i)), bin.push_back(bin_[d][i]),
                count.push_back(bin_count_[d][i]);
      for (size_t k = 0; k < more_bins.size(); k++)
        file.push_back(int64_t(more_bins.kv[k])), bin.push_back(more_bins.ka[k]),
            count.push_back(more_count[k]);
      py::dict d;
      d["file"] = give_array(std::move(file));
      d["bin"] = give_array(std::move(bin));
      d["count"] = give_array(std::move(count));
      out["file_sizes"] = d;
    }
    *this = FileState();  // its memory goes
    return out;
  }

 private:
  // _merge_sample(a, b): both at the coarser stride (every 2^(s - stride)-th point of each),
  // halved while more than kSamplePoints.
  void merge_sample(Sample& a, bool fresh, int64_t seen, int stride, const int64_t* ts,
                    const int64_t* off, const int64_t* len, const int64_t* dir, size_t n) {
    std::vector<int64_t>& m_ts = tmp_ts_;
    std::vector<int64_t>& m_off = tmp_off_;
    std::vector<int64_t>& m_len = tmp_len_;
    std::vector<int8_t>& m_dir = tmp_dir_;
    m_ts.clear(), m_off.clear(), m_len.clear(), m_dir.clear();
    int s = stride;
    if (!fresh) {
      s = std::max(a.stride, stride);
      const size_t sa = size_t(1) << (s - a.stride);
      for (size_t k = 0; k < a.count; k += sa) {
        const size_t q = a.at + k;
        m_ts.push_back(pool_ts[q]), m_off.push_back(pool_off[q]), m_len.push_back(pool_len[q]);
        m_dir.push_back(pool_dir[q]);
      }
    }
    const size_t sb = size_t(1) << (s - stride);
    for (size_t k = 0; k < n; k += sb)
      m_ts.push_back(ts[k]), m_off.push_back(off[k]), m_len.push_back(len[k]),
          m_dir.push_back(int8_t(dir[k]));
    while (m_ts.size() > kSamplePoints) {
      size_t w = 0;
      for (size_t k = 0; k < m_ts.size(); k += 2, w++)
        m_ts[w] = m_ts[k], m_off[w] = m_off[k], m_len[w] = m_len[k], m_dir[w] = m_dir[k];
      m_ts.resize(w), m_off.resize(w), m_len.resize(w), m_dir.resize(w);
      s++;
    }
    a.seen = fresh ? seen : a.seen + seen;
    a.stride = s;
    const uint32_t count = uint32_t(m_ts.size());
    pool_live += count;
    pool_live -= fresh ? 0 : a.count;
    if (fresh || count > a.room) {  // a range of its own at the end
      a.at = pool_ts.size();
      a.room = count;
      pool_ts.insert(pool_ts.end(), m_ts.begin(), m_ts.end());
      pool_off.insert(pool_off.end(), m_off.begin(), m_off.end());
      pool_len.insert(pool_len.end(), m_len.begin(), m_len.end());
      pool_dir.insert(pool_dir.end(), m_dir.begin(), m_dir.end());
    } else {
      std::copy(m_ts.begin(), m_ts.end(), pool_ts.begin() + int64_t(a.at));
      std::copy(m_off.begin(), m_off.end(), pool_off.begin() + int64_t(a.at));
      std::copy(m_len.begin(), m_len.end(), pool_len.begin() + int64_t(a.at));
      std::copy(m_dir.begin(), m_dir.end(), pool_dir.begin() + int64_t(a.at));
    }
    a.count = count;
  }

  // The samples keyed from now on: the keys of the entries so far, from their slots.
  void key_samples() {
    if (keyed) return;
    keyed = true;
    for (const uint32_t s : entry_slot)
      samples.add(files.kv[s], proc_pid[size_t(slot_proc[s])] * 4 + (files.ka[s] & 3));
    std::vector<uint32_t>().swap(entry_slot);
  }

  // The pool with each entry's points only, the entries' ranges one after the other (as
  // they are when each entry was merged once: a million files read once).
  void compact_pool() {
    size_t at = 0;
    bool compact = pool_live == pool_ts.size();
    for (size_t i = 0; compact && i < sample.size(); at += sample[i].count, i++)
      compact = sample[i].at == at && sample[i].room == sample[i].count;
    if (compact) return;
    std::vector<int64_t> ts, off, len;
    std::vector<int8_t> dir;
    ts.reserve(pool_live), off.reserve(pool_live), len.reserve(pool_live), dir.reserve(pool_live);
    for (Sample& e : sample) {
      const auto b = int64_t(e.at), c = int64_t(e.count);
      e.at = ts.size(), e.room = e.count;
      ts.insert(ts.end(), pool_ts.begin() + b, pool_ts.begin() + b + c);
      off.insert(off.end(), pool_off.begin() + b, pool_off.begin() + b + c);
      len.insert(len.end(), pool_len.begin() + b, pool_len.begin() + b + c);
      dir.insert(dir.end(), pool_dir.begin() + b, pool_dir.begin() + b + c);
    }
    pool_ts.swap(ts), pool_off.swap(off), pool_len.swap(len), pool_dir.swap(dir);
  }

  std::vector<int64_t> tmp_ts_, tmp_off_, tmp_len_;
  std::vector<int8_t> tmp_dir_;
};

// A task's layer split, block after block (nesting.h; summary.Partial): per complete event its
// layer, from its category when the event is one of the tracer's calls (cat_layer per category
// code, name_kind's kCall per name code), else layer 0 (the program's own spans).
class Layers {
 public:
  void add(I32 ph, U8 ph_x, I32 cat, U8 cat_layer, I32 name, U8 name_kind, py::tuple ts,
           py::tuple dur, py::tuple tid, I64 proc, I64 pk) {
    const Col ts_c(ts), dur_c(dur), tid_c(tid);
    const int64_t rows = ts_c.rows();
    if (ph.shape(0) != rows || cat.shape(0) != rows || name.shape(0) != rows ||
        dur_c.rows() != rows || tid_c.rows() != rows || (proc.shape(0) && proc.shape(0) != rows))
      throw std::invalid_argument("Layers.add: columns of different lengths");
    const int32_t *ph_ = ph.data(), *cat_ = cat.data(), *name_ = name.data();
    const uint8_t *ph_x_ = ph_x.data(), *cl = cat_layer.data(), *nk = name_kind.data();
    const int64_t n_ph = ph_x.shape(0), n_cat = cat_layer.shape(0), n_name = name_kind.shape(0);
    const int64_t* proc_ = proc.shape(0) ? proc.data() : nullptr;
    const int64_t* pk_ = pk.data();
    py::gil_scoped_release nogil;
    for (int64_t i = 0; i < rows; i++) {
      const int32_t p = ph_[i];
      if (p < 0 || p >= n_ph || !ph_x_[p]) continue;
      const int32_t c = cat_[i], nm = name_[i];
      int layer = 0;
      if (c >= 0 && c < n_cat && cl[c] && nm >= 0 && nm < n_name && (nk[nm] & kCall)) layer = cl[c];
      n_.add(pk_[proc_ ? proc_[i] : 0], tid_c.at(i), layer, ts_c.at(i), dur_c.at(i));
    }
  }
  // (process number, layer) -> count, dur, own, as columns; the state starts again
  py::dict take() {
    std::vector<int64_t> proc, layer, count, dur, own;
    for (size_t k = 0; k < n_.keys.size(); k++) {
      proc.push_back(n_.keys[k].first), layer.push_back(n_.keys[k].second);
      count.push_back(n_.sums[k].count), dur.push_back(n_.sums[k].dur),
          own.push_back(n_.sums[k].own);
    }
    n_.clear();
    py::dict d;
    d["proc"] = to_array(proc), d["layer"] = to_array(layer), d["count"] = to_array(count);
    d["dur"] = to_array(dur), d["own"] = to_array(own);
    return d;
  }

 private:
  nesting::Nesting n_;
};

}  // namespace

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "The summary's figures of one block of events, in a few passes (summary.py)";
  // The constants the Python side must agree with, from here only (summary.py, activity.py).
  py::list edges, sums;
  for (int64_t e : kSizeEdges) edges.append(e);
  for (const char* n : kFileSumNames) sums.append(n);
  m.attr("SIZE_EDGES") = py::tuple(edges);
  m.attr("FILE_SUMS") = py::tuple(sums);
  m.attr("SAMPLE_POINTS") = py::int_(kSamplePoints);
  // the bits of figures()'s cat_kind, name_kind and fh_kind (summary.Partial.add sets them)
  const std::pair<const char*, uint8_t> bits[] = {
      {"CAT_IO", kCatIo},   {"CAT_COMPUTE", kCatCompute}, {"CAT_PROCESS", kCatProcess},
      {"CALL_READ", kRead}, {"CALL_WRITE", kWrite},       {"CALL_OPEN", kOpen},
      {"CALL_SYNC", kSync}, {"CALL_KNOWN", kCall},        {"FILE_IPC", kFileIpc}};
  for (const auto& [name, bit] : bits) m.attr(name) = py::int_(bit);
  m.def("figures", &figures, py::arg("ph"), py::arg("ph_x"), py::arg("cat"), py::arg("cat_kind"),
        py::arg("name"), py::arg("name_kind"), py::arg("ts"), py::arg("dur"), py::arg("ret"),
        py::arg("bytes"), py::arg("size"), py::arg("offset"), py::arg("errno"), py::arg("fh"),
        py::arg("fh_kind"), py::arg("fd"), py::arg("tid"), py::arg("proc"), py::arg("n_procs"),
        py::arg("shifts"), py::arg("tl_exp"));
  m.def("hex_strings", &hex_strings, py::arg("values"));
  m.def("hex_values", &hex_values, py::arg("offsets"), py::arg("data"), py::arg("valid"));
  m.def("name_codes", &name_codes, py::arg("offsets"), py::arg("data"), py::arg("valid"),
        py::arg("names"));
  py::class_<Names>(m, "Names",
                    "one trace file's names, fhash -> path (inputs/read.py: FileReader)")
      .def(py::init<>())
      .def("fh", &Names::fh, py::arg("lines"), py::arg("ipc_prefixes"))
      .def("put_numbers", &Names::put_numbers, py::arg("hashes"), py::arg("offsets"),
           py::arg("bytes"), py::arg("ipc_prefixes"))
      .def("set", &Names::set, py::arg("hash"), py::arg("path"))
      .def("get", &Names::get, py::arg("hash"))
      .def("__contains__", &Names::contains)
      .def("__len__", &Names::size)
      .def("codes", &Names::codes, py::arg("offsets"), py::arg("data"), py::arg("valid"),
           py::arg("limit") = -1)
      .def("hex_count", &Names::hex_count)
      .def_property_readonly("other_empty", &Names::other_empty)
      .def("missing", &Names::missing, py::arg("offsets"), py::arg("data"), py::arg("valid"))
      .def("table", &Names::table, py::arg("skip") = py::none())
      .def("paths", &Names::paths, py::arg("values"))
      .def_property_readonly("other", &Names::other);
  py::class_<FileState>(m, "FileState", "a task's files, block after block (summary.Partial)")
      .def(py::init<>())
      .def("fold", &FileState::fold, py::arg("figures"), py::arg("value"), py::arg("kind"),
           py::arg("pk"), py::arg("pid"))
      .def("take", &FileState::take);
  py::class_<Layers>(m, "Layers", "a task's own time per (process, layer), block after block")
      .def(py::init<>())
      .def("add", &Layers::add, py::arg("ph"), py::arg("ph_x"), py::arg("cat"),
           py::arg("cat_layer"), py::arg("name"), py::arg("name_kind"), py::arg("ts"),
           py::arg("dur"), py::arg("tid"), py::arg("proc"), py::arg("pk"))
      .def("take", &Layers::take);
  m.def("order_by_key_then_name", &order_by_key_then_name, py::arg("key"), py::arg("offsets"),
        py::arg("data"));
  m.def("path_parts", &path_parts, py::arg("offsets"), py::arg("data"));
}
