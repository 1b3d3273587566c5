#include "columns.h"

#include <string.h>

#include <algorithm>
#include <initializer_list>
#include <memory>

#include "arrow_c.h"

namespace iot {

namespace {
constexpr int64_t kNullable = ARROW_FLAG_NULLABLE;

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h ^ (h >> 29);
}
}  // namespace

int32_t DictColumn::code(std::string_view s) {
  if (last >= 0 && size_t(offs[last + 1] - offs[last]) == s.size() &&
      memcmp(data.data() + offs[last], s.data(), s.size()) == 0)
    return last;
  if (slots.size() < 2 * (values() + 1)) {  // keep the table at most half full
    slots.assign(slots.empty() ? 64 : 2 * slots.size(), 0);
    while (slots.size() < 2 * (values() + 1)) slots.resize(2 * slots.size());
    indexed = 0;
  }
  for (; indexed < values(); indexed++) {  // the values appended unhashed (append)
    std::string_view v(data.data() + offs[indexed], size_t(offs[indexed + 1] - offs[indexed]));
    size_t i = hash_bytes(v) & (slots.size() - 1);
    while (slots[i]) i = (i + 1) & (slots.size() - 1);
    slots[i] = int32_t(indexed + 1);
  }
  size_t i = hash_bytes(s) & (slots.size() - 1);
  while (int32_t c = slots[i]) {
    c -= 1;
    if (size_t(offs[c + 1] - offs[c]) == s.size() &&
        memcmp(data.data() + offs[c], s.data(), s.size()) == 0)
      return last = c;
    i = (i + 1) & (slots.size() - 1);
  }
  int32_t c = int32_t(values());
  data.append(s.data(), s.size());
  offs.push_back(int32_t(data.size()));
  slots[i] = c + 1;
  indexed = values();
  return last = c;
}

int32_t DictColumn::append(std::string_view s) {
  data.append(s.data(), s.size());
  offs.push_back(int32_t(data.size()));
  return int32_t(values() - 1);
}

void Validity::grow(size_t row) {
  size_t want = std::max({(row >> 6) + 1, (rows_hint + 63) / 64, 2 * words.size()});
  words.resize(want, ~uint64_t(0));
}

int64_t Validity::nulls() const {
  int64_t n = 0;
  for (uint64_t w : words) n += __builtin_popcountll(~w);  // bits past the rows stay set
  return n;
}

void EventColumns::reserve(size_t n) {
  n += rows;
  for (Validity* v : {&ph.valid, &name.valid, &cat.valid, &fhash.valid, &fhash2.valid, &hhash.valid,
                      &pid.valid, &tid.valid, &ts_ns.valid, &dur_ns.valid, &args.valid})
    v->rows_hint = n;
  for (I64Column& c : ints) c.valid.rows_hint = n;
  for (DictColumn* d : {&ph, &name, &cat, &fhash, &fhash2, &hhash}) d->codes.reserve(n);
  for (I64Column* c : {&pid, &tid, &ts_ns, &dur_ns}) c->v.reserve(n);
  for (I64Column& c : ints) c.v.reserve(n);
  args.offs.reserve(n + 1);
}

void EventColumns::bad(std::string_view line) {
  bad_lines++;
  if (bad_examples.size() < 3) bad_examples.emplace_back(line.substr(0, 200));
}

// --- export ----------------------------------------------------------------------------------

namespace {
// Everything one exported batch owns; freed by the root array's release.
struct Holder {
  EventColumns cols;
  ArrowArray child_arrays[20];
  ArrowArray* child_ptrs[20];
  ArrowArray dict_arrays[6];
  const void* buffers[20 + 6][3];
  const void* root_buffers[1] = {nullptr};
};

struct SchemaHolder {
  ArrowSchema children[20];
  ArrowSchema* child_ptrs[20];
  ArrowSchema dicts[6];
};

void release_child_array(ArrowArray* a) { a->release = nullptr; }  // the root owns the memory
void release_child_schema(ArrowSchema* s) { s->release = nullptr; }

void release_array(ArrowArray* a) {
  if (!a->release) return;
  for (int64_t i = 0; i < a->n_children; i++)
    if (a->children[i]->release) a->children[i]->release(a->children[i]);
  delete static_cast<Holder*>(a->private_data);
  a->release = nullptr;
}

void release_schema(ArrowSchema* s) {
  if (!s->release) return;
  delete static_cast<SchemaHolder*>(s->private_data);
  s->release = nullptr;
}

const void* bitmap(Validity& v, size_t rows) {
  if (v.words.empty()) return nullptr;             // no null
  v.words.resize((rows + 63) / 64, ~uint64_t(0));  // the rows after the last null: valid
  return v.words.data();                           // little-endian words: Arrow's bit order
}
}  // namespace

void export_columns(EventColumns&& in, ArrowSchema* schema, ArrowArray* array) {
  auto* h = new Holder();
  h->cols = std::move(in);
  auto* sh = new SchemaHolder{};
  EventColumns& c = h->cols;
  const int64_t rows = int64_t(c.rows);
  DictColumn* dicts[6] = {&c.ph, &c.name, &c.cat, &c.fhash, &c.fhash2, &c.hhash};
  const int dict_slot[20] = {0,  1,  2,  -1, -1, -1, -1, 3,  4, -1,
                             -1, -1, -1, -1, -1, -1, -1, -1, 5, -1};
  I64Column* i64s[20] = {nullptr, nullptr, nullptr, &c.pid, &c.tid, &c.ts_ns, &c.dur_ns};
  for (int k = 0; k < kIntArgs; k++) i64s[9 + k] = &c.ints[k];
  for (int i = 0; i < 20; i++) {
    ArrowArray& a = h->child_arrays[i];
    ArrowSchema& s = sh->children[i];
    memset(&a, 0, sizeof a);
    memset(&s, 0, sizeof s);
    a.length = rows;
    a.release = release_child_array;
    s.name = kEventColumns[i];
    s.flags = kNullable;
    s.release = release_child_schema;
    const void** buf = h->buffers[i];
    a.buffers = buf;
    if (int d = dict_slot[i]; d >= 0) {
      DictColumn& col = *dicts[d];
      s.format = "i";
      ArrowSchema& ds = sh->dicts[d];
      memset(&ds, 0, sizeof ds);
      ds.format = "u";
      ds.flags = kNullable;
      ds.release = release_child_schema;
      s.dictionary = &ds;
      a.n_buffers = 2;
      a.null_count = col.valid.nulls();
      buf[0] = bitmap(col.valid, rows);
      buf[1] = col.codes.data();
      ArrowArray& da = h->dict_arrays[d];
      memset(&da, 0, sizeof da);
      da.length = int64_t(col.values());
      da.n_buffers = 3;
      const void** dbuf = h->buffers[20 + d];
      dbuf[0] = nullptr;
      dbuf[1] = col.offs.data();
      dbuf[2] = col.data.data();
      da.buffers = dbuf;
      da.release = release_child_array;
      a.dictionary = &da;
    } else if (i64s[i]) {
      I64Column& col = *i64s[i];
      s.format = "l";
      a.n_buffers = 2;
      a.null_count = col.valid.nulls();
      buf[0] = bitmap(col.valid, rows);
      buf[1] = col.v.data();
    } else {  // args
      s.format = "u";
      a.n_buffers = 3;
      a.null_count = c.args.valid.nulls();
      buf[0] = bitmap(c.args.valid, rows);
      buf[1] = c.args.offs.data();
      buf[2] = c.args.data.data();
    }
    h->child_ptrs[i] = &a;
    sh->child_ptrs[i] = &s;
  }
  memset(array, 0, sizeof *array);
  array->length = rows;
  array->n_buffers = 1;
  array->buffers = h->root_buffers;
  array->n_children = 20;
  array->children = h->child_ptrs;
  array->release = release_array;
  array->private_data = h;
  memset(schema, 0, sizeof *schema);
  schema->format = "+s";
  schema->name = "";
  schema->n_children = 20;
  schema->children = sh->child_ptrs;
  schema->release = release_schema;
  schema->private_data = sh;
}

}  // namespace iot
