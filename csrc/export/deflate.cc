#include "deflate.h"

#include <string.h>
#include <zlib.h>

#include <algorithm>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace iotx {

namespace {

constexpr int kHashBits = 15;
constexpr size_t kBlockTokens = 1 << 16;  // tokens per Huffman block
constexpr uint32_t kMatch = 1u << 31;  // a match token: length and distance symbols, extra values

// RFC 1951 3.2.5: lengths 3..258 and distances 1..32768 as a symbol and extra bits.
constexpr uint16_t kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                   31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                   2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
constexpr uint8_t kClOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

struct Tables {
  uint8_t len_code[256];     // length - 3 -> 0..28
  uint8_t dist_code[32768];  // distance - 1 -> 0..29
  Tables() {
    for (int c = 0; c < 29; c++)
      for (int l = kLenBase[c]; l < kLenBase[c] + (1 << kLenExtra[c]) && l <= 258; l++)
        len_code[l - 3] = uint8_t(c);
    len_code[255] = 28;  // 258 has a code of its own
    for (int c = 0; c < 30; c++)
      for (int d = kDistBase[c]; d < kDistBase[c] + (1 << kDistExtra[c]) && d <= 32768; d++)
        dist_code[d - 1] = uint8_t(c);
  }
};
const Tables kTables;

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

// Huffman code lengths for freq[0, n), at most max_len bits (0 for unused symbols): minimum
// redundancy lengths (Moffat and Katajainen, in place on the sorted frequencies), then the
// longest ones cut down keeping the Kraft sum (as miniz does).
void code_lengths(const uint32_t* freq, int n, int max_len, uint8_t* lens) {
  struct Sym {
    uint32_t key;
    uint16_t sym;
  };
  Sym a[288];
  int m = 0;
  for (int i = 0; i < n; i++) {
    lens[i] = 0;
    if (freq[i]) a[m++] = Sym{freq[i], uint16_t(i)};
  }
  if (m == 0) return;
  if (m == 1) {
    lens[a[0].sym] = 1;
    return;
  }
  std::sort(a, a + m, [](const Sym& x, const Sym& y) { return x.key < y.key; });
  Sym sorted[288];
  std::copy(a, a + m, sorted);
  a[0].key += a[1].key;
  int root = 0, leaf = 2;
  for (int next = 1; next < m - 1; next++) {
    if (leaf >= m || a[root].key < a[leaf].key) {
      a[next].key = a[root].key;
      a[root++].key = uint32_t(next);
    } else {
      a[next].key = a[leaf++].key;
    }
    if (leaf >= m || (root < next && a[root].key < a[leaf].key)) {
      a[next].key += a[root].key;
      a[root++].key = uint32_t(next);
    } else {
      a[next].key += a[leaf++].key;
    }
  }
  a[m - 2].key = 0;
  for (int next = m - 3; next >= 0; next--) a[next].key = a[a[next].key].key + 1;
  int avbl = 1, used = 0, depth = 0;
  root = m - 2;
  int next = m - 1;
  while (avbl > 0) {
    while (root >= 0 && int(a[root].key) == depth) used++, root--;
    while (avbl > used) a[next--].key = uint32_t(depth), avbl--;
    avbl = 2 * used;
    depth++;
    used = 0;
  }
  int count[33] = {0};
  for (int i = 0; i < m; i++) count[std::min<uint32_t>(a[i].key, 32)]++;
  for (int l = max_len + 1; l <= 32; l++) count[max_len] += count[l], count[l] = 0;
  uint32_t total = 0;
  for (int l = max_len; l > 0; l--) total += uint32_t(count[l]) << (max_len - l);
  while (total != (1u << max_len)) {  // too many long codes: lengthen a shorter one
    count[max_len]--;
    for (int l = max_len - 1; l > 0; l--)
      if (count[l]) {
        count[l]--;
        count[l + 1] += 2;
        break;
      }
    total--;
  }
  // the most frequent symbols (the end of `sorted`) get the shortest codes
  int j = m;
  for (int l = 1; l <= max_len; l++)
    for (int k = count[l]; k > 0; k--) lens[sorted[--j].sym] = uint8_t(l);
}

// Canonical codes for the lengths, bit-reversed (deflate sends Huffman codes MSB first).
void codes(const uint8_t* lens, int n, uint16_t* out) {
  int count[16] = {0};
  for (int i = 0; i < n; i++) count[lens[i]]++;
  count[0] = 0;
  int next[16] = {0};
  for (int l = 1, code = 0; l < 16; l++) {
    code = (code + count[l - 1]) << 1;
    next[l] = code;
  }
  for (int i = 0; i < n; i++) {
    int l = lens[i];
    if (!l) continue;
    uint32_t c = uint32_t(next[l]++), r = 0;
    for (int b = 0; b < l; b++) r = r << 1 | ((c >> b) & 1);
    out[i] = uint16_t(r);
  }
}

// Bits to bytes, LSB first, in locals (members would be reloaded after every byte stored).
struct BitOut {
  char* o;
  uint64_t bits;
  int n;
  void put(uint64_t v, int k) {
    bits |= v << n;
    n += k;
    if (n >= 32) {
      uint32_t w = uint32_t(bits);
      memcpy(o, &w, 4);  // little-endian
      o += 4;
      bits >>= 32;
      n -= 32;
    }
  }
};

// Adler-32 (the zlib trailer), 32 bytes a step with SSSE3 where the CPU has it (zlib's own is a
// byte at a time: a seventh of the compressor's time). After Chromium's adler32_simd.c.
#if defined(__x86_64__)
__attribute__((target("ssse3"))) uint32_t adler32_ssse3(uint32_t adler, const uint8_t* buf,
                                                        size_t len) {
  constexpr uint32_t kBase = 65521, kNmax = 5552, kBlock = 32;
  uint32_t s1 = adler & 0xffff, s2 = adler >> 16;
  size_t blocks = len / kBlock;
  len -= blocks * kBlock;
  const __m128i tap1 =
      _mm_setr_epi8(32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17);
  const __m128i tap2 = _mm_setr_epi8(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m128i zero = _mm_setzero_si128();
  const __m128i ones = _mm_set1_epi16(1);
  while (blocks) {
    size_t n = std::min<size_t>(kNmax / kBlock, blocks);
    blocks -= n;
    __m128i v_ps = _mm_set_epi32(0, 0, 0, int(s1 * uint32_t(n)));
    __m128i v_s2 = _mm_set_epi32(0, 0, 0, int(s2));
    __m128i v_s1 = _mm_setzero_si128();
    do {
      const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
      const __m128i b2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 16));
      v_ps = _mm_add_epi32(v_ps, v_s1);
      v_s1 = _mm_add_epi32(v_s1, _mm_sad_epu8(b1, zero));
      v_s2 = _mm_add_epi32(v_s2, _mm_madd_epi16(_mm_maddubs_epi16(b1, tap1), ones));
      v_s1 = _mm_add_epi32(v_s1, _mm_sad_epu8(b2, zero));
      v_s2 = _mm_add_epi32(v_s2, _mm_madd_epi16(_mm_maddubs_epi16(b2, tap2), ones));
      buf += kBlock;
    } while (--n);
    v_s2 = _mm_add_epi32(v_s2, _mm_slli_epi32(v_ps, 5));
    v_s1 = _mm_add_epi32(v_s1, _mm_shuffle_epi32(v_s1, _MM_SHUFFLE(1, 0, 3, 2)));
    s1 += uint32_t(_mm_cvtsi128_si32(v_s1));
    v_s2 = _mm_add_epi32(v_s2, _mm_shuffle_epi32(v_s2, _MM_SHUFFLE(2, 3, 0, 1)));
    v_s2 = _mm_add_epi32(v_s2, _mm_shuffle_epi32(v_s2, _MM_SHUFFLE(1, 0, 3, 2)));
    s2 = uint32_t(_mm_cvtsi128_si32(v_s2));
    s1 %= kBase;
    s2 %= kBase;
  }
  while (len--) {
    s1 += *buf++;
    s2 += s1;
  }
  return (s1 % kBase) | (s2 % kBase) << 16;
}
#endif

uint32_t adler(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  static const bool ssse3 = __builtin_cpu_supports("ssse3");
  if (ssse3) return adler32_ssse3(1, p, n);
#endif
  return uint32_t(adler32(1, p, uInt(n)));
}

}  // namespace

FastDeflate::FastDeflate() : head_(size_t(1) << kHashBits, 0), tokens_(kBlockTokens + 8) {}

void FastDeflate::block(bool final) {
  lit_freq_[256] = 1;             // end of block
  if (!ntok_) lit_freq_[0] |= 1;  // codes of two symbols at least: complete ones
  int used_dist = 0;
  for (uint32_t f : dist_freq_) used_dist += f != 0;
  if (used_dist < 2) dist_freq_[0] |= 1, dist_freq_[1] |= 1;  // a complete distance code
  uint8_t llen[286], dlen[30];
  uint16_t lcode[286] = {0}, dcode[30] = {0};
  code_lengths(lit_freq_, 286, 15, llen);
  code_lengths(dist_freq_, 30, 15, dlen);
  codes(llen, 286, lcode);
  codes(dlen, 30, dcode);
  int hlit = 286, hdist = 30;
  while (hlit > 257 && !llen[hlit - 1]) hlit--;
  while (hdist > 1 && !dlen[hdist - 1]) hdist--;

  // the code lengths, run-length coded (16: repeat the previous, 17/18: zeros)
  uint8_t all[316];
  memcpy(all, llen, size_t(hlit));
  memcpy(all + hlit, dlen, size_t(hdist));
  int total = hlit + hdist;
  std::pair<uint8_t, uint8_t> rle[316];  // symbol, extra
  int nr = 0;
  for (int i = 0; i < total;) {
    uint8_t l = all[i];
    int run = 1;
    while (i + run < total && all[i + run] == l) run++;
    i += run;
    if (l == 0) {
      while (run >= 11) {
        int r = std::min(run, 138);
        rle[nr++] = {18, uint8_t(r - 11)};
        run -= r;
      }
      if (run >= 3) {
        rle[nr++] = {17, uint8_t(run - 3)};
        run = 0;
      }
    } else {
      rle[nr++] = {l, 0};
      run--;
      while (run >= 3) {
        int r = std::min(run, 6);
        rle[nr++] = {16, uint8_t(r - 3)};
        run -= r;
      }
    }
    while (run-- > 0) rle[nr++] = {l, 0};
  }
  uint32_t cl_freq[19] = {0};
  for (int i = 0; i < nr; i++) cl_freq[rle[i].first]++;
  int used_cl = 0;
  for (uint32_t f : cl_freq) used_cl += f != 0;
  if (used_cl < 2) cl_freq[cl_freq[0] ? 1 : 0]++;
  uint8_t cl_len[19];
  uint16_t cl_code[19] = {0};
  code_lengths(cl_freq, 19, 7, cl_len);
  codes(cl_len, 19, cl_code);
  int hclen = 19;
  while (hclen > 4 && !cl_len[kClOrder[hclen - 1]]) hclen--;

  BitOut b{&out_[pos_], bits_, nbits_};
  b.put(final ? 1 : 0, 1);
  b.put(2, 2);  // dynamic Huffman
  b.put(uint64_t(hlit - 257), 5);
  b.put(uint64_t(hdist - 1), 5);
  b.put(uint64_t(hclen - 4), 4);
  for (int i = 0; i < hclen; i++) b.put(cl_len[kClOrder[i]], 3);
  for (int i = 0; i < nr; i++) {
    uint8_t s = rle[i].first;
    b.put(cl_code[s], cl_len[s]);
    if (s == 16)
      b.put(rle[i].second, 2);
    else if (s == 17)
      b.put(rle[i].second, 3);
    else if (s == 18)
      b.put(rle[i].second, 7);
  }
  // per length and distance symbol: its code, the bits before its extra bits, and all bits
  uint32_t lsym[29], lshift[29], lbits[29], dsym[30], dshift[30], dbits[30];
  for (int c = 0; c < 29; c++)
    lsym[c] = lcode[257 + c], lshift[c] = llen[257 + c], lbits[c] = llen[257 + c] + kLenExtra[c];
  for (int c = 0; c < 30; c++)
    dsym[c] = dcode[c], dshift[c] = dlen[c], dbits[c] = dlen[c] + kDistExtra[c];
  const uint32_t* tok = tokens_.data();
  for (size_t k = 0; k < ntok_; k++) {
    uint32_t t = tok[k];
    if (!(t & kMatch)) {
      b.put(lcode[t], llen[t]);
      continue;
    }
    uint32_t lc = (t >> 26) & 31, lx = (t >> 18) & 31, dc = (t >> 13) & 31, dx = t & 0x1FFF;
    b.put(lsym[lc] | uint64_t(lx) << lshift[lc], int(lbits[lc]));
    b.put(dsym[dc] | uint64_t(dx) << dshift[dc], int(dbits[dc]));
  }
  b.put(lcode[256], llen[256]);
  pos_ = size_t(b.o - out_.data());
  bits_ = b.bits;
  nbits_ = b.n;
  ntok_ = 0;
  memset(lit_freq_, 0, sizeof lit_freq_);
  memset(dist_freq_, 0, sizeof dist_freq_);
}

void FastDeflate::start(size_t n) {
  // room for the worst case: 15 bits a literal, block headers
  size_t need = n * 2 + 1024 + (n / kBlockTokens + 1) * 320;
  if (out_.size() < need) out_.resize(need);
  pos_ = 0;
  bits_ = 0;
  nbits_ = 0;
}

void FastDeflate::flush_bits() {
  while (nbits_ > 0) {  // the last bits, to a byte boundary
    out_[pos_++] = char(bits_);
    bits_ >>= 8;
    nbits_ -= 8;
  }
  bits_ = 0;
  nbits_ = 0;
}

std::string_view FastDeflate::compress(const char* data, size_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data);
  start(n);
  out_[pos_++] = char(0x78);  // deflate, 32 KiB window
  out_[pos_++] = char(0x01);  // fastest; (0x78 << 8 | 0x01) % 31 == 0
  deflate(p, n, true);
  flush_bits();
  uint32_t check = adler(p, n);
  for (int s = 24; s >= 0; s -= 8) out_[pos_++] = char(check >> s);
  return std::string_view(out_.data(), pos_);
}

std::string_view FastDeflate::piece(const char* data, size_t n) {
  start(n);
  deflate(reinterpret_cast<const uint8_t*>(data), n, false);
  // an empty stored block, as a sync flush ends: byte-aligned, pieces concatenate
  BitOut b{&out_[pos_], bits_, nbits_};
  b.put(0, 3);
  pos_ = size_t(b.o - out_.data());
  bits_ = b.bits;
  nbits_ = b.n;
  flush_bits();
  const char marker[4] = {0, 0, char(0xFF), char(0xFF)};
  memcpy(&out_[pos_], marker, 4);
  pos_ += 4;
  return std::string_view(out_.data(), pos_);
}

void FastDeflate::deflate(const uint8_t* p, size_t n, bool final) {
  if (base_ > (1u << 31) - n - 65536) {  // positions would wrap: forget them
    std::fill(head_.begin(), head_.end(), 0);
    base_ = 1 << 16;
  }
  memset(lit_freq_, 0, sizeof lit_freq_);
  memset(dist_freq_, 0, sizeof dist_freq_);
  ntok_ = 0;
  // The loop keeps its state in locals: stores through byte pointers would make the compiler
  // reload members.
  const uint32_t base = base_;
  uint32_t* head = head_.data();
  uint32_t* tok = tokens_.data();
  uint32_t* lit_freq = lit_freq_;
  uint32_t* dist_freq = dist_freq_;
  size_t nt = 0;
  size_t i = 0;
  // the next position's slot is fetched while this one is looked at: the table is bigger
  // than L1, and most positions are a literal (the next one is next)
  uint32_t hn = n >= 8 ? (load32(p) * 0x9E3779B1u) >> (32 - kHashBits) : 0;
  while (i + 8 <= n) {
    uint32_t v = load32(p + i);
    uint32_t h = hn;
    hn = (load32(p + i + 1) * 0x9E3779B1u) >> (32 - kHashBits);
    __builtin_prefetch(&head[hn]);
    uint32_t cand = head[h];
    head[h] = uint32_t(i) + base;
    // (an empty slot, 0, or one of an earlier buffer is more than a window away: base_
    // starts above it and grows by more than a window a buffer)
    if (uint32_t(i) + base - cand <= 32768 && load32(p + (cand - base)) == v) {
      const uint8_t* c = p + (cand - base);
      size_t len = 4, max = std::min<size_t>(258, n - i);
      while (len + 8 <= max) {  // eight bytes at a time
        uint64_t x = load64(p + i + len) ^ load64(c + len);
        if (x) {
          len += size_t(__builtin_ctzll(x) >> 3);
          goto found;
        }
        len += 8;
      }
      while (len < max && p[i + len] == c[len]) len++;
    found:
      uint32_t dist = uint32_t(p + i - c);
      uint32_t lc = kTables.len_code[len - 3], dc = kTables.dist_code[dist - 1];
      tok[nt++] = kMatch | lc << 26 | (uint32_t(len) - kLenBase[lc]) << 18 | dc << 13 |
                  (dist - kDistBase[dc]);
      lit_freq[257 + lc]++;
      dist_freq[dc]++;
      // the match's last positions are likely starts of the next repeats (every position:
      // 2% smaller, 25% more instructions)
      for (size_t k = i + len - 2; k < i + len && k + 4 <= n; k++)
        head[(load32(p + k) * 0x9E3779B1u) >> (32 - kHashBits)] = uint32_t(k) + base;
      i += len;
      if (i + 8 <= n) hn = (load32(p + i) * 0x9E3779B1u) >> (32 - kHashBits);
    } else {
      tok[nt++] = p[i];
      lit_freq[p[i]]++;
      i++;
    }
    if (nt >= kBlockTokens) {
      ntok_ = nt;
      block(false);
      nt = 0;
    }
  }
  for (; i < n; i++) {
    tok[nt++] = p[i];
    lit_freq[p[i]]++;
  }
  ntok_ = nt;
  block(final);
  base_ += uint32_t(n) + 32769;
}

}  // namespace iotx
