// A fast zlib stream (RFC 1950/1951) of one buffer, for `compressed_packets` (and raw deflate
// pieces for the gzip'd JSON): greedy LZ77 with a one-probe hash table, then dynamic Huffman
// blocks. zlib's own level 1 runs at about 110 MB/s
// on the packets of a trace, which made compression most of the export's time; this one is
// several times faster for a slightly bigger output. Anything that inflates zlib reads it
// (Perfetto, Python's zlib).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

namespace iotx {

class FastDeflate {
 public:
  FastDeflate();
  // The zlib stream of p[0, n); valid until the next call.
  std::string_view compress(const char* p, size_t n);
  // Raw deflate of p[0, n) ended as a sync flush ends (not final, byte-aligned): such pieces
  // concatenate into one deflate stream (a gzip member of several of them).
  std::string_view piece(const char* p, size_t n);

 private:
  void start(size_t n);
  void deflate(const uint8_t* p, size_t n, bool final);
  void flush_bits();
  void block(bool final);
  std::vector<uint32_t> head_;  // hash -> position + base of the last 4 bytes seen there
  uint32_t base_ = 1 << 16;     // positions of this buffer are p - start + base_ (0: an empty slot)
  std::vector<uint32_t> tokens_;  // literal: byte; match: 1 << 31 | (len - 3) << 16 | (dist - 1)
  size_t ntok_ = 0;
  uint32_t lit_freq_[286], dist_freq_[30];
  std::string out_;
  size_t pos_ = 0;     // bytes of out_ written
  uint64_t bits_ = 0;  // bits not yet in out_ (block() keeps them in locals while it writes)
  int nbits_ = 0;
};

}  // namespace iotx
