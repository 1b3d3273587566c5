// Chrome/Perfetto JSON (`-o job.json.gz`, `-o job.json`) from the columns of a batch: the
// events of one input file as a piece of the `traceEvents` array, each line starting with
// ",\n" (the head the export writes ends with an event). Gzip'd output is a raw deflate stream
// ended by a sync flush, which the export joins with the other pieces into one gzip member
// (gzjoin.py), knowing the CRC-32 and length of the piece's text.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "part.h"

namespace iotx {

class JsonWriter : public PartWriter {
 public:
  // level: zlib level of the deflate stream, 0 for FastDeflate (deflate.h), -1 for plain text.
  JsonWriter(int fd, int64_t vpid, int64_t pid, int level);
  ~JsonWriter() override;
  void encode(const BatchView& b, const int64_t* rows, size_t n, const int64_t* flow_rows,
              const uint64_t* flow_ids, size_t n_flows) override;
  int hold(const BatchView& b, int64_t row, const uint64_t* flows, size_t n_flows) override;
  void release(int slot, uint64_t flow_in, const uint64_t* outs, size_t n_outs) override;
  void thread(int64_t tid, std::string_view name) override;
  void close() override;
  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }  // bytes of text

 private:
  struct Held {
    int64_t tid, ts;
    std::string line;
    std::vector<uint64_t> outs;
  };
  void batch(const BatchView& b);
  void event(const BatchView& b, int64_t r, Kind kind, Buf& out);
  void args(const BatchView& b, int64_t r, Buf& out);
  const std::string& quoted(std::vector<std::string>& cache, const DictCol& col, int64_t r);
  void flow(char ph, uint64_t id, int64_t tid, int64_t ts);
  void flush(bool sync);

  int64_t vpid_;
  int level_;
  Buf text_, line_;
  std::string scratch_;
  // per dictionary code of the batch: the value as a JSON string ("" until first used)
  std::vector<std::string> q_ph_, q_name_, q_cat_, q_value_[3];
  std::vector<Held> held_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
  struct Z;
  std::unique_ptr<Z> z_;
};

}  // namespace iotx
