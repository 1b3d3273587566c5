// pybind11 module over the C API of the in-process core (csrc/iotrace.h). Under LD_PRELOAD the
// dynamic loader resolves libiotrace.so to the preloaded copy, so Python and POSIX events
// share one core, one writer and one file.
#include <dlfcn.h>
#include <pybind11/pybind11.h>

#include <string>

#include "iotrace.h"

namespace py = pybind11;

static std::string library_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&iotrace_init), &info) && info.dli_fname) return info.dli_fname;
  return "";
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "iotrace in-process core";
  m.attr("FORMAT_VERSION") = IOTRACE_FORMAT_VERSION;
  m.def("init", [](const std::string& dir, const std::string& name) {
        return iotrace_init(dir.empty() ? nullptr : dir.c_str(), name.empty() ? nullptr : name.c_str()) == 0;
      }, py::arg("dir") = "", py::arg("name") = "");
  m.def("active", [] { return iotrace_active() != 0; });
  m.def("interposing", [] { return iotrace_interposing() != 0; });
  m.def("now_ns", &iotrace_now_ns);
  m.def("flush", [] {
    py::gil_scoped_release nogil;
    iotrace_flush();
  });
  m.def("finalize", [] {
    py::gil_scoped_release nogil;
    iotrace_finalize();
  });
  m.def("trace_path", [] { return std::string(iotrace_trace_path()); });
  m.def("library_path", &library_path);
  m.def("stats", [] {
    uint64_t r, w, d;
    iotrace_stats(&r, &w, &d);
    py::dict s;
    s["recorded"] = r;
    s["written"] = w;
    s["dropped"] = d;
    return s;
  });
  m.def("set_process_info", [](const std::string& role, int64_t parent_pid) {
    iotrace_set_process_info(role.c_str(), parent_pid);
  });
  m.def("thread_name", [](const std::string& name) { iotrace_thread_name(name.data(), uint32_t(name.size())); });
  m.def("complete", [](const std::string& name, const std::string& cat, int64_t start_ns, int64_t dur_ns,
                       const std::string& args_json) {
    iotrace_complete(iotrace_intern(name.data(), uint32_t(name.size())),
                     iotrace_intern(cat.data(), uint32_t(cat.size())), start_ns, dur_ns,
                     args_json.data(), uint32_t(args_json.size()));
  }, py::arg("name"), py::arg("cat"), py::arg("start_ns"), py::arg("dur_ns"), py::arg("args_json") = "");
}
