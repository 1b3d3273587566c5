#include "json_scan.h"

#include "fh_line.h"
#include "json_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <string>

namespace iot {

namespace {

// A cursor over one line. Every parse function returns false on text that is not JSON (the
// line is then bad) and leaves `p` after what it read.
struct Cursor {
  const char* p;
  const char* end;
  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
  }
  bool eat(char c) {
    ws();
    if (p < end && *p == c) return p++, true;
    return false;
  }
};

// A string at the cursor (after ws): its value, pointing into the line when it has no
// escapes, else unescaped into `scratch`.
bool string(Cursor& c, std::string_view* out, std::string& scratch) {
  c.ws();
  return read_string(c.p, c.end, out, scratch, /*strict=*/true);
}

// A number's text at the cursor, as JSON writes it.
bool number_text(Cursor& c, std::string_view* out) {
  c.ws();
  const char* s = c.p;
  if (c.p < c.end && *c.p == '-') c.p++;
  const char* digits = c.p;
  while (c.p < c.end && ((*c.p >= '0' && *c.p <= '9') || *c.p == '.' || *c.p == 'e' ||
                         *c.p == 'E' || *c.p == '+' || *c.p == '-'))
    c.p++;
  if (c.p == digits) return false;
  *out = std::string_view(s, size_t(c.p - s));
  return true;
}

// An integer number (false for a fraction or an exponent; the value is then not used).
bool as_int(std::string_view t, int64_t* v) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && t[i] == '-') neg = true, i++;
  if (i == t.size()) return false;
  uint64_t x = 0;
  for (; i < t.size(); i++) {
    char ch = t[i];
    if (ch < '0' || ch > '9' || x > (UINT64_MAX - 9) / 10) return false;
    x = x * 10 + uint64_t(ch - '0');
  }
  if (x > uint64_t(INT64_MAX) + neg) return false;
  *v = neg ? int64_t(0 - x) : int64_t(x);
  return true;
}

// Microseconds as JSON writes them (1834223.052, 1795482159290700, 1.5e3) → nanoseconds,
// rounded; exact for up to three decimals (what iotrace and DFTracer write).
bool usec_to_ns(std::string_view t, int64_t* ns) {
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && t[i] == '-') neg = true, i++;
  int64_t whole = 0;
  size_t start = i;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; i++) {
    if (whole > (INT64_MAX / 1000 - 9) / 10) return false;
    whole = whole * 10 + (t[i] - '0');
  }
  if (i == start) return false;
  int64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  if (i < t.size() && t[i] == '.') {
    for (i++; i < t.size() && t[i] >= '0' && t[i] <= '9'; i++, digits++) {
      if (digits < 3)
        frac = frac * 10 + (t[i] - '0');
      else if (digits == 3)
        round_up = t[i] >= '5';
    }
  }
  if (i < t.size()) {  // an exponent: the general way
    std::string s(t);
    double v = strtod(s.c_str(), nullptr) * 1000.0;
    if (!(v > -9.2e18 && v < 9.2e18)) return false;
    *ns = int64_t(v < 0 ? v - 0.5 : v + 0.5);
    return true;
  }
  while (digits < 3) frac *= 10, digits++;
  int64_t v = whole * 1000 + frac + (round_up ? 1 : 0);
  *ns = neg ? -v : v;
  return true;
}

bool skip_value(Cursor& c, int depth = 0);

bool skip_container(Cursor& c, char close, int depth) {
  if (depth > 64) return false;
  if (c.eat(close)) return true;
  std::string scratch;
  for (;;) {
    if (close == '}') {
      std::string_view key;
      if (!string(c, &key, scratch) || !c.eat(':')) return false;
    }
    if (!skip_value(c, depth + 1)) return false;
    if (c.eat(',')) continue;
    return c.eat(close);
  }
}

bool skip_value(Cursor& c, int depth) {
  c.ws();
  if (c.p >= c.end) return false;
  char ch = *c.p;
  if (ch == '"') {
    // No unescaping needed: walk to the closing quote.
    for (c.p++; c.p < c.end; c.p++) {
      if (*c.p == '\\')
        c.p++;
      else if (*c.p == '"')
        return c.p++, true;
    }
    return false;
  }
  if (ch == '{') return c.p++, skip_container(c, '}', depth);
  if (ch == '[') return c.p++, skip_container(c, ']', depth);
  if (ch == 't' && c.end - c.p >= 4 && memcmp(c.p, "true", 4) == 0) return c.p += 4, true;
  if (ch == 'f' && c.end - c.p >= 5 && memcmp(c.p, "false", 5) == 0) return c.p += 5, true;
  if (ch == 'n' && c.end - c.p >= 4 && memcmp(c.p, "null", 4) == 0) return c.p += 4, true;
  std::string_view num;
  return number_text(c, &num);
}

// The args object's keys, read; then appended (one value per args column).
struct Args {
  int64_t ints[kIntArgs];
  bool has[kIntArgs] = {};
  int64_t count = 0;
  bool has_count = false;
  std::string_view fhash, fhash2, hhash;
  bool has_fhash = false, has_fhash2 = false, has_hhash = false;
  bool extra = false;
  std::string fh_scratch, fh2_scratch, hh_scratch;

  static int int_key(std::string_view k) {
    static const std::string_view names[kIntArgs] = {"fd",    "fd2",   "size",  "offset", "ret",
                                                     "bytes", "errno", "flags", "mode"};
    for (int i = 0; i < kIntArgs; i++)
      if (k == names[i]) return i;
    return -1;
  }

  // The members of an object after its `{`, up to and with its `}`.
  bool parse(Cursor& c) {
    if (c.eat('}')) return true;
    std::string key_scratch;
    for (;;) {
      std::string_view key;
      if (!string(c, &key, key_scratch) || !c.eat(':')) return false;
      c.ws();
      bool is_str = c.p < c.end && *c.p == '"';
      if (key == "fhash" && is_str) {
        if (!string(c, &fhash, fh_scratch)) return false;
        has_fhash = true;
      } else if (key == "fhash2" && is_str) {
        if (!string(c, &fhash2, fh2_scratch)) return false;
        has_fhash2 = true;
      } else if (key == "hhash" && is_str) {
        if (!string(c, &hhash, hh_scratch)) return false;
        has_hhash = true;
      } else if (int k = int_key(key); k >= 0 || key == "count") {
        std::string_view num;
        if (is_str || !(c.p < c.end && (*c.p == '-' || (*c.p >= '0' && *c.p <= '9')))) {
          // A value of another type (DFTracer's fopen "mode":"r"): not a column's; kept
          // with the object only when nothing else is.
          if (!skip_value(c)) return false;
        } else {
          if (!number_text(c, &num)) return false;
          int64_t v;
          if (as_int(num, &v)) {
            if (k >= 0)
              ints[k] = v, has[k] = true;
            else
              count = v, has_count = true;
          }
        }
      } else {
        extra = true;
        if (!skip_value(c)) return false;
      }
      if (c.eat(',')) continue;
      return c.eat('}');
    }
  }

  void append(EventColumns& cols, std::string_view object) {
    if (!has[A_SIZE] && has_count) ints[A_SIZE] = count, has[A_SIZE] = true;  // DFTracer's count
    has_fhash ? cols.fhash.add(fhash) : cols.fhash.add_null();
    has_fhash2 ? cols.fhash2.add(fhash2) : cols.fhash2.add_null();
    for (int k = 0; k < kIntArgs; k++) cols.ints[k].add(ints[k], has[k]);
    has_hhash ? cols.hhash.add(hhash) : cols.hhash.add_null();
    extra ? cols.args.add(object) : cols.args.add_null();
  }
};

// No value for the args columns but `args` itself.
void no_arg_values(EventColumns& cols) {
  cols.fhash.add_null();
  cols.fhash2.add_null();
  for (int k = 0; k < kIntArgs; k++) cols.ints[k].add_null();
  cols.hhash.add_null();
}

void append_no_args(EventColumns& cols) {
  no_arg_values(cols);
  cols.args.add_null();
}

void scan_line(std::string_view line, EventColumns& cols) {
  Cursor c{line.data(), line.data() + line.size()};
  if (!c.eat('{')) return cols.bad(line);
  std::string_view ph, name, cat, pid_t, tid_t, ts_t, dur_t;
  bool has_ph = false, has_name = false, has_cat = false;
  std::string scratch, name_scratch, cat_scratch, ph_scratch;
  Args args;
  bool has_args = false;
  const char *args_start = nullptr, *args_end = nullptr;
  if (!c.eat('}')) {
    for (;;) {
      std::string_view key;
      if (!string(c, &key, scratch) || !c.eat(':')) return cols.bad(line);
      c.ws();
      if (c.p >= c.end) return cols.bad(line);
      bool ok = true;
      if (key == "ph") {
        has_ph = true;
        if (*c.p == '"') {
          ok = string(c, &ph, ph_scratch);
        } else {  // DFTracer 2.x: numbers
          std::string_view num;
          ok = number_text(c, &num);
          ph = num == "1" ? "X" : num == "4" ? "M" : num;
        }
      } else if (key == "name" && *c.p == '"') {
        ok = string(c, &name, name_scratch), has_name = true;
      } else if (key == "cat" && *c.p == '"') {
        ok = string(c, &cat, cat_scratch), has_cat = true;
      } else if (key == "pid" && *c.p != '"') {
        ok = number_text(c, &pid_t);
      } else if (key == "tid" && *c.p != '"') {
        ok = number_text(c, &tid_t);
      } else if (key == "ts" && *c.p != '"') {
        ok = number_text(c, &ts_t);
      } else if (key == "dur" && *c.p != '"') {
        ok = number_text(c, &dur_t);
      } else if (key == "args" && *c.p == '{') {
        args_start = c.p++;
        ok = args.parse(c);
        args_end = c.p;
        has_args = true;
      } else {
        ok = skip_value(c);
      }
      if (!ok) return cols.bad(line);
      if (c.eat(',')) continue;
      if (c.eat('}')) break;
      return cols.bad(line);
    }
  }
  c.ws();
  if (c.p != c.end) return cols.bad(line);
  if (has_ph && ph == "M") return cols.add_meta(line);
  cols.ph.add(has_ph ? ph : std::string_view());
  has_name ? cols.name.add(name) : cols.name.add_null();
  has_cat ? cols.cat.add(cat) : cols.cat.add_null();
  int64_t v = 0;
  bool has = !pid_t.empty() && as_int(pid_t, &v);
  cols.pid.add(v, has);
  has = !tid_t.empty() && as_int(tid_t, &v);
  cols.tid.add(v, has);
  has = !ts_t.empty() && usec_to_ns(ts_t, &v);
  cols.ts_ns.add(v, has);
  has = !dur_t.empty() && usec_to_ns(dur_t, &v);
  cols.dur_ns.add(v, has);
  if (has_args)
    args.append(cols, std::string_view(args_start, size_t(args_end - args_start)));
  else
    append_no_args(cols);
  cols.rows++;
}

// A file-name line as the tracer writes it, into the names kept apart; false for any other
// line (and for a hash that is not 16 hex digits, or a path that is not UTF-8: left to
// scan_line, then to the reader's JSON parser, as before).
bool take_name(std::string_view line, EventColumns& cols) {
  std::string_view path, hash;
  uint64_t x;
  if (!fh_line(line, path, hash) || !hex16(hash, x) || !utf8(path)) return false;
  cols.name_hash.push_back(x);
  cols.name_bytes.append(path.data(), path.size());
  cols.name_offs.push_back(int64_t(cols.name_bytes.size()));
  return true;
}

}  // namespace

void scan_lines(const char* p, size_t n, EventColumns& cols, void (*before_scan)(void*),
                void* ctx) {
  const char* end = p + n;
  while (p < end) {
    const char* nl = static_cast<const char*>(memchr(p, '\n', size_t(end - p)));
    const char* e = nl ? nl : end;
    const char* s = p;
    p = nl ? nl + 1 : end;
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\r')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    if (e > s && (e[-1] == ',' || e[-1] == ']')) {
      e--;
      while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    }
    if (e > s && *s == '[') s++;  // "[" alone, or "[{...}" when the first event shares it
    if (e == s) continue;
    const std::string_view line(s, size_t(e - s));
    if (cols.names_apart && take_name(line, cols)) continue;
    if (before_scan) before_scan(ctx);
    scan_line(line, cols);
  }
}

void scan_args_body(std::string_view body, EventColumns& cols) {
  if (body.empty()) return append_no_args(cols);
  std::string object;
  object.reserve(body.size() + 2);
  object.push_back('{');
  object.append(body);
  object.push_back('}');
  Cursor c{object.data() + 1, object.data() + object.size()};
  Args args;
  if (!args.parse(c) || c.p != c.end) {  // not an object body (never from the tracer): as text
    no_arg_values(cols);
    cols.args.add(object);
    return;
  }
  args.append(cols, object);
}

}  // namespace iot
