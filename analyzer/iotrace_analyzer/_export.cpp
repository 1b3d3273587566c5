// iotrace_analyzer._export: the writers of `iotrace export` (csrc/export/) for Python. A batch
// of events (iotrace_format's Batch, or anything with __arrow_c_array__) is taken over through
// the Arrow PyCapsule interface; Python sees its columns as numpy views (for the filters and
// the flows, computed on columns) and hands the writers the rows to write, in order.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "batch_view.h"
#include "chrome_json.h"
#include "deflate.h"
#include "fh_line.h"
#include "perfetto.h"

namespace py = pybind11;
using iotx::BatchView;

namespace {

// One thread's calls as the batches go by (export/budget.py's pass 1): for each call, the
// longest slice (a dur_index) since the previous call of its key, that one included; `never`
// for the first. The maxima of the calls' suffixes are kept on a stack (positions rising,
// values falling: at most one entry per duration class), so the longest since position p is
// that of the first entry at or past p: a binary search, where a sparse table per batch and a
// Python loop over each key's first call cost 10x more.
class LongestSince {
 public:
  explicit LongestSince(int16_t never) : never_(never) {}

  py::array_t<int16_t> operator()(
      py::array_t<int16_t, py::array::c_style | py::array::forcecast> d,
      py::array_t<int64_t, py::array::c_style | py::array::forcecast> keys) {
    const int64_t n = d.size();
    if (keys.size() != n) throw std::invalid_argument("longest_since: d and keys differ in length");
    const int16_t* dv = d.data();
    const int64_t* kv = keys.data();
    py::array_t<int16_t> result(n);
    int16_t* out = result.mutable_data();
    for (int64_t i = 0; i < n; ++i, ++pos_) {
      const int64_t k = kv[i];
      if (k < 0) throw std::out_of_range("longest_since: a negative key");
      if (size_t(k) >= last_.size()) last_.resize(size_t(k) + 1, -1);
      const int64_t p = last_[size_t(k)];
      if (p < 0) {
        out[i] = never_;
      } else {
        auto it = std::lower_bound(stack_.begin(), stack_.end(), p,
                                   [](const Entry& e, int64_t at) { return e.pos < at; });
        out[i] = it->value;  // p is a call's position, so an entry at or past it exists
      }
      while (!stack_.empty() && stack_.back().value <= dv[i]) stack_.pop_back();
      stack_.push_back(Entry{pos_, dv[i]});
      last_[size_t(k)] = pos_;
    }
    return result;
  }

 private:
  struct Entry {
    int64_t pos;
    int16_t value;
  };
  int16_t never_;
  int64_t pos_ = 0;            // the thread's calls so far
  std::vector<Entry> stack_;   // suffix maxima
  std::vector<int64_t> last_;  // by key: the position of its last call (-1: none yet)
};

std::unique_ptr<BatchView> take_batch(py::object batch) {
  py::tuple caps = batch.attr("__arrow_c_array__")();
  auto* schema = static_cast<ArrowSchema*>(PyCapsule_GetPointer(caps[0].ptr(), "arrow_schema"));
  auto* array = static_cast<ArrowArray*>(PyCapsule_GetPointer(caps[1].ptr(), "arrow_array"));
  if (!schema || !array) throw py::error_already_set();
  if (!array->release) throw py::value_error("the batch's array was already released");
  return std::make_unique<BatchView>(*schema, array);  // the array moves here
}

// A view of `n` values at `p` that keeps `owner` alive.
template <class T>
py::object view(const T* p, int64_t n, py::handle owner) {
  if (!p) return py::none();
  return py::array_t<T>({n}, {sizeof(T)}, p, owner);
}

py::object validity(const uint8_t* bits, int64_t off, int64_t n) {
  if (!bits) return py::none();
  py::array_t<bool> out(n);
  bool* o = out.mutable_data();
  for (int64_t i = 0; i < n; i++) o[i] = iotx::valid_at(bits, off + i);
  return out;
}

const iotx::DictCol& dict_col(const BatchView& b, const std::string& name) {
  const iotx::DictCol* c = b.dict_column(name);
  if (!c) throw py::key_error("no dictionary column " + name);
  return *c;
}

const iotx::IntCol& int_col(const BatchView& b, const std::string& name) {
  const iotx::IntCol* c = b.int_column(name);
  if (!c) throw py::key_error("no int64 column " + name);
  return *c;
}

template <class A>
std::pair<const typename A::value_type*, size_t> span(const A& a) {
  return {a.data(), size_t(a.size())};
}

using Rows = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using Ids = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>;

void encode(iotx::PartWriter& w, const BatchView& b, Rows rows, Rows flow_rows, Ids flow_ids) {
  if (flow_rows.size() != flow_ids.size()) throw py::value_error("flow_rows and flow_ids differ");
  for (int64_t i = 0; i < rows.size(); i++)
    if (rows.data()[i] < 0 || rows.data()[i] >= b.rows) throw py::index_error("row out of range");
  py::gil_scoped_release nogil;
  w.encode(b, rows.data(), size_t(rows.size()), flow_rows.data(), flow_ids.data(),
           size_t(flow_ids.size()));
}

}  // namespace

PYBIND11_MODULE(_export, m) {
  m.doc() = "iotrace export's writers: Perfetto protobuf and Chrome JSON from event columns";

  py::class_<BatchView>(m, "Columns",
                        "The columns of one batch of events (taken over from an object with "
                        "__arrow_c_array__, e.g. iotrace_format's Batch)")
      .def(py::init(&take_batch), py::arg("batch"))
      .def_property_readonly("rows", [](const BatchView& b) { return b.rows; })
      .def(
          "ints",
          [](py::object self, const std::string& name) {
            const iotx::IntCol& c = int_col(self.cast<const BatchView&>(), name);
            return view(c.v ? c.v + c.off : nullptr, self.cast<const BatchView&>().rows, self);
          },
          "An int64 column as a numpy view (0 under nulls), or None when the batch has none")
      .def(
          "int_valid",
          [](const BatchView& b, const std::string& name) {
            const iotx::IntCol& c = int_col(b, name);
            return validity(c.v ? c.valid : nullptr, c.off, b.rows);
          },
          "Where an int64 column has a value (bool array), or None when it has no null")
      .def(
          "codes",
          [](py::object self, const std::string& name) {
            const iotx::DictCol& c = dict_col(self.cast<const BatchView&>(), name);
            return view(c.codes ? c.codes + c.off : nullptr, self.cast<const BatchView&>().rows,
                        self);
          },
          "A dictionary column's codes as a numpy view (int32), or None when the batch has none")
      .def(
          "code_valid",
          [](const BatchView& b, const std::string& name) {
            const iotx::DictCol& c = dict_col(b, name);
            return validity(c.codes ? c.valid : nullptr, c.off, b.rows);
          },
          "Where a dictionary column has a value (bool array), or None when it has no null")
      .def(
          "dictionary",
          [](const BatchView& b, const std::string& name) {
            const iotx::DictCol& c = dict_col(b, name);
            py::list out;
            for (int64_t i = 0; i < c.values(); i++) {
              std::string_view s = c.dict.at(i);
              out.append(py::reinterpret_steal<py::str>(
                  PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "surrogateescape")));
            }
            return out;
          },
          "A dictionary column's values (str)")
      .def(
          "move_times",
          [](BatchView& b, Rows at, Rows shift) {
            if (at.size() != shift.size() || !at.size())
              throw py::value_error("at and shift: as many points, one at least");
            b.move_times(at.data(), shift.data(), size_t(at.size()));
          },
          py::arg("at"), py::arg("shift"),
          "Move every event onto the job clock: t + shift(t), shift the line through the points "
          "(at, shift) (iotrace_format.clock.JobClock.points), start and end alike");

  py::class_<iotx::PartWriter>(m, "PartWriter",
                               "One input file's events, written as a piece of the output")
      .def(
          "add_names",
          [](iotx::PartWriter& w, py::dict names) {
            for (auto kv : names)
              w.add_name(std::string(py::str(kv.first)), std::string(py::str(kv.second)));
          },
          "File names (FH lines): {hash: path}")
      .def(
          "add_fh",
          [](iotx::PartWriter& w, const py::list& lines) {
            py::list rest;
            std::vector<std::pair<std::string_view, std::string_view>> pairs;
            pairs.reserve(size_t(PyList_GET_SIZE(lines.ptr())));
            for (const py::handle& h : lines) {
              std::string_view path, hash;
              if (!PyBytes_Check(h.ptr()) ||
                  !iot::fh_line(std::string_view(PyBytes_AS_STRING(h.ptr()),
                                                 size_t(PyBytes_GET_SIZE(h.ptr()))),
                                path, hash) ||
                  !iot::utf8(path) || !iot::utf8(hash)) {
                rest.append(h);
                continue;
              }
              pairs.emplace_back(hash, path);  // views of `lines`, alive until the return
            }
            w.add_names(pairs.data(), pairs.size());
            return py::make_tuple(rest, int64_t(pairs.size()));
          },
          py::arg("lines"),
          "The FH lines among metadata lines, read as the tracer writes them (fh_line.h), as "
          "add_names; returns (the other lines, the lines taken)")
      .def(
          "add_names_apart",
          [](iotx::PartWriter& w, const py::bytes& hashes, const py::bytes& offsets,
             const py::bytes& paths) {
            // the hashes' 16 hex digits (the writer's keys) made for the call
            const std::string_view h(hashes), o(offsets), d(paths);
            std::string hex(h.size() / sizeof(uint64_t) * 16, '0');
            std::vector<std::pair<std::string_view, std::string_view>> pairs;
            pairs.reserve(hex.size() / 16);
            iot::for_each_name_apart(h.data(), h.size(), o.data(), o.size(), d.data(), d.size(),
                                     [&](uint64_t x, std::string_view path) {
                                       char* t = &hex[16 * pairs.size()];
                                       iot::hex16_text(x, t);
                                       pairs.emplace_back(std::string_view(t, 16), path);
                                     });
            w.add_names(pairs.data(), pairs.size());
          },
          py::arg("hashes"), py::arg("offsets"), py::arg("paths"),
          "The file names a reader kept apart (Batch.names: hashes as uint64, the paths' "
          "offsets and bytes), as add_names")
      .def("encode", &encode, py::arg("columns"), py::arg("rows"), py::arg("flow_rows"),
           py::arg("flow_ids"),
           "Write these rows (increasing) of the batch; the slices at flow_rows start the flows "
           "flow_ids")
      .def(
          "hold",
          [](iotx::PartWriter& w, const BatchView& b, int64_t row, std::vector<uint64_t> flows) {
            if (row < 0 || row >= b.rows) throw py::index_error("row out of range");
            return w.hold(b, row, flows.data(), flows.size());
          },
          py::arg("columns"), py::arg("row"), py::arg("flows"),
          "Keep a slice back (a flow's candidate end or start); returns its slot")
      .def(
          "release",
          [](iotx::PartWriter& w, int slot, uint64_t flow_in, std::vector<uint64_t> outs) {
            w.release(slot, flow_in, outs.data(), outs.size());
          },
          py::arg("slot"), py::arg("flow_in") = 0, py::arg("outs") = std::vector<uint64_t>(),
          "Write a held slice, ending flow_in (0: none) and starting outs")
      .def(
          "thread",
          [](iotx::PartWriter& w, int64_t tid, const std::string& name) { w.thread(tid, name); },
          "Name a thread")
      .def(
          "tids", [](const iotx::PartWriter& w) { return w.tids(); },
          "The tids of the events written")
      .def("unresolved", &iotx::PartWriter::unresolved,
           "The file hashes written without a path (no FH line for them)")
      .def("close", [](iotx::PartWriter& w) {
        py::gil_scoped_release nogil;
        w.close();
      });

  py::class_<iotx::ProtoWriter, iotx::PartWriter>(m, "ProtoWriter",
                                                  "A packet sequence of TrackEvents")
      .def(py::init([](int fd, uint32_t seq, int64_t vpid, int64_t pid, uint64_t sort_index,
                       uint64_t file_index, int level, size_t batch_bytes, bool deflate_thread) {
             iotx::ProtoParams p;
             p.seq = seq, p.vpid = vpid, p.pid = pid, p.sort_index = sort_index;
             p.file_index = file_index, p.level = level, p.batch_bytes = batch_bytes;
             p.deflate_thread = deflate_thread;
             return std::make_unique<iotx::ProtoWriter>(fd, p);
           }),
           py::arg("fd"), py::arg("seq"), py::arg("vpid"), py::arg("pid"), py::arg("sort_index"),
           py::arg("file_index"), py::arg("level") = 0, py::arg("batch_bytes") = 256 << 10,
           py::arg("deflate_thread") = false,
           "deflate_thread: the packets are compressed and written by a thread of their own "
           "(once the file fills a batch), beside the writing");

  py::class_<iotx::JsonWriter, iotx::PartWriter>(m, "JsonWriter", "Chrome JSON event lines")
      .def(py::init<int, int64_t, int64_t, int>(), py::arg("fd"), py::arg("vpid"), py::arg("pid"),
           py::arg("level"))
      .def_property_readonly("crc", &iotx::JsonWriter::crc, "CRC-32 of the text written")
      .def_property_readonly("size", &iotx::JsonWriter::size, "bytes of text written");

  m.def(
      "process_descriptors",
      [](const std::vector<std::pair<int64_t, std::string>>& procs) {
        return py::bytes(iotx::process_descriptors(procs));
      },
      "The .pftrace head: a track descriptor per process ((vpid, label) each)");
  m.def(
      "note_packets",
      [](const std::vector<std::pair<std::string, int64_t>>& notes, uint32_t seq) {
        return py::bytes(iotx::note_packets(notes, seq));
      },
      "The export's notes ((text, ts in ns) each) as instants on a track of their own");
  m.def(
      "crc32_combine",
      [](uint32_t crc1, uint32_t crc2, int64_t len2) {
        return uint32_t(crc32_combine(crc1, crc2, z_off_t(len2)));
      },
      "CRC-32 of A + B from crc(A), crc(B) and len(B) (zlib's)");
  m.def(
      "fast_zlib",
      [](py::bytes data) {
        std::string_view in = data;
        iotx::FastDeflate z;
        std::string_view out = z.compress(in.data(), in.size());
        return py::bytes(out.data(), out.size());
      },
      "The zlib stream compressed_packets hold (FastDeflate), of any bytes: for tests");
  m.def(
      "first_free_lanes",
      [](py::array_t<int64_t, py::array::c_style | py::array::forcecast> start,
         py::array_t<int64_t, py::array::c_style | py::array::forcecast> end,
         std::vector<int64_t> ends) {
        // Runs in order of start each take the lowest lane free at their start (a lane is free
        // once its last run has ended); `ends` are the lanes' last ends from earlier batches.
        // Two heaps: O(n log lanes), where scanning the lanes per run cost O(n * lanes).
        const int64_t n = start.size();
        const int64_t* s = start.data();
        const int64_t* e = end.data();
        py::array_t<int64_t> lanes(n);
        int64_t* out = lanes.mutable_data();
        using Busy = std::pair<int64_t, int64_t>;  // (end, lane)
        std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
        std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> free_lanes;
        for (size_t k = 0; k < ends.size(); ++k) busy.push({ends[k], int64_t(k)});
        for (int64_t i = 0; i < n; ++i) {
          while (!busy.empty() && busy.top().first <= s[i]) {
            free_lanes.push(busy.top().second);
            busy.pop();
          }
          int64_t lane;
          if (free_lanes.empty()) {
            lane = int64_t(ends.size());
            ends.push_back(0);
          } else {
            lane = free_lanes.top();
            free_lanes.pop();
          }
          ends[lane] = e[i];
          busy.push({e[i], lane});
          out[i] = lane;
        }
        return py::make_tuple(lanes, ends);
      },
      py::arg("start"), py::arg("end"), py::arg("ends"),
      "(lanes, ends): the lowest lane free at each start (runs sorted by start), and the lanes' "
      "last ends after them");
  m.def(
      "merged_args",
      [](py::array_t<int64_t, py::array::c_style | py::array::forcecast> count,
         py::array_t<int64_t, py::array::c_style | py::array::forcecast> key,
         py::array_t<int64_t, py::array::c_style | py::array::forcecast> name_of_key,
         py::array_t<int64_t, py::array::c_style | py::array::forcecast> nbytes,
         py::array_t<int64_t, py::array::c_style | py::array::forcecast> dur,
         const std::vector<std::string>& calls, const std::vector<bool>& with_bytes,
         const std::vector<std::optional<std::string>>& fhashes) {
        // The merged slices' args objects, as budget.py's Merger writes them: {"merged":N,
        // "call":"pread"[,"bytes":B],"time_us":U[,"fhash":"..."]}, time_us the summed ns as
        // Python prints ns / 1000 (whole µs, a point, the ns without trailing zeros). As an
        // Arrow utf8 array's buffers: (offsets, data).
        const int64_t n = count.size();
        const int64_t *c = count.data(), *k = key.data(), *nk = name_of_key.data();
        const int64_t *b = nbytes.data(), *d = dur.data();
        const int64_t n_keys = name_of_key.size(), n_calls = int64_t(calls.size());
        py::array_t<int32_t> offsets(n + 1);
        int32_t* off = offsets.mutable_data();
        std::string out;
        out.reserve(size_t(n) * 96);
        char num[24];
        auto put_int = [&](int64_t v) {  // (to_chars: with snprintf this took 3.5 times as long)
          out.append(num, size_t(std::to_chars(num, num + sizeof num, v).ptr - num));
        };
        off[0] = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (k[i] < 0 || k[i] >= n_keys || nk[k[i]] < 0 || nk[k[i]] >= n_calls)
            throw std::out_of_range("merged_args: a key or call out of range");
          const int64_t call = nk[k[i]];
          out += "{\"merged\":";
          put_int(c[i]);
          out += ",\"call\":\"";
          out += calls[size_t(call)];
          out += '"';
          if (with_bytes[size_t(call)]) {
            out += ",\"bytes\":";
            put_int(b[i]);
          }
          out += ",\"time_us\":";
          int64_t q = d[i] / 1000, r = d[i] % 1000;
          if (r < 0) q -= 1, r += 1000;  // floor, as numpy's // and %
          put_int(q);
          out += '.';
          char frac[4] = {char('0' + r / 100), char('0' + r / 10 % 10), char('0' + r % 10), 0};
          int len = 3;
          while (len > 1 && frac[len - 1] == '0') len--;
          out.append(frac, size_t(len));
          const std::optional<std::string>& fh = fhashes[size_t(k[i])];
          if (fh) {
            out += ",\"fhash\":\"";
            out += *fh;
            out += '"';
          }
          out += '}';
          if (out.size() > size_t(INT32_MAX))
            throw std::length_error("merged_args: over 2 GiB of args");
          off[i + 1] = int32_t(out.size());
        }
        return py::make_tuple(offsets, py::bytes(out));
      },
      py::arg("count"), py::arg("key"), py::arg("name_of_key"), py::arg("nbytes"), py::arg("dur"),
      py::arg("calls"), py::arg("with_bytes"), py::arg("fhashes"),
      "(offsets, data): the utf8 args objects of merged slices (export/budget.py)");
  py::class_<LongestSince>(m, "LongestSince",
                           "One thread's calls, batch after batch: the longest slice since each "
                           "call's previous call of its key (export/budget.py)")
      .def(py::init<int16_t>(), py::arg("never"))
      .def("__call__", &LongestSince::operator(), py::arg("d"), py::arg("keys"),
           "For each call (its dur_index and key id): the longest dur_index since the previous "
           "call of its key, that one included; `never` for a key's first call");
  m.attr("MAX_INTERNED_STRING") = iotx::kMaxInternedString;
}
