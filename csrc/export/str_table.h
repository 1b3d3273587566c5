// The export's string tables, sized for a job that names a million files: strings copied once
// into chunks that never move (views of them stay valid as long as the table), and flat
// open-addressing hash tables of 16-24 bytes a slot that look strings up by view (no
// std::string made per look-up, no allocation per entry).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

namespace iotx {

// A 64-bit hash of a string (8 bytes a step, folded multiplications).
inline uint64_t str_hash(std::string_view s) {
  auto mix = [](uint64_t a, uint64_t b) {
    __uint128_t r = __uint128_t(a) * b;
    return uint64_t(r) ^ uint64_t(r >> 64);
  };
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = mix(h ^ w, 0xBF58476D1CE4E5B9ull);
  }
  uint64_t w = 0;
  if (n) memcpy(&w, p, n);
  return mix(h ^ w ^ 0x94D049BB133111EBull, 0x2545F4914F6CDD1Dull);
}

// Bytes appended in chunks that never move; freed all at once.
class Arena {
 public:
  char* alloc(size_t n) {
    if (n > left_) {
      size_t size = std::max(n, chunk_);
      chunk_ = std::min<size_t>(chunk_ * 2, 4 << 20);  // 64 KiB .. 4 MiB a chunk
      chunks_.emplace_back(new char[size]);
      cur_ = chunks_.back().get();
      left_ = size;
    }
    char* p = cur_;
    cur_ += n;
    left_ -= n;
    return p;
  }
  std::string_view copy(std::string_view s) {
    if (s.empty()) return std::string_view("", 0);
    char* p = alloc(s.size());
    memcpy(p, s.data(), s.size());
    return std::string_view(p, s.size());
  }

 private:
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* cur_ = nullptr;
  size_t left_ = 0, chunk_ = 64 << 10;
};

// Strings -> ids 1, 2, 3, ... in order of first use (an interning table). A string the caller
// declares stable (it outlives the table: a view into FileNames) is not copied.
class StrIds {
 public:
  // The id of s; *added when it was new (given the next id).
  uint32_t get(std::string_view s, bool stable, bool* added) {
    if ((n_ + 1) * 4 > slots_.size() * 3) grow();
    uint64_t h = str_hash(s);
    size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
      Slot& e = slots_[i];
      if (!e.id) {
        e.h = h;
        e.p = stable || s.empty() ? s.data() : arena_.copy(s).data();
        e.len = uint32_t(s.size());
        e.id = uint32_t(++n_);
        *added = true;
        return e.id;
      }
      if (e.h == h && e.len == s.size() && !memcmp(e.p, s.data(), s.size())) {
        *added = false;
        return e.id;
      }
    }
  }
  size_t size() const { return n_; }

 private:
  struct Slot {
    uint64_t h = 0;
    const char* p = nullptr;
    uint32_t len = 0, id = 0;  // id 0: empty
  };
  void grow() {
    std::vector<Slot> old(std::max<size_t>(16, slots_.size() * 2));
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& e : old) {
      if (!e.id) continue;
      size_t i = size_t(e.h) & mask;
      while (slots_[i].id) i = (i + 1) & mask;
      slots_[i] = e;
    }
  }
  std::vector<Slot> slots_;
  size_t n_ = 0;
  Arena arena_;
};

// File names (FH lines: hash -> path), shared by every batch of a file. Paths found are views
// that stay valid as long as the table (a hash named again keeps its old path's bytes).
class FileNames {
 public:
  void set(std::string_view hash, std::string_view path) {
    if ((n_ + 1) * 4 > slots_.size() * 3) grow();
    uint64_t h = str_hash(hash);
    size_t i = slot_of(hash, h);
    if (slots_[i].rec) {
      if (path_of(slots_[i].rec) == path) return;  // named again, the same
    } else {
      n_++;
    }
    // a record: key length, path length (4 bytes each), the key, the path
    char* r = arena_.alloc(8 + hash.size() + path.size());
    uint32_t k = uint32_t(hash.size()), v = uint32_t(path.size());
    memcpy(r, &k, 4);
    memcpy(r + 4, &v, 4);
    memcpy(r + 8, hash.data(), k);
    memcpy(r + 8 + k, path.data(), v);
    slots_[i] = Slot{h, r};
  }
  // The path of a hash; false when no FH line named it.
  bool find(std::string_view hash, std::string_view* path) const {
    if (!n_) return false;
    size_t i = slot_of(hash, str_hash(hash));
    if (!slots_[i].rec) return false;
    *path = path_of(slots_[i].rec);
    return true;
  }
  bool has(std::string_view hash) const {
    std::string_view p;
    return find(hash, &p);
  }
  size_t size() const { return n_; }

 private:
  struct Slot {
    uint64_t h = 0;
    const char* rec = nullptr;  // nullptr: empty
  };
  static uint32_t u32(const char* p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  static std::string_view key_of(const char* r) { return std::string_view(r + 8, u32(r)); }
  static std::string_view path_of(const char* r) {
    return std::string_view(r + 8 + u32(r), u32(r + 4));
  }
  // The slot holding `hash`, or the empty one where it would go.
  size_t slot_of(std::string_view hash, uint64_t h) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
      const Slot& e = slots_[i];
      if (!e.rec || (e.h == h && key_of(e.rec) == hash)) return i;
    }
  }
  void grow() {
    std::vector<Slot> old(std::max<size_t>(16, slots_.size() * 2));
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& e : old) {
      if (!e.rec) continue;
      size_t i = size_t(e.h) & mask;
      while (slots_[i].rec) i = (i + 1) & mask;
      slots_[i] = e;
    }
  }
  std::vector<Slot> slots_;
  size_t n_ = 0;
  Arena arena_;
};

}  // namespace iotx
