// The compact form of a trace (IOTRACE_FORMAT=compact, `.iotc.zst`): each zstd frame holds
// one self-contained block of columns instead of JSON text. I/O events become rows of small
// integers (times as gaps, offsets against the fd's expected position, returns against the
// size asked for), Python / C API complete events rows of times, name and category numbers
// and their args text; every other line (metadata, instants, counters) is kept as its text.
// Rendering a block gives back, byte for byte, the lines the JSON form would have written.
// docs/trace-format.md ("The compact form") is the contract.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "encoder.h"

namespace iot {

constexpr char kCompactMagic[4] = {'I', 'O', 'T', 'C'};
constexpr int kCompactVersion = 1;
constexpr int kCompactColumns = 16;
constexpr uint8_t kSpanRow = 255;  // the kind of a Python / C API complete event

// --- the rules both halves apply -------------------------------------------------------------

inline uint64_t zz(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
inline int64_t unzz(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }
inline int64_t wrap_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

constexpr int kFdSlots = 1024;

// What the next offset on an fd is expected to be: where the last transfer on it ended, or
// where an lseek put it. Writer and readers apply the same rule to the same rows.
inline bool is_seek(uint16_t call) { return call == C_lseek || call == C_lseek64; }

struct FdPositions {
  int64_t* pos;
  bool* known;
  int64_t expect(const IoRec& r) const {
    if (!(r.fields & F_FD) || r.fd < 0 || r.fd >= kFdSlots || !known[r.fd]) return 0;
    return pos[r.fd];
  }
  void update(const IoRec& r) {
    if (!(r.fields & F_FD) || r.fd < 0 || r.fd >= kFdSlots || !(r.fields & F_RET)) return;
    if (is_seek(r.h.call)) {
      if (r.ret >= 0) pos[r.fd] = r.ret, known[r.fd] = true;
    } else if ((r.fields & F_OFFSET) && r.ret > 0) {
      pos[r.fd] = wrap_add(r.offset, r.ret), known[r.fd] = true;
    }
  }
};

// Writer side: rows are added in file order, then serialised as one frame's content. Its
// all-zero state is an empty frame, so the process-wide builder needs no initialisation.
class CompactBuilder {
 public:
  void text(const char* s, size_t n);  // lines exactly as the JSON form writes them
  // A record in the live file's layout (R_IO: IoLive); returns events.
  int record(const RecHeader* r, int tid, const EncodeCtx& ctx);
  size_t rows() const { return rows_; }
  size_t bytes() const;                     // raw bytes so far (frames are cut on it)
  void finish(Out& out, int pid, int res);  // header + columns into `out`; then empty
  void reset();                             // drop the frame being built (a fork child's)
  bool failed() const;                      // memory ran out while building it
  void release();                           // give the columns' memory back
 private:
  enum {
    kKinds,
    kTids,
    kMasks,
    kGaps,
    kDurs,
    kFiles,
    kHashes,
    kFds,
    kSizes,
    kOffsets,
    kRets,
    kExtras,
    kTextLens,
    kText,
    kStrs,
    kStrText,
    kColumns
  };
  static constexpr int kFileSlots = 8192, kStrSlots = 4096;  // open addressing, <= half full
  static constexpr uint32_t kFileStart = 512;                // the files' first slots
  void times(int tid, int64_t start, int64_t dur);  // tid, gap and dur of an I/O or span row
  void file(uint64_t hash);
  uint32_t file_slot(uint64_t hash) const;  // its slot, or the empty one it would go in
  void grow_files();
  void str(const Str* s);
  void start_small();  // the columns in small_, before the first row
  Out col_[kColumns];
  // Where each column starts: a short process's frames then map no memory for their columns
  // (16 mappings and their first pages: ~50 us of its life).
  char small_[kColumns][512] = {};
  Out tmp_;
  size_t rows_ = 0;
  int prev_tid_ = 0;
  int64_t prev_end_ = 0;
  int n_files_ = 0;  // files listed in this frame
  int n_strs_ = 0;   // names and categories listed in this frame
  // Lookup tables into those lists: slot → key and index + 1 (0: an empty slot).
  uint64_t file_key_[kFileSlots] = {};
  int32_t file_idx_[kFileSlots] = {};
  uint32_t file_mask_ = kFileStart - 1;  // the slots in use, less one
  const Str* str_key_[kStrSlots] = {};
  int32_t str_idx_[kStrSlots] = {};
  int64_t pos_[1024] = {};  // expected position per fd (fds below 1024)
  bool known_[1024] = {};
  bool any_known_ = false;  // some of known_ is set
};

// Does `p` start with the compact magic? (A block cut short still does: it renders damaged.)
bool compact_is(const char* p, size_t n);
// Render one compact block (a frame's whole content) as JSON lines appended to `out`.
// false: the block is damaged (`out` then holds the lines rendered before the damage).
bool compact_render(const char* p, size_t n, Out& out);

}  // namespace iot
