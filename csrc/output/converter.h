// Records in, a trace file out: the frames (JSON text or compact columns) a process's records
// become, the metadata lines the file needs around them (its start, FH lines, thread names,
// losses, the end), and what could not be written. One per trace file being written: the
// process's own writer has one; finishing the live file of a process that died makes another
// (recover.cc), possibly in the same process. Single-threaded: its owner serialises calls.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "compact.h"
#include "config.h"
#include "encoder.h"
#include "sink.h"

namespace iot {

struct ConverterSetup {
  int pid = 0;
  bool compact = true;
  Compression compression = Compression::zstd;
  int level = 1;
  int res_ns = 1;
};

// What the owner of the records learns of each frame: before its bytes go to the file (the
// file's size before and after, the frame's lines; `from == to` for a frame with no bytes),
// then whether it is in the file.
struct FrameHooks {
  void (*before)(void* arg, uint64_t from, uint64_t to, uint64_t lines);
  void (*after)(void* arg, bool ok);
  void* arg;
};

class Converter {
 public:
  void setup(const ConverterSetup& s);
  void set_hooks(const FrameHooks& h) { hooks_ = h; }
  // The trace file, created empty when the process started (Sink::create) or written in part
  // already (`size` bytes of whole frames). A file that holds no frame yet gets the start of
  // the text (`[` and `head`: the process's header lines, kept by the caller) with the next
  // frame; one that does is continued as a new generation (FH lines and thread names again).
  void attach(const TraceFileId& file, uint64_t size, const char* head, size_t head_len);
  // A fork child: the parent's file and the frame being built are the parent's.
  void forget();
  // What the file held and told when another converter stopped writing it (a recovery's
  // start): its event lines, the lines lost, of the losses and drops those not told yet, the
  // drops told, and why lines were lost (errno, 0: none).
  void resume_counts(uint64_t events, uint64_t lost, uint64_t unsaid = 0, uint64_t drops_said = 0,
                     int lost_errno = 0);
  // Give back the memory of the frames and the compressor (a converter used once).
  void release();
  // The process's last frames: one that cannot be written stays in the live file unless a
  // later one (the end's) is written. The user is told which at the end, not at once.
  void set_quiet_losses(bool q) {
    quiet_losses_ = q;
    quiet_failed_ = false;
  }
  Sink& sink() { return sink_; }
  bool writable() const { return sink_.is_open(); }

  // One record of thread `tid`; returns the event lines it made. Cuts a full frame.
  int record(const RecHeader* r, int tid, const ClockMap& clk);
  // A thread's name, once per generation (`named` is the caller's flag for that thread).
  void thread_name(int tid, const char* name, size_t len);
  uint32_t generation() const { return gen_; }
  // Events that never reached a buffer (the process's running total): told in the next frame.
  void set_dropped(uint64_t total) { dropped_total_ = total; }
  // Write the frame being built. false: it could not be written (counted as lost, told later).
  bool frame_write(bool last = false);
  size_t frame_rows() const;
  // The loss record if any, the end marker, then close the file.
  void end(const char* reason, int tid, int64_t mono_ns, int64_t cpu_ns = -1,
           int64_t mpi_cpu_ns = -1, int64_t host_cpu_wait_us = -1, int64_t cpu_wait_ns = -1);

  uint64_t file_events() const { return file_events_; }
  uint64_t lost() const { return lost_; }
  uint64_t lost_unsaid() const { return lost_unsaid_; }
  uint64_t drops_said() const { return drops_said_; }
  int lost_errno() const { return lost_errno_; }
  bool file_started() const { return started_; }

 private:
  void begin_text();
  void new_generation();
  void append_text(const char* s, size_t n);
  void emit(const char* s, size_t n);
  void emit_line(const Out& o);
  void cut_if_full();
  void tell_losses();
  void emit_loss_record();
  void say_lost(const char* what);
  static void on_write(void* self, uint64_t from, uint64_t to);

  ConverterSetup cfg_;
  FrameHooks hooks_{};
  Sink sink_;
  Out text_;                // the frame being built (JSON form), or the compact frame's bytes
  CompactBuilder compact_;  // the frame being built (compact form)
  IoPrefixCache prefix_;
  const char* head_ = "";
  size_t head_len_ = 0;
  bool quiet_losses_ = false;
  bool quiet_failed_ = false;  // one of the last frames could not be written
  bool started_ = false;       // the file's start (`[`, header lines) is written or in the frame
  uint32_t gen_ = 1;           // FH lines and thread names are written once per generation
  uint64_t file_events_ = 0;   // event lines written to the file
  uint64_t frame_events_ = 0;
  bool frame_has_loss_ = false;
  uint64_t lost_ = 0;         // event lines lost to failed writes
  uint64_t lost_unsaid_ = 0;  // of them and of the drops, not yet told by an iotrace_lost record
  uint64_t dropped_total_ = 0, drops_said_ = 0;
  int lost_errno_ = 0;  // why (0: no buffer could be had)
};

}  // namespace iot
