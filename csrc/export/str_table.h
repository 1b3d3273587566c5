// The export's string tables, sized for a job that names a million files: strings copied once
// into chunks that never move (views of them stay valid as long as the table), and flat
// open-addressing hash tables of 16-24 bytes a slot that look strings up by view (no
// std::string made per look-up, no allocation per entry).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <memory>
#include <new>
#include <utility>
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

// Zeroed memory for big tables: mapped, on huge pages where the kernel gives them (a table of a
// million entries is looked up at random: with 4 KiB pages nearly every look-up misses the TLB
// too). Small ones from the heap.
class Block {
 public:
  static constexpr size_t kHuge = 2 << 20;
  Block() = default;
  explicit Block(size_t n) : n_(n) {
    if (n < kHuge) {
      small_.reset(new char[n]());
      p_ = small_.get();
      return;
    }
    map_n_ = (n + kHuge - 1) / kHuge * kHuge + kHuge;  // room to align to a huge page
    void* m = mmap(nullptr, map_n_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<char*>(m);
    p_ = map_ + (kHuge - uintptr_t(map_) % kHuge) % kHuge;
#ifdef MADV_HUGEPAGE
    madvise(p_, (n + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
#endif
  }
  ~Block() {
    if (map_) munmap(map_, map_n_);
  }
  Block(Block&& o) noexcept { *this = std::move(o); }
  Block& operator=(Block&& o) noexcept {
    if (this != &o) {
      if (map_) munmap(map_, map_n_);
      small_ = std::move(o.small_);
      p_ = o.p_, n_ = o.n_, map_ = o.map_, map_n_ = o.map_n_;
      o.p_ = o.map_ = nullptr;
      o.n_ = o.map_n_ = 0;
    }
    return *this;
  }
  char* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<char[]> small_;
  char* p_ = nullptr;
  size_t n_ = 0;
  char* map_ = nullptr;
  size_t map_n_ = 0;
};

// A table's slots (zeroed: T's empty state must be all zero bytes).
template <class T>
class Slots {
 public:
  Slots() = default;
  explicit Slots(size_t n) : b_(n * sizeof(T)), n_(n) {}
  T& operator[](size_t i) { return reinterpret_cast<T*>(b_.data())[i]; }
  const T& operator[](size_t i) const { return reinterpret_cast<const T*>(b_.data())[i]; }
  size_t size() const { return n_; }
  T* begin() { return reinterpret_cast<T*>(b_.data()); }
  T* end() { return begin() + n_; }

 private:
  Block b_;
  size_t n_ = 0;
};

// Bytes appended in chunks that never move; freed all at once. The first chunk is small: the
// .pftrace writer has four interners per packet sequence, and a budgeted export hundreds of
// sequences (files64-1p's 448 merged tracks took 117 MiB in 64 KiB first chunks).
class Arena {
 public:
  char* alloc(size_t n) {
    if (n > left_) {
      size_t size = std::max(n, chunk_);
      chunk_ = std::min<size_t>(chunk_ * 2, 4 << 20);  // 1 KiB .. 4 MiB a chunk
      chunks_.emplace_back(size);
      cur_ = chunks_.back().data();
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
  std::vector<Block> chunks_;
  char* cur_ = nullptr;
  size_t left_ = 0, chunk_ = 1 << 10;
};

// Strings -> ids 1, 2, 3, ... in order of first use (an interning table). Its strings have their
// length before them (4 bytes): copied so, or, when the caller declares them stable, a path of
// FileNames (which keeps them so and outlives the table).
class StrIds {
 public:
  // The id of s (hash: str_hash(s)); *added when it was new (given the next id).
  uint32_t get(std::string_view s, uint64_t hash, bool stable, bool* added) {
    if ((filled_ + 1) * 4 > slots_.size() * 3) grow();
    uint32_t h = uint32_t(hash);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& e = slots_[i];
      if (!e.id) {
        e.h = h;
        e.p = stable ? s.data() : copy(s);
        e.id = uint32_t(++n_);
        filled_++;
        *added = true;
        return e.id;
      }
      if (e.h == h && len(e.p) == s.size() && !memcmp(e.p, s.data(), s.size())) {
        *added = false;
        return e.id;
      }
    }
  }
  uint32_t get(std::string_view s, bool stable, bool* added) {
    return get(s, str_hash(s), stable, added);
  }
  // Brings the slot where a string of this hash is looked for into the cache.
  void prefetch(uint64_t hash) const {
    if (slots_.size()) __builtin_prefetch(&slots_[uint32_t(hash) & (slots_.size() - 1)], 1);
  }
  size_t size() const { return n_; }
  // The next id, for a string its caller keeps apart (a path whose record holds its id): not
  // in the table.
  uint32_t take_id() { return uint32_t(++n_); }

 private:
  struct Slot {  // 16 bytes
    const char* p = nullptr;
    uint32_t h = 0;   // the hash's low half
    uint32_t id = 0;  // 0: empty
  };
  static size_t len(const char* p) {
    uint32_t v;
    memcpy(&v, p - 4, 4);
    return v;
  }
  const char* copy(std::string_view s) {
    char* p = arena_.alloc(4 + s.size());
    uint32_t n = uint32_t(s.size());
    memcpy(p, &n, 4);
    if (n) memcpy(p + 4, s.data(), n);
    return p + 4;
  }
  void grow() {
    Slots<Slot> old(std::max<size_t>(16, slots_.size() * 2));
    std::swap(old, slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& e : old) {
      if (!e.id) continue;
      size_t i = e.h & mask;
      while (slots_[i].id) i = (i + 1) & mask;
      slots_[i] = e;
    }
  }
  Slots<Slot> slots_;
  size_t n_ = 0;       // ids given
  size_t filled_ = 0;  // slots taken
  Arena arena_;
};

// File names (FH lines: hash -> path), shared by every batch of a file. Paths found are views
// that stay valid as long as the table (a hash named again keeps its old path's bytes), with
// their length before them (StrIds takes them as they are).
class FileNames {
 public:
  void set(std::string_view hash, std::string_view path) { set(hash, str_hash(hash), path); }
  void set(std::string_view hash, uint64_t h, std::string_view path) {
    if ((n_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = slot_of(hash, h);
    if (slots_[i].rec) {
      if (path_of(slots_[i].rec) == path) return;  // named again, the same
    } else {
      n_++;
    }
    // a record: the key's length (4 bytes), the key, the note (8 bytes), the path's length,
    // the path
    uint32_t k = uint32_t(hash.size()), v = uint32_t(path.size());
    char* r = arena_.alloc(16 + k + v);
    memcpy(r, &k, 4);
    memcpy(r + 4, hash.data(), k);
    memset(r + 4 + k, 0, 8);
    memcpy(r + 12 + k, &v, 4);
    memcpy(r + 16 + k, path.data(), v);
    slots_[i] = Slot{h, r};
  }
  // Many (hash, path) pairs in order, their slots fetched a few pairs ahead.
  void set_many(const std::pair<std::string_view, std::string_view>* pairs, size_t n) {
    constexpr size_t kAhead = 8;
    uint64_t hs[kAhead];
    if ((n_ + n) * 4 > slots_.size() * 3) reserve(n_ + n);
    for (size_t i = 0; i < n + kAhead; i++) {
      if (i >= kAhead) {  // the pair whose slot was fetched kAhead pairs ago (before its hash's
                          // place in the ring is taken)
        size_t j = i - kAhead;
        set(pairs[j].first, hs[j % kAhead], pairs[j].second);
      }
      if (i < n) prefetch(hs[i % kAhead] = str_hash(pairs[i].first));
    }
  }
  // The path of a hash; false when no FH line named it.
  bool find(std::string_view hash, std::string_view* path) const {
    return find(hash, str_hash(hash), path);
  }
  bool find(std::string_view hash, uint64_t h, std::string_view* path) const {
    if (!n_) return false;
    size_t i = slot_of(hash, h);
    if (!slots_[i].rec) return false;
    *path = path_of(slots_[i].rec);
    return true;
  }
  bool has(std::string_view hash) const {
    std::string_view p;
    return find(hash, &p);
  }
  void prefetch(uint64_t h) const {
    if (slots_.size()) __builtin_prefetch(&slots_[size_t(h) & (slots_.size() - 1)]);
  }
  size_t size() const { return n_; }
  // Two words kept with a path found here (zero until set), for its user: the Perfetto writer
  // keeps there the sequence that interned the path first and its iid in it.
  static void get_note(std::string_view path, uint32_t note[2]) {
    memcpy(note, path.data() - 12, 8);
  }
  static void set_note(std::string_view path, const uint32_t note[2]) {
    memcpy(const_cast<char*>(path.data()) - 12, note, 8);
  }

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
  static std::string_view key_of(const char* r) { return std::string_view(r + 4, u32(r)); }
  static std::string_view path_of(const char* r) {
    const char* v = r + 12 + u32(r);
    return std::string_view(v + 4, u32(v));
  }
  // The slot holding `hash`, or the empty one where it would go.
  size_t slot_of(std::string_view hash, uint64_t h) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
      const Slot& e = slots_[i];
      if (!e.rec || (e.h == h && key_of(e.rec) == hash)) return i;
    }
  }
  void reserve(size_t n) {
    size_t size = std::max<size_t>(16, slots_.size());
    while (n * 4 > size * 3) size *= 2;
    rehash(size);
  }
  void grow() { rehash(std::max<size_t>(16, slots_.size() * 2)); }
  void rehash(size_t size) {
    if (size == slots_.size()) return;
    Slots<Slot> old(size);
    std::swap(old, slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot& e : old) {
      if (!e.rec) continue;
      size_t i = size_t(e.h) & mask;
      while (slots_[i].rec) i = (i + 1) & mask;
      slots_[i] = e;
    }
  }
  Slots<Slot> slots_;
  size_t n_ = 0;
  Arena arena_;
};

}  // namespace iotx
