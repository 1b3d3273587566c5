#include "part.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace iotx {

void FdOut::write(const char* p, size_t n) {
  while (n) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("writing the export: ") + strerror(errno));
    }
    p += k;
    n -= size_t(k);
  }
}

Kind kind_of_phase(std::string_view ph) {
  if (ph == "X") return K_SLICE;
  if (ph == "i" || ph == "I") return K_INSTANT;
  if (ph == "C") return K_COUNTER;
  return K_NONE;
}

void PartWriter::kinds(const BatchView& b) {
  kinds_.resize(size_t(b.ph.values()));
  for (int64_t c = 0; c < b.ph.values(); c++) kinds_[size_t(c)] = kind_of_phase(b.ph.dict.at(c));
}

}  // namespace iotx
