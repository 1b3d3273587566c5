// A compact block straight into columns (columns.h): the column decoder, a visitor of
// compact_walk like the JSON renderer, so both read the block by the same rules. I/O rows
// become rows without any JSON text; text rows (metadata, instants, counters) and span rows'
// args go through the JSON scanner.
#pragma once
#include <stddef.h>

#include "columns.h"

namespace iot {

// false: the block is damaged (the rows before the damage are in `cols`).
bool decode_compact(const char* p, size_t n, EventColumns& cols);

}  // namespace iot
