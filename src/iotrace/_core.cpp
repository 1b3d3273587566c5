// pybind11 module over the C API of the in-process core (csrc/iotrace.h). Under LD_PRELOAD the
// dynamic loader resolves libiotrace.so to the preloaded copy, so Python and POSIX events
// share one core, one writer and one file.
//
// The hot objects are plain CPython types with vectorcall (a pybind11 call costs more than the
// whole budget of a traced call): TracedFunction (what @trace returns) and TracedIter (each
// item of a generator or iterator is one event).
#include <Python.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <string>
#include <unordered_map>

#include "iotrace.h"
#include "json_escape.h"

namespace py = pybind11;

namespace {

// --- categories: switched on and off at run time; the hot path reads one flag ---------------

struct Category {
  bool on = true;
  iotrace_str_t name;
};
std::unordered_map<std::string, Category*>& categories() {
  static auto* m = new std::unordered_map<std::string, Category*>();
  return *m;
}
bool g_default_on = true;  // for categories not named yet (IOTRACE_CATEGORIES sets it false)

Category* category(const std::string& name) {
  auto& m = categories();
  auto it = m.find(name);
  if (it != m.end()) return it->second;
  auto* c = new Category();
  c->on = g_default_on;
  c->name = iotrace_intern(name.data(), uint32_t(name.size()));
  m.emplace(name, c);
  return c;
}

// --- args → JSON object body, into a fixed stack buffer (no allocation for common types) ---

struct ArgBuf {
  char p[1024];
  uint32_t n = 0;
  bool room(size_t k) const { return n + k < sizeof p; }
  void raw(const char* s, size_t k) {
    if (room(k)) {
      memcpy(p + n, s, k);
      n += uint32_t(k);
    }
  }
  void str(const char* s, Py_ssize_t k) {
    if (k < 0 || n + 8 >= sizeof p) return;
    if (!room(iot::json_quoted_max(size_t(k))))
      k = Py_ssize_t((sizeof p - n - 8) / 6);  // cut to fit
    n += uint32_t(iot::json_quote(p + n, s, size_t(k)));
  }
  void key(const char* k, Py_ssize_t len) {
    if (n) raw(",", 1);
    str(k, len);
    raw(":", 1);
  }
  // A Python value as JSON: numbers and strings as they are, the rest as a short repr.
  void value(PyObject* v) {
    char tmp[64];
    if (v == Py_None) return raw("null", 4);
    if (v == Py_True) return raw("true", 4);
    if (v == Py_False) return raw("false", 5);
    if (PyLong_CheckExact(v)) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (!overflow) return raw(tmp, size_t(snprintf(tmp, sizeof tmp, "%lld", x)));
    } else if (PyFloat_CheckExact(v)) {
      double d = PyFloat_AS_DOUBLE(v);
      if (d == d && d - d == 0) return raw(tmp, size_t(snprintf(tmp, sizeof tmp, "%.17g", d)));
      return raw("null", 4);
    } else if (PyUnicode_Check(v)) {
      Py_ssize_t len;
      const char* s = PyUnicode_AsUTF8AndSize(v, &len);
      if (s) return str(s, len);
      PyErr_Clear();
    }
    PyObject* r = PyObject_Repr(v);
    if (!r) {
      PyErr_Clear();
      return raw("null", 4);
    }
    Py_ssize_t len;
    const char* s = PyUnicode_AsUTF8AndSize(r, &len);
    if (s)
      str(s, len < 200 ? len : 200);
    else
      PyErr_Clear();
    Py_DECREF(r);
  }
  void kv(PyObject* k, PyObject* v) {
    Py_ssize_t len;
    const char* s = PyUnicode_Check(k) ? PyUnicode_AsUTF8AndSize(k, &len) : nullptr;
    if (!s) {
      PyErr_Clear();
      return;
    }
    key(s, len);
    value(v);
  }
  void dict(PyObject* d) {
    if (!d || !PyDict_Check(d)) return;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) kv(k, v);
  }
  // The exception being raised, without disturbing it.
  void exception() {
    PyObject* t = PyErr_Occurred();
    if (!t) return;
    const char* name = reinterpret_cast<PyTypeObject*>(t)->tp_name;
    const char* dot = strrchr(name, '.');
    key("exception", 9);
    str(dot ? dot + 1 : name, Py_ssize_t(strlen(dot ? dot + 1 : name)));
  }
};

// --- asyncio tasks: the track (virtual tid) of the running task --------------------------------
// The coroutine wrapper (decorators.py) keeps the task's tid in a ContextVar; asyncio runs each
// step of a task in the task's context, so reading it tells which task a call belongs to.
// Programs that never run a traced coroutine never pay for the lookup.
PyObject* g_task_var = nullptr;

inline int32_t current_tid() {
  if (!g_task_var) return 0;
  PyObject* v = nullptr;
  if (PyContextVar_Get(g_task_var, nullptr, &v) < 0) {
    PyErr_Clear();
    return 0;
  }
  if (!v) return 0;
  long tid = PyLong_Check(v) ? PyLong_AsLong(v) : 0;
  Py_DECREF(v);
  return int32_t(tid);
}

// --- TracedFunction ---------------------------------------------------------------------------

struct TracedFunction {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* func;
  PyObject* argspec;  // tuple of (position, name) or NULL: which arguments to record
  PyObject* dict;
  iotrace_str_t name;
  Category* cat;
};

// Record the chosen call arguments: by position, else by keyword.
void capture_args(ArgBuf& b, PyObject* spec, PyObject* const* args, size_t nargs,
                  PyObject* kwnames) {
  Py_ssize_t n = PyTuple_GET_SIZE(spec);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PyTuple_GET_ITEM(spec, i);
    Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
    PyObject* name = PyTuple_GET_ITEM(item, 1);
    PyObject* v = nullptr;
    if (pos >= 0 && size_t(pos) < nargs) {
      v = args[pos];
    } else if (kwnames) {
      Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
      for (Py_ssize_t k = 0; k < nk; k++)
        if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, k), name) == 0) {
          v = args[nargs + size_t(k)];
          break;
        }
    }
    if (v) b.kv(name, v);
  }
  PyErr_Clear();
}

PyObject* tf_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* t = reinterpret_cast<TracedFunction*>(self);
  if (!t->cat->on || !iotrace_active()) return PyObject_Vectorcall(t->func, args, nargsf, kwnames);
  int64_t t0 = iotrace_now();
  PyObject* r = PyObject_Vectorcall(t->func, args, nargsf, kwnames);
  int64_t t1 = iotrace_now();
  int32_t tid = current_tid();
  if (!t->argspec && r) {
    iotrace_complete_on(tid, t->name, t->cat->name, t0, t1 - t0, nullptr, 0);
    return r;
  }
  ArgBuf b;
  if (t->argspec) {
    PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
    if (!r) PyErr_Fetch(&et, &ev, &tb);
    capture_args(b, t->argspec, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (!r) PyErr_Restore(et, ev, tb);
  }
  if (!r) b.exception();
  iotrace_complete_on(tid, t->name, t->cat->name, t0, t1 - t0, b.p, b.n);
  return r;
}

PyObject* tf_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"func", "name", "cat", "argspec", nullptr};
  PyObject *func, *argspec = Py_None;
  const char *name, *cat;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss|O", const_cast<char**>(kwlist), &func, &name,
                                   &cat, &argspec))
    return nullptr;
  auto* t = reinterpret_cast<TracedFunction*>(type->tp_alloc(type, 0));
  if (!t) return nullptr;
  t->vectorcall = tf_vectorcall;
  Py_INCREF(func);
  t->func = func;
  if (argspec != Py_None && PyTuple_Check(argspec) && PyTuple_GET_SIZE(argspec) > 0) {
    Py_INCREF(argspec);
    t->argspec = argspec;
  }
  t->name = iotrace_intern(name, uint32_t(strlen(name)));
  t->cat = category(cat);
  return reinterpret_cast<PyObject*>(t);
}

int tf_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* t = reinterpret_cast<TracedFunction*>(self);
  Py_VISIT(t->func);
  Py_VISIT(t->argspec);
  Py_VISIT(t->dict);
  return 0;
}
int tf_clear(PyObject* self) {
  auto* t = reinterpret_cast<TracedFunction*>(self);
  Py_CLEAR(t->func);
  Py_CLEAR(t->argspec);
  Py_CLEAR(t->dict);
  return 0;
}
void tf_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  tf_clear(self);
  Py_TYPE(self)->tp_free(self);
}
// Methods: bind like a function does.
PyObject* tf_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}
// Pickled by reference (multiprocessing spawn): the qualified name, looked up in __module__.
PyObject* tf_reduce(PyObject* self, PyObject*) {
  return PyObject_GetAttrString(self, "__qualname__");
}
PyObject* tf_get_func(PyObject* self, void*) {
  PyObject* f = reinterpret_cast<TracedFunction*>(self)->func;
  Py_INCREF(f);
  return f;
}

PyMethodDef tf_methods[] = {{"__reduce__", tf_reduce, METH_NOARGS, nullptr}, {nullptr}};
PyGetSetDef tf_getset[] = {
    {"__func__", tf_get_func, nullptr, "the traced function", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr}};

PyTypeObject TracedFunctionType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- TracedIter: one event per item (the time waiting for it) ----------------------------------

struct TracedIter {
  PyObject_HEAD PyObject* it;
  PyObject* fixed;  // bytes: JSON body of the arguments every item event carries, or NULL
  iotrace_str_t name;
  Category* cat;
  long long index;
};

PyObject* ti_record(TracedIter* t, int64_t t0, PyObject* item) {
  int64_t t1 = iotrace_now();
  if (!item && (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_StopIteration)))
    return item;  // the end is not an item
  ArgBuf b;
  char tmp[32];
  if (t->fixed) b.raw(PyBytes_AS_STRING(t->fixed), size_t(PyBytes_GET_SIZE(t->fixed)));
  b.key("index", 5);
  b.raw(tmp, size_t(snprintf(tmp, sizeof tmp, "%lld", t->index++)));
  if (!item) b.exception();
  iotrace_complete_on(current_tid(), t->name, t->cat->name, t0, t1 - t0, b.p, b.n);
  return item;
}

PyObject* ti_next(PyObject* self) {
  auto* t = reinterpret_cast<TracedIter*>(self);
  iternextfunc next = Py_TYPE(t->it)->tp_iternext;
  if (!next) {
    PyErr_SetString(PyExc_TypeError, "iotrace.iter: object is not an iterator");
    return nullptr;
  }
  if (!t->cat->on || !iotrace_active()) return next(t->it);
  int64_t t0 = iotrace_now();  // before the wait: argument order is unspecified in C++
  PyObject* item = next(t->it);
  return ti_record(t, t0, item);
}

// Generator protocol: send/throw/close pass through (send and throw are steps too).
PyObject* ti_send(PyObject* self, PyObject* value) {
  auto* t = reinterpret_cast<TracedIter*>(self);
  bool on = t->cat->on && iotrace_active();
  int64_t t0 = on ? iotrace_now() : 0;
  PyObject* r = PyObject_CallMethod(t->it, "send", "O", value);
  return on ? ti_record(t, t0, r) : r;
}
PyObject* ti_throw(PyObject* self, PyObject* args) {
  auto* t = reinterpret_cast<TracedIter*>(self);
  PyObject* m = PyObject_GetAttrString(t->it, "throw");
  if (!m) return nullptr;
  bool on = t->cat->on && iotrace_active();
  int64_t t0 = on ? iotrace_now() : 0;
  PyObject* r = PyObject_Call(m, args, nullptr);
  Py_DECREF(m);
  return on ? ti_record(t, t0, r) : r;
}
PyObject* ti_close(PyObject* self, PyObject*) {
  auto* t = reinterpret_cast<TracedIter*>(self);
  if (!PyObject_HasAttrString(t->it, "close")) Py_RETURN_NONE;
  return PyObject_CallMethod(t->it, "close", nullptr);
}
PyObject* ti_self(PyObject* self) {
  Py_INCREF(self);
  return self;
}
PyObject* ti_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"iterable", "name", "cat", "args", nullptr};
  PyObject *src, *fixed = Py_None;
  const char *name, *cat;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss|O", const_cast<char**>(kwlist), &src, &name, &cat,
                                   &fixed))
    return nullptr;
  PyObject* it = PyObject_GetIter(src);
  if (!it) return nullptr;
  auto* t = reinterpret_cast<TracedIter*>(type->tp_alloc(type, 0));
  if (!t) {
    Py_DECREF(it);
    return nullptr;
  }
  t->it = it;
  t->fixed = nullptr;
  if (fixed != Py_None && PyDict_Check(fixed) && PyDict_Size(fixed) > 0) {
    ArgBuf b;
    b.dict(fixed);
    t->fixed = PyBytes_FromStringAndSize(b.p, b.n);
  }
  t->name = iotrace_intern(name, uint32_t(strlen(name)));
  t->cat = category(cat);
  t->index = 0;
  return reinterpret_cast<PyObject*>(t);
}
int ti_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<TracedIter*>(self)->it);
  return 0;
}
int ti_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<TracedIter*>(self)->it);
  Py_CLEAR(reinterpret_cast<TracedIter*>(self)->fixed);
  return 0;
}
void ti_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  ti_clear(self);
  Py_TYPE(self)->tp_free(self);
}
PyObject* ti_len(PyObject* self, PyObject*) {
  Py_ssize_t n = PyObject_LengthHint(reinterpret_cast<TracedIter*>(self)->it, -1);
  if (n < 0) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NOTIMPLEMENTED;
  }
  return PyLong_FromSsize_t(n);
}
PyMethodDef ti_methods[] = {{"send", ti_send, METH_O, nullptr},
                            {"throw", ti_throw, METH_VARARGS, nullptr},
                            {"close", ti_close, METH_NOARGS, nullptr},
                            {"__length_hint__", ti_len, METH_NOARGS, nullptr},
                            {nullptr}};
PyTypeObject TracedIterType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- Event: one kind of complete event, recorded from Python at the cost of a call ------------
// `ev = Event(name, cat)` once; then `ev(start)` or `ev(start, "key", value, ...)` records the
// span from `start` (now()) to this call. For hooks that fire per batch or per sample
// (iotrace.auto): no name lookup, no argument parsing, no dict.

struct Event {
  PyObject_HEAD vectorcallfunc vectorcall;
  iotrace_str_t name;
  Category* cat;
};

PyObject* ev_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  int64_t t1 = iotrace_now();
  auto* e = reinterpret_cast<Event*>(self);
  size_t n = PyVectorcall_NARGS(nargsf);
  if (n < 1 || !(n & 1) || kwnames) {
    PyErr_SetString(PyExc_TypeError, "Event(start, key, value, ...): a start and key/value pairs");
    return nullptr;
  }
  if (!e->cat->on || !iotrace_active()) Py_RETURN_NONE;
  int64_t t0 = PyLong_AsLongLong(args[0]);
  if (t0 == -1 && PyErr_Occurred()) return nullptr;
  ArgBuf b;
  for (size_t i = 1; i + 1 < n; i += 2) b.kv(args[i], args[i + 1]);
  iotrace_complete_on(0, e->name, e->cat->name, t0, t1 - t0, b.n ? b.p : nullptr, b.n);
  Py_RETURN_NONE;
}

PyObject* ev_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  static const char* kwlist[] = {"name", "cat", nullptr};
  const char *name, *cat;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss", const_cast<char**>(kwlist), &name, &cat))
    return nullptr;
  auto* e = reinterpret_cast<Event*>(type->tp_alloc(type, 0));
  if (!e) return nullptr;
  e->vectorcall = ev_vectorcall;
  e->name = iotrace_intern(name, uint32_t(strlen(name)));
  e->cat = category(cat);
  return reinterpret_cast<PyObject*>(e);
}
PyTypeObject EventType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// now() without pybind11's argument machinery: hooks call it twice per event.
PyObject* fast_now(PyObject*, PyObject*) { return PyLong_FromLongLong(iotrace_now()); }
PyMethodDef g_fast_defs[] = {
    {"now", fast_now, METH_NOARGS, "The core clock: starts and durations for complete()."},
    {nullptr, nullptr, 0, nullptr}};

void ready_types(py::module_& m) {
  PyTypeObject& f = TracedFunctionType;
  f.tp_name = "iotrace._core.TracedFunction";
  f.tp_basicsize = sizeof(TracedFunction);
  f.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
               Py_TPFLAGS_METHOD_DESCRIPTOR;
  f.tp_vectorcall_offset = offsetof(TracedFunction, vectorcall);
  f.tp_call = PyVectorcall_Call;
  f.tp_new = tf_new;
  f.tp_dealloc = tf_dealloc;
  f.tp_traverse = tf_traverse;
  f.tp_clear = tf_clear;
  f.tp_descr_get = tf_get;
  f.tp_dictoffset = offsetof(TracedFunction, dict);
  f.tp_methods = tf_methods;
  f.tp_getset = tf_getset;
  f.tp_doc = "A function traced by @iotrace.trace: one complete event per call.";
  PyTypeObject& i = TracedIterType;
  i.tp_name = "iotrace._core.TracedIter";
  i.tp_basicsize = sizeof(TracedIter);
  i.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  i.tp_new = ti_new;
  i.tp_dealloc = ti_dealloc;
  i.tp_traverse = ti_traverse;
  i.tp_clear = ti_clear;
  i.tp_iter = ti_self;
  i.tp_iternext = ti_next;
  i.tp_methods = ti_methods;
  i.tp_doc = "An iterator traced by iotrace: one complete event per item.";
  PyTypeObject& e = EventType;
  e.tp_name = "iotrace._core.Event";
  e.tp_basicsize = sizeof(Event);
  e.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  e.tp_vectorcall_offset = offsetof(Event, vectorcall);
  e.tp_call = PyVectorcall_Call;
  e.tp_new = ev_new;
  e.tp_doc = "Event(name, cat)(start, key, value, ...): a complete event from start to now.";
  if (PyType_Ready(&f) < 0 || PyType_Ready(&i) < 0 || PyType_Ready(&e) < 0)
    throw py::error_already_set();
  Py_INCREF(&f);
  Py_INCREF(&i);
  Py_INCREF(&e);
  m.add_object("Event", reinterpret_cast<PyObject*>(&e));
  m.add_object("TracedFunction", reinterpret_cast<PyObject*>(&f));
  m.add_object("TracedIter", reinterpret_cast<PyObject*>(&i));
}

std::string args_json(py::handle d) {
  ArgBuf b;
  b.dict(d.ptr());
  return std::string(b.p, b.n);
}

std::string library_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&iotrace_init), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}
}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "iotrace in-process core";
  ready_types(m);
  m.attr("FORMAT_VERSION") = IOTRACE_FORMAT_VERSION;
  m.def(
      "init",
      [](const std::string& dir, const std::string& name) {
        return iotrace_init(dir.empty() ? nullptr : dir.c_str(),
                            name.empty() ? nullptr : name.c_str()) == 0;
      },
      py::arg("dir") = "", py::arg("name") = "");
  m.def("active", [] { return iotrace_active() != 0; });
  m.def("interposing", [] { return iotrace_interposing() != 0; });
  m.def("pause", [](bool paused) { iotrace_pause(paused ? 1 : 0); });
  // fn(*args) with this thread's intercepted calls unrecorded (the tracer's own stat or tell).
  m.def("untraced", [](py::function fn, py::args args) {
    iotrace_untraced_begin();
    struct End {
      ~End() { iotrace_untraced_end(); }
    } end;
    return fn(*args);
  });
  if (PyModule_AddFunctions(m.ptr(), g_fast_defs) < 0) throw py::error_already_set();  // now()
  m.def("now_ns", &iotrace_now_ns);  // CLOCK_MONOTONIC ns, the clock of the trace files
  m.def("flush", [] {
    py::gil_scoped_release nogil;
    iotrace_flush();
  });
  m.def(
      "finalize",
      [](const std::string& reason) {
        py::gil_scoped_release nogil;
        iotrace_finalize_as(reason.c_str());
      },
      py::arg("reason") = "finalize");
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
  m.def(
      "set_process_info",
      [](const std::string& role, int64_t parent_pid, int64_t worker_id) {
        iotrace_set_process_info(role.empty() ? nullptr : role.c_str(), parent_pid, worker_id);
      },
      py::arg("role"), py::arg("parent_pid") = 0, py::arg("worker_id") = -1);
  m.def("set_dist_rank", &iotrace_set_dist_rank);
  m.def("job_clock_ns", &iotrace_job_clock_ns);
  m.def("clock_measured",
        [](const std::string& at, int64_t mono_ns, int64_t offset_ns, int64_t rtt_ns) {
          iotrace_clock_measured(at.c_str(), mono_ns, offset_ns, rtt_ns);
        });
  m.def(
      "thread_name",
      [](const std::string& name, int32_t tid) {
        iotrace_thread_name_of(tid, name.data(), uint32_t(name.size()));
      },
      py::arg("name"), py::arg("tid") = 0);
  m.def("category_enabled", [](const std::string& c) { return category(c)->on; });
  m.def("set_category", [](const std::string& c, bool on) { category(c)->on = on; });
  m.def("set_default_category_state", [](bool on) {
    g_default_on = on;
    for (auto& kv : categories()) kv.second->on = on;
  });
  m.def("args_json", &args_json);
  m.def("use_task_var", [](py::handle var) {
    if (!PyContextVar_CheckExact(var.ptr())) throw py::type_error("a contextvars.ContextVar");
    Py_XDECREF(g_task_var);
    g_task_var = var.inc_ref().ptr();
  });
  // A complete event with args given as a dict (regions, manual spans). tid 0: this thread.
  m.def(
      "complete",
      [](const std::string& name, const std::string& cat, int64_t start_ns, int64_t dur_ns,
         py::handle args, int32_t tid) {
        Category* c = category(cat);
        if (!c->on || !iotrace_active()) return;
        ArgBuf b;
        if (!args.is_none()) b.dict(args.ptr());
        iotrace_complete_on(tid, iotrace_intern(name.data(), uint32_t(name.size())), c->name,
                            start_ns, dur_ns, b.p, b.n);
      },
      py::arg("name"), py::arg("cat"), py::arg("start_ns"), py::arg("dur_ns"),
      py::arg("args") = py::none(), py::arg("tid") = 0);
  m.def("instant", [](const std::string& name, const std::string& cat, py::handle args) {
    Category* c = category(cat);
    if (!c->on || !iotrace_active()) return;
    ArgBuf b;
    if (!args.is_none()) b.dict(args.ptr());
    iotrace_instant(iotrace_intern(name.data(), uint32_t(name.size())), c->name, iotrace_now(), b.p,
                    b.n);
  });
  m.def("counter", [](const std::string& name, py::handle values) {
    if (!iotrace_active()) return;
    ArgBuf b;
    b.dict(values.ptr());
    iotrace_counter(iotrace_intern(name.data(), uint32_t(name.size())), iotrace_now(), b.p, b.n);
  });
}
