#include "batch_view.h"

#include "json_text.h"

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <stdexcept>

namespace iotx {

namespace {

const uint8_t* validity(const ArrowArray& a) {
  return a.null_count == 0 ? nullptr : static_cast<const uint8_t*>(a.buffers[0]);
}

void take_str(StrArray& out, const ArrowSchema& s, const ArrowArray& a, const char* name) {
  if (strcmp(s.format, "u") != 0)
    throw std::runtime_error(std::string("column ") + name + ": expected utf8, got " + s.format);
  out.valid = validity(a);
  out.nulls = a.null_count < 0 ? 0 : a.null_count;
  out.offs = static_cast<const int32_t*>(a.buffers[1]);
  out.data = static_cast<const char*>(a.buffers[2]);
  out.off = a.offset;
  out.length = a.length;
  if (!out.data) out.data = "";
}

void take_dict(DictCol& out, const ArrowSchema& s, const ArrowArray& a, const char* name) {
  if (strcmp(s.format, "i") != 0 || !s.dictionary || !a.dictionary)
    throw std::runtime_error(std::string("column ") + name + ": expected dictionary<int32, utf8>");
  out.valid = validity(a);
  out.nulls = a.null_count < 0 ? 0 : a.null_count;
  out.codes = static_cast<const int32_t*>(a.buffers[1]);
  out.off = a.offset;
  take_str(out.dict, *s.dictionary, *a.dictionary, name);
}

void take_int(IntCol& out, const ArrowSchema& s, const ArrowArray& a, const char* name) {
  if (strcmp(s.format, "l") != 0)
    throw std::runtime_error(std::string("column ") + name + ": expected int64, got " + s.format);
  out.valid = validity(a);
  out.v = static_cast<const int64_t*>(a.buffers[1]);
  out.off = a.offset;
  out.nulls = a.null_count < 0 ? 0 : a.null_count;  // -1: not counted (not the reader's)
}

}  // namespace

BatchView::BatchView(const ArrowSchema& schema, ArrowArray* array) {
  array_ = *array;  // the consumer moves the array out (Arrow C data interface)
  array->release = nullptr;
  if (strcmp(schema.format, "+s") != 0 || schema.n_children != array_.n_children) {
    if (array_.release) array_.release(&array_);
    throw std::runtime_error("expected a struct array of event columns");
  }
  rows = array_.length;
  try {
    for (int64_t i = 0; i < schema.n_children; i++) {
      const ArrowSchema& s = *schema.children[i];
      const ArrowArray& a = *array_.children[i];
      std::string_view n = s.name ? s.name : "";
      if (n == "ph")
        take_dict(ph, s, a, s.name);
      else if (n == "name")
        take_dict(name, s, a, s.name);
      else if (n == "cat")
        take_dict(cat, s, a, s.name);
      else if (n == "fhash")
        take_dict(fhash, s, a, s.name);
      else if (n == "fhash2")
        take_dict(fhash2, s, a, s.name);
      else if (n == "hhash")
        take_dict(hhash, s, a, s.name);
      else if (n == "pid")
        take_int(pid, s, a, s.name);
      else if (n == "tid")
        take_int(tid, s, a, s.name);
      else if (n == "ts_ns")
        take_int(ts, s, a, s.name);
      else if (n == "dur_ns")
        take_int(dur, s, a, s.name);
      else if (n == "args")
        take_str(args, s, a, s.name);
      else if (n == "merged_calls")
        take_int(merged_calls, s, a, s.name);
      else if (n == "merged_call")
        take_dict(merged_call, s, a, s.name);
      else if (n == "merged_ns")
        take_int(merged_ns, s, a, s.name);
      else
        for (int k = 0; k < kIntArgs; k++)
          if (n == kColumnKeys[k]) take_int(ints[k], s, a, s.name);
    }
  } catch (...) {
    if (array_.release) array_.release(&array_);
    throw;
  }
  for (int k = 0; k < kIntArgs; k++)
    if (ints[k].v && ints[k].nulls < rows) active[n_active++] = k;
  // Columns without a value in this batch (fhash2, hhash, args, mostly) read as absent: one
  // test a row, not a bit of a bitmap.
  for (DictCol* d : {&fhash, &fhash2, &hhash})
    if (d->nulls >= rows) d->codes = nullptr;
  if (args.nulls >= rows) args.offs = nullptr;
  // The struct's own offset applies to every child.
  if (array_.offset) {
    for (DictCol* d : {&ph, &name, &cat, &fhash, &fhash2, &hhash, &merged_call})
      d->off += array_.offset;
    for (IntCol* c : {&pid, &tid, &ts, &dur, &merged_calls, &merged_ns}) c->off += array_.offset;
    for (IntCol& c : ints) c.off += array_.offset;
    args.off += array_.offset;
  }
}

BatchView::~BatchView() {
  if (array_.release) array_.release(&array_);
}

int64_t shift_at(const int64_t* at, const int64_t* shift, size_t n, int64_t t) {
  if (n == 1 || t <= at[0]) return shift[0];
  if (t >= at[n - 1]) return shift[n - 1];
  size_t k = size_t(std::upper_bound(at, at + n, t) - at);  // at[k - 1] <= t < at[k]
  __int128 num = __int128(shift[k] - shift[k - 1]) * (t - at[k - 1]);
  int64_t den = at[k] - at[k - 1];
  int64_t q = int64_t(num / den);
  if (num % den != 0 && (num < 0) != (den < 0)) q--;  // floor, as Python's //
  return shift[k - 1] + q;
}

void BatchView::move_times(const int64_t* at, const int64_t* shift, size_t n) {
  if (!n || !ts.v) return;
  // The copies keep the columns' indexing (row r at r + off), so the validity bitmaps hold.
  int64_t end = ts.off + rows;
  moved_ts_.assign(ts.v, ts.v + end);
  for (int64_t r = 0; r < rows; r++)
    if (ts.has(r)) moved_ts_[size_t(r + ts.off)] += shift_at(at, shift, n, ts.at(r));
  if (dur.v) {
    moved_dur_.assign(dur.v, dur.v + dur.off + rows);
    for (int64_t r = 0; r < rows; r++) {
      if (!dur.has(r) || !ts.has(r)) continue;
      int64_t e = ts.at(r) + dur.at(r);
      moved_dur_[size_t(r + dur.off)] =
          e + shift_at(at, shift, n, e) - moved_ts_[size_t(r + ts.off)];
    }
    dur.v = moved_dur_.data();
  }
  ts.v = moved_ts_.data();
}

const IntCol* BatchView::int_column(std::string_view col) const {
  if (col == "pid") return &pid;
  if (col == "tid") return &tid;
  if (col == "ts_ns") return &ts;
  if (col == "dur_ns") return &dur;
  for (int k = 0; k < kIntArgs; k++)
    if (col == kColumnKeys[k]) return &ints[k];
  return nullptr;
}

const DictCol* BatchView::dict_column(std::string_view col) const {
  if (col == "ph") return &ph;
  if (col == "name") return &name;
  if (col == "cat") return &cat;
  if (col == "fhash") return &fhash;
  if (col == "fhash2") return &fhash2;
  if (col == "hhash") return &hhash;
  return nullptr;
}

// --- args ------------------------------------------------------------------------------------

std::string& ArgLister::scratch() {
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  return scratch_[scratch_used_++];
}

void ArgLister::fname_text(std::string_view hash, int which) {
  Arg& a = add();
  a.key = which ? "fname2" : "fname";
  a.key_id = int8_t(kKeyFname + which);
  a.type = Arg::STR;
  if (names_.find(hash, &a.s)) {
    a.restored = true;  // a view into names_: stable
  } else {
    std::string& buf = scratch();
    buf.assign(hash);
    a.s = buf;
    unresolved_.emplace(std::string(hash), true);
  }
}

std::string_view ArgLister::dict_value(const BatchView& b, int dict, int32_t c, bool* restored) {
  if (dict == 2) {
    *restored = false;
    return b.hhash.dict.at(c);
  }
  const DictCol& col = dict ? b.fhash2 : b.fhash;
  std::vector<std::string_view>& cache = fname_cache_[dict];
  std::vector<uint8_t>& known = fname_known_[dict];
  if (cache.size() < size_t(col.values())) {
    cache.resize(size_t(col.values()));
    known.assign(size_t(col.values()), 0);
  }
  if (!known[size_t(c)]) {  // once per batch and code
    std::string_view hash = col.dict.at(c);
    if (names_.find(hash, &cache[size_t(c)])) {  // a view that lives as long as names_
      known[size_t(c)] = 1;
    } else {
      cache[size_t(c)] = hash;
      known[size_t(c)] = 2;
      unresolved_.emplace(std::string(hash), true);
    }
  }
  *restored = known[size_t(c)] == 1;
  return cache[size_t(c)];
}

std::vector<std::string> ArgLister::unresolved() const {
  std::vector<std::string> out;
  for (const auto& kv : unresolved_)
    if (!names_.has(kv.first)) out.push_back(kv.first);
  return out;
}

void ArgLister::list(const BatchView& b, int64_t r) {
  n_ = 0;
  scratch_used_ = 0;
  if (b.args.has(r) && parse_object(b.args.at(r))) return;
  n_ = 0;
  column_args(
      b, r,
      [&](int k, int64_t v) {
        Arg& a = add();
        a.key = kColumnKeys[k];
        a.key_id = int8_t(k);
        a.type = Arg::INT;
        a.i = v;
      },
      [&](int k, int dict, int32_t code) {
        Arg& a = add();
        a.key = kColumnKeys[k];
        a.key_id = int8_t(k);
        a.dict = int8_t(dict);
        a.code = code;
        a.type = Arg::STR;
        a.s = dict_value(b, dict, code, &a.restored);
      });
}

// --- a small JSON reader for the args object (valid JSON: the reader parsed the line) ---------

namespace {

struct Cur {
  const char* p;
  const char* end;
  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
  }
};

// A string at c.p (a quote): its value, a view of the text without escapes, else unescaped
// into buf.
bool str(Cur& c, std::string_view* out, std::string& buf) {
  return iot::read_string(c.p, c.end, out, buf, /*strict=*/false);
}

bool skip(Cur& c, int depth) {
  c.ws();
  if (c.p >= c.end || depth > 200) return false;
  char ch = *c.p;
  if (ch == '"') {
    for (c.p++; c.p < c.end; c.p++) {
      if (*c.p == '\\')
        c.p++;
      else if (*c.p == '"')
        return c.p++, true;
    }
    return false;
  }
  if (ch == '{' || ch == '[') {
    char close = ch == '{' ? '}' : ']';
    c.p++;
    c.ws();
    if (c.p < c.end && *c.p == close) return c.p++, true;
    for (;;) {
      if (close == '}') {
        if (!skip(c, depth + 1)) return false;  // the key
        c.ws();
        if (c.p >= c.end || *c.p++ != ':') return false;
      }
      if (!skip(c, depth + 1)) return false;
      c.ws();
      if (c.p >= c.end) return false;
      if (*c.p == ',') {
        c.p++;
        continue;
      }
      return *c.p++ == close;
    }
  }
  const char* s = c.p;
  while (c.p < c.end && *c.p != ',' && *c.p != '}' && *c.p != ']' && *c.p != ' ' && *c.p != '\t' &&
         *c.p != '\r' && *c.p != '\n')
    c.p++;
  return c.p > s;
}

// An integer's text (no fraction, no exponent) -> int64 or uint64.
int as_integer(std::string_view t, int64_t* i, uint64_t* u) {
  size_t k = 0;
  bool neg = false;
  if (k < t.size() && t[k] == '-') neg = true, k++;
  if (k == t.size()) return 0;
  uint64_t x = 0;
  for (; k < t.size(); k++) {
    char ch = t[k];
    if (ch < '0' || ch > '9' || x > (UINT64_MAX - 9) / 10) return 0;
    x = x * 10 + uint64_t(ch - '0');
  }
  if (neg) {
    if (x > uint64_t(INT64_MAX) + 1) return 0;
    *i = int64_t(0 - x);
    return 1;
  }
  if (x <= uint64_t(INT64_MAX)) {
    *i = int64_t(x);
    return 1;
  }
  *u = x;
  return 2;
}

}  // namespace

bool ArgLister::parse_object(std::string_view text) {
  Cur c{text.data(), text.data() + text.size()};
  c.ws();
  if (c.p >= c.end || *c.p++ != '{') return false;
  std::string_view hashes[2];
  bool has_hash[2] = {false, false};
  c.ws();
  if (c.p < c.end && *c.p == '}') return true;
  for (;;) {
    c.ws();
    Arg& a = add();
    std::string_view key;
    if (!str(c, &key, scratch())) return false;
    a.key = key;
    c.ws();
    if (c.p >= c.end || *c.p++ != ':') return false;
    c.ws();
    if (c.p >= c.end) return false;
    const char* start = c.p;
    char ch = *c.p;
    if (ch == '"') {
      std::string_view v;
      if (!str(c, &v, scratch())) return false;
      a.type = Arg::STR;
      a.s = v;
      a.raw = std::string_view(start, size_t(c.p - start));
      int which = key == "fhash" ? 0 : key == "fhash2" ? 1 : -1;
      if (which >= 0 && !has_hash[which]) {
        // restored below, as the last args; the slot is reused, so keep the hash's text
        restored_[which].assign(v);
        hashes[which] = restored_[which];
        has_hash[which] = true;
        n_--;
      }
    } else {
      if (!skip(c, 0)) return false;
      a.raw = std::string_view(start, size_t(c.p - start));
      if (ch == '{' || ch == '[' || ch == 'n') {  // objects, lists, null: shown as JSON
        a.type = Arg::JSON;
        a.s = a.raw;
      } else if (ch == 't' || ch == 'f') {
        a.type = Arg::BOOL;
        a.i = ch == 't';
      } else {
        int k = as_integer(a.raw, &a.i, &a.u);
        if (k == 1) {
          a.type = Arg::INT;
        } else if (k == 2) {
          a.type = Arg::UINT;
        } else {
          std::string num(a.raw);
          a.type = Arg::DOUBLE;
          a.d = strtod(num.c_str(), nullptr);
        }
      }
    }
    c.ws();
    if (c.p >= c.end) return false;
    if (*c.p == ',') {
      c.p++;
      continue;
    }
    if (*c.p != '}') return false;
    break;
  }
  for (int which = 0; which < 2; which++)
    if (has_hash[which]) fname_text(hashes[which], which);
  return true;
}

// --- JSON helpers ----------------------------------------------------------------------------

void json_string(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out.push_back('\\');
      out.push_back(char(ch));
    } else if (ch < 0x20) {
      const char* esc = ch == '\n' ? "\\n" : ch == '\t' ? "\\t" : ch == '\r' ? "\\r" : nullptr;
      if (esc) {
        out.append(esc, 2);
      } else {
        out.append("\\u00", 4);
        out.push_back(kHex[ch >> 4]);
        out.push_back(kHex[ch & 15]);
      }
    } else {
      out.push_back(char(ch));
    }
  }
  out.push_back('"');
}

size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

}  // namespace iotx
