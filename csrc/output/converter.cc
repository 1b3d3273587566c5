#include "converter.h"

#include <errno.h>
#include <string.h>

#include "message.h"
#include "metadata.h"

namespace iot {

namespace {
constexpr size_t kFrameBytes = 4 << 20;  // text per zstd frame: large frames compress better
constexpr size_t kCompactRows = 65536;   // rows per compact frame (~1 B/event there, 1.5 at 4096)
}  // namespace

void Converter::setup(const ConverterSetup& s) { cfg_ = s; }

void Converter::attach(const TraceFileId& file, uint64_t size, const char* head, size_t head_len) {
  sink_.attach(file, size, cfg_.compression, cfg_.level);
  head_ = head;
  head_len_ = head_len;
  started_ = size > 0;
  if (!started_) {  // a new file (after an exec that failed: the old one has its end) counts anew
    file_events_ = lost_ = lost_unsaid_ = dropped_total_ = drops_said_ = 0;
    lost_errno_ = 0;
  }
  new_generation();             // past every generation this memory has seen (a fork child's too)
  if (!started_) begin_text();  // the next frame written starts the file, records or not
}

void Converter::resume_counts(uint64_t events, uint64_t lost, uint64_t unsaid, uint64_t drops_said,
                              int lost_errno) {
  file_events_ = events;
  lost_ = lost;
  lost_unsaid_ = unsaid;
  drops_said_ = drops_said;
  lost_errno_ = lost_errno;
}

void Converter::release() {
  text_.release();
  compact_.release();
  sink_.release_buffers();
}

void Converter::forget() {
  sink_.abandon();
  text_.n = 0;  // its mapping is this process's own copy now
  compact_.reset();
  started_ = false;
  file_events_ = frame_events_ = 0;
  frame_has_loss_ = false;
  lost_ = lost_unsaid_ = dropped_total_ = drops_said_ = 0;
  lost_errno_ = 0;
  quiet_failed_ = false;
}

void Converter::append_text(const char* s, size_t n) {
  if (cfg_.compact)
    compact_.text(s, n);
  else
    text_.put(s, n);
}

void Converter::emit(const char* s, size_t n) {
  append_text(s, n);
  cut_if_full();
}

// An event line the converter writes itself (metadata), counted like the others.
void Converter::emit_line(const Out& o) {
  frame_events_++;
  emit(o.p, o.n);
}

// The start of the file's text, `[` and the process's header lines, into the (empty) frame.
void Converter::begin_text() {
  started_ = true;
  append_text("[\n", 2);
  uint64_t lines = 0;
  for (size_t i = 0; i < head_len_; i++) lines += head_[i] == '\n';
  frame_events_ += lines;
  emit(head_, head_len_);
}

// FH lines and thread names are written once per generation (a file, or what follows a lost
// frame of it, or the part a recovery appends).
void Converter::new_generation() { gen_++; }

size_t Converter::frame_rows() const { return cfg_.compact ? compact_.rows() : text_.n; }

// The compact frame's bytes are summed over its columns: looked at every 64th row, not at
// every row (it was a tenth of the writer's instructions per event).
void Converter::cut_if_full() {
  if (cfg_.compact ? compact_.rows() >= kCompactRows ||
                         ((compact_.rows() & 63) == 0 && compact_.bytes() >= kFrameBytes)
                   : text_.n >= kFrameBytes)
    frame_write();
}

int Converter::record(const RecHeader* r, int tid, const ClockMap& clk) {
  if (!started_) begin_text();
  EncodeCtx ctx{cfg_.pid, gen_, clk, cfg_.res_ns, &prefix_};
  int events = cfg_.compact ? compact_.record(r, tid, ctx) : encode_record(text_, r, tid, ctx);
  frame_events_ += uint64_t(events);
  cut_if_full();
  return events;
}

void Converter::thread_name(int tid, const char* name, size_t len) {
  if (!started_) begin_text();
  char buf[512];
  Out o(buf, sizeof buf);
  meta_thread_name(o, cfg_.pid, tid, name, len);
  emit_line(o);
  o.release();
}

// `{"ph":"M","name":"iotrace_lost",...}`: events of this process that are not in the file
// (their frame could not be written, or no buffer could be had), and why.
void Converter::emit_loss_record() {
  char buf[512];
  Out o(buf, sizeof buf);
  const char* why = lost_errno_ ? strerrordesc_np(lost_errno_) : "no trace buffer could be had";
  meta_lost(o, cfg_.pid, lost_unsaid_, why ? why : "write error");
  frame_events_++;
  append_text(o.p, o.n);  // no cut here: frame_write is on its way
  o.release();
  frame_has_loss_ = true;
}

// Events lost or dropped and not yet told go into the frame being built, as one record.
void Converter::tell_losses() {
  if (dropped_total_ > drops_said_ && sink_.is_open()) {
    lost_unsaid_ += dropped_total_ - drops_said_;
    drops_said_ = dropped_total_;
    if (!lost_errno_) {
      say_once(kMsgDropped, "events were dropped (no trace buffer could be had); ",
               "the trace counts them (iotrace_lost)");
    }
  }
  if (lost_unsaid_ && !frame_has_loss_ && sink_.is_open()) {
    if (!started_) begin_text();
    emit_loss_record();
  }
}

// The frame being built: JSON text, or compact rows. A frame that cannot be written is
// counted as lost and told in the next frame that can. `last`: the end of the file, which
// may use the room the sink keeps for it on a full disk.
bool Converter::frame_write(bool last) {
  tell_losses();
  bool no_memory = cfg_.compact && compact_.failed();
  if (cfg_.compact) {
    text_.n = 0;
    if (compact_.rows()) compact_.finish(text_, cfg_.pid, cfg_.res_ns);
  }
  no_memory = no_memory || text_.failed;
  bool ok = true;
  if (no_memory) {
    // The frame's text could not be held: it is lost, and counted (the memory may be back for
    // the next frame).
    ok = false;
    sink_.set_error(ENOMEM);
    text_.release();
    if (hooks_.before) hooks_.before(hooks_.arg, sink_.size(), sink_.size(), 0);
  } else if (text_.n) {
    WriteHook hook{on_write, this};
    ok = sink_.write(text_.p, text_.n, last, hooks_.before ? &hook : nullptr);
  } else if (hooks_.before) {
    hooks_.before(hooks_.arg, sink_.size(), sink_.size(), 0);
  }
  text_.n = 0;
  uint64_t lines = frame_events_, told = frame_has_loss_ ? 1 : 0;
  frame_events_ = 0;
  frame_has_loss_ = false;
  if (ok) {
    file_events_ += lines;
    if (told) lost_unsaid_ = 0;
    if (hooks_.after) hooks_.after(hooks_.arg, true);
    return true;
  }
  lost_ += lines - told;
  lost_unsaid_ += lines - told;
  lost_errno_ = sink_.error();
  quiet_failed_ = quiet_failed_ || quiet_losses_;
  if (lost_errno_ == ESTALE) {
    say_once(kMsgReplaced, sink_.path(), ": the trace file was replaced by another file or a ",
             "symlink; it is not written to any more");
  } else if (!quiet_losses_) {
    say_lost("; events are being lost (the trace counts them: iotrace_lost)");
  }
  // The lost frame may have held the first FH line of a file or a thread's name: the next
  // frames write them again. A file that holds nothing yet starts again, header first.
  new_generation();
  if (sink_.size() == 0) started_ = false;
  if (hooks_.after) hooks_.after(hooks_.arg, false);
  return false;
}

void Converter::on_write(void* self, uint64_t from, uint64_t to) {
  auto* c = static_cast<Converter*>(self);
  c->hooks_.before(c->hooks_.arg, from, to, c->frame_events_);
}

void Converter::end(const char* reason, int tid, int64_t mono_ns, int64_t cpu_ns,
                    int64_t mpi_cpu_ns, int64_t host_cpu_wait_us, int64_t cpu_wait_ns) {
  if (!sink_.is_open()) return;
  if (!started_) begin_text();
  frame_write();  // what is pending, as any frame
  // The loss record, if any, and the end marker: one small frame, in the room kept for it.
  tell_losses();
  char buf[512];
  Out o(buf, sizeof buf);
  meta_end(o, cfg_.pid, tid, mono_ns, file_events_ + frame_events_, reason, lost_, dropped_total_,
           cpu_ns, mpi_cpu_ns, host_cpu_wait_us, cpu_wait_ns);
  append_text(o.p, o.n);
  bool ended = frame_write(/*last=*/true);
  o.release();
  sink_.close();
  // The last frames, when one could not be written: with the end in the file (the room kept for
  // it), that frame's records were given up for lost, and counted; else they stay in the live
  // file, for a reader to finish the file with.
  if (quiet_failed_ && lost_errno_ != ESTALE)
    say_lost(ended ? "; its last events were lost (the trace counts them: iotrace_lost)"
                   : "; its last events stay in its live file, for a reader to finish");
}

void Converter::say_lost(const char* what) {
  const char* why = strerrordesc_np(lost_errno_);
  say_once(kMsgLost, "cannot write ", sink_.path(), ": ", why ? why : "write error", what);
}

}  // namespace iot
