// iotrace_format._native: the trace format's read side in C++. Compact blocks rendered to
// their JSON lines, or decoded straight into columns; JSON event lines (iotrace's JSON form,
// DFTracer 1.x and 2.x) scanned into the same columns. Columns reach Python as Arrow arrays
// through the Arrow PyCapsule interface (`pyarrow.record_batch(batch)`), without a copy.
#include <pybind11/pybind11.h>
#include <stdlib.h>
#include <zstd.h>

#include <memory>
#include <string>

#include "arrow_c.h"
#include "columns.h"
#include "compact.h"
#include "decode.h"
#include "json_scan.h"
#include "record.h"
#include "recover.h"

namespace py = pybind11;

namespace {

// One block's decoded events; handed to Arrow once (its memory moves to the Arrow arrays).
struct Batch {
  iot::EventColumns cols;
  bool exported = false;
};

template <class T>
void free_capsule(PyObject* cap, const char* name) {
  auto* p = static_cast<T*>(PyCapsule_GetPointer(cap, name));
  if (!p) return;
  if (p->release) p->release(p);
  delete p;
}

py::tuple arrow_c_array(Batch& b, py::object /*requested_schema*/) {
  if (b.exported) throw py::value_error("this batch was already handed to Arrow");
  auto* schema = new ArrowSchema();
  auto* array = new ArrowArray();
  iot::export_columns(std::move(b.cols), schema, array);
  b.exported = true;
  py::object s = py::reinterpret_steal<py::object>(PyCapsule_New(
      schema, "arrow_schema", [](PyObject* c) { free_capsule<ArrowSchema>(c, "arrow_schema"); }));
  py::object a = py::reinterpret_steal<py::object>(PyCapsule_New(
      array, "arrow_array", [](PyObject* c) { free_capsule<ArrowArray>(c, "arrow_array"); }));
  return py::make_tuple(s, a);
}

py::buffer_info bytes_of(const py::buffer& data) { return data.request(); }

// One zstd frame's content, decompressed without the GIL (python-zstandard's decompressobj
// holds it: the reader thread's decompression stopped the writer or the summarizing thread
// beside it). A cut frame gives what its whole blocks hold, as a stream decoder does; a
// damaged one its error and nothing.
py::tuple inflate_frame(py::buffer data) {
  py::buffer_info info = bytes_of(data);
  const size_t n = size_t(info.size * info.itemsize);
  char* out = nullptr;
  size_t len = 0;
  const char* err = nullptr;
  {
    py::gil_scoped_release nogil;
    // a context per thread, kept (making one per frame cost 3 us of a short process's 10)
    thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> kept(nullptr, ZSTD_freeDCtx);
    if (!kept) kept.reset(ZSTD_createDCtx());
    ZSTD_DCtx* dctx = kept.get();
    if (dctx) ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    ZSTD_inBuffer in{info.ptr, n, 0};
    size_t cap = n * 8 > (1u << 14) ? n * 8 : (1u << 14);  // a trace's frames: 5-8x
    out = static_cast<char*>(malloc(cap));
    if (!dctx || !out) err = "out of memory";
    while (!err) {
      ZSTD_outBuffer o{out, cap, len};
      const size_t r = ZSTD_decompressStream(dctx, &o, &in);
      const bool more = o.pos > len;
      len = o.pos;
      if (ZSTD_isError(r)) {
        err = ZSTD_getErrorName(r);
        break;
      }
      if (r == 0) break;  // the frame's end
      // cut: the input used up and a call that gave nothing more (a last call after some
      // output can still find the frame damaged, as python-zstandard's loop does)
      if (in.pos == in.size && !more) break;
      if (o.pos == cap) {
        char* bigger = static_cast<char*>(realloc(out, cap * 2));
        if (!bigger) {
          err = "out of memory";
          break;
        }
        out = bigger, cap *= 2;
      }
    }
  }
  py::object text = err ? py::bytes() : py::bytes(out ? out : "", len);
  free(out);
  return py::make_tuple(text,
                        err ? py::object(py::str(std::string("zstd decompressor error: ") + err))
                            : py::object(py::none()));
}

py::dict live_dict(const iot::RecoverResult& r) {
  py::dict d;
  d["pid"] = r.pid;
  d["host"] = std::string(r.host);
  d["ended"] = r.ended;
  d["closed"] = r.closed;
  d["end_reason"] = std::string(r.end_reason);
  d["events"] = r.events;
  d["dropped"] = r.dropped;
  d["trace_path"] = std::string(r.trace_path);
  return d;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() =
      "iotrace's trace format, read side: compact blocks rendered or decoded to columns, "
      "JSON event lines scanned to columns";
  py::class_<Batch>(m, "Batch",
                    "The events of one block as columns (Arrow: pyarrow.record_batch(b)), "
                    "and what is not an event")
      .def_property_readonly("rows", [](const Batch& b) { return b.cols.rows; })
      .def_property_readonly("meta",
                             [](const Batch& b) {
                               // the metadata lines (ph M), as text: few per block
                               py::list out;
                               const std::string& t = b.cols.meta;
                               for (size_t s = 0; s < t.size();) {
                                 size_t e = t.find('\n', s);
                                 out.append(py::bytes(t.data() + s, e - s));
                                 s = e + 1;
                               }
                               return out;
                             })
      .def_property_readonly("names",
                             [](const Batch& b) -> py::object {
                               // the file-name lines kept apart (names_apart): (hashes as uint64,
                               // the paths' int64 offsets, the paths' bytes), each as bytes; None
                               // when they were not asked for
                               const iot::EventColumns& c = b.cols;
                               if (!c.names_apart) return py::none();
                               auto raw = [](const void* p, size_t n) {
                                 return py::bytes(static_cast<const char*>(p), n);
                               };
                               return py::make_tuple(
                                   raw(c.name_hash.data(), c.name_hash.size() * sizeof(uint64_t)),
                                   raw(c.name_offs.data(), c.name_offs.size() * sizeof(int64_t)),
                                   raw(c.name_bytes.data(), c.name_bytes.size()));
                             })
      .def_property_readonly("name_count", [](const Batch& b) { return b.cols.name_hash.size(); })
      .def_property_readonly("bad_lines", [](const Batch& b) { return b.cols.bad_lines; })
      .def_property_readonly("bad_examples",
                             [](const Batch& b) {
                               py::list out;
                               for (const std::string& e : b.cols.bad_examples)
                                 out.append(py::bytes(e));
                               return out;
                             })
      .def_property_readonly("damaged", [](const Batch& b) { return b.cols.damaged; })
      .def("__arrow_c_array__", &arrow_c_array, py::arg("requested_schema") = py::none());

  m.attr("COLUMNS") = [] {
    py::list names;
    for (const char* c : iot::kEventColumns) names.append(c);
    return py::tuple(names);
  }();
  m.def(
      "calls",
      [] {
        py::list out;
        for (int n = 0; n < iot::C_COUNT; n++)
          if (iot::kCalls.name[n])
            out.append(
                py::make_tuple(n, iot::kCalls.name[n], iot::kCalls.cat[n], iot::kCalls.family[n]));
        return out;
      },
      "(number, name, category, family) of every call the tracer records (csrc/format/calls.def)");
  m.def(
      "compact_to_json",
      [](py::buffer data) -> py::object {
        py::buffer_info info = bytes_of(data);
        const char* p = static_cast<const char*>(info.ptr);
        size_t n = size_t(info.size * info.itemsize);
        if (!iot::compact_is(p, n)) return py::none();
        iot::Out out;
        bool ok;
        {
          py::gil_scoped_release nogil;
          out.reserve(n * 8);
          ok = iot::compact_render(p, n, out);
        }
        py::bytes text(out.p ? out.p : "", out.n);
        out.release();
        return py::make_tuple(text, !ok);
      },
      "One compact frame's content -> (its JSON lines, damaged); None when it is not a compact "
      "frame");
  m.def("inflate_frame", &inflate_frame, py::arg("data"),
        "One zstd frame -> (its content, None), or (b'', the error) for a damaged frame; a cut "
        "frame gives the content of its whole blocks");
  m.def(
      "decode_compact",
      [](py::buffer data, bool names_apart) {
        py::buffer_info info = bytes_of(data);
        auto b = std::make_unique<Batch>();
        b->cols.names_apart = names_apart;
        {
          py::gil_scoped_release nogil;
          iot::decode_compact(static_cast<const char*>(info.ptr), size_t(info.size * info.itemsize),
                              b->cols);
        }
        return b;
      },
      py::arg("data"), py::arg("names_apart") = false,
      "One compact frame's content -> Batch (damaged: read up to the damage); names_apart: the "
      "file-name lines as the tracer writes them in Batch.names, not in Batch.meta");
  m.def(
      "scan_json",
      [](py::buffer data, bool names_apart) {
        py::buffer_info info = bytes_of(data);
        auto b = std::make_unique<Batch>();
        b->cols.names_apart = names_apart;
        {
          py::gil_scoped_release nogil;
          iot::scan_lines(static_cast<const char*>(info.ptr), size_t(info.size * info.itemsize),
                          b->cols);
        }
        return b;
      },
      py::arg("data"), py::arg("names_apart") = false,
      "JSON event lines (whole lines) -> Batch (names_apart: as decode_compact's)");
  m.def(
      "live_inspect",
      [](const std::string& path) {
        iot::RecoverResult r;
        if (!iot::live_inspect(path.c_str(), &r)) throw py::value_error(path + ": " + r.why);
        return live_dict(r);
      },
      "What a live file (a process's record buffers, docs/trace-format.md) says of its process");
  m.def(
      "live_owner_alive",
      [](const std::string& path) {
        py::gil_scoped_release nogil;
        return iot::live_owner_alive(path.c_str());
      },
      "Is the process writing this live file running on this host?");
  m.def(
      "live_finish",
      [](const std::string& path, py::object reason) {
        iot::RecoverResult r;
        std::string why = reason.is_none() ? std::string() : py::str(reason).cast<std::string>();
        bool ok;
        {
          py::gil_scoped_release nogil;
          ok = iot::live_finish(path.c_str(), why.empty() ? nullptr : why.c_str(), &r);
        }
        if (!ok) {
          errno = r.error;
          throw py::value_error(path + ": " + r.why);
        }
        return live_dict(r);
      },
      py::arg("path"), py::arg("reason") = py::none(),
      "Finish a trace from its live file: the records not in the trace file yet become its "
      "frames, then the end marker; the live file goes. Its process must be gone.");
}
