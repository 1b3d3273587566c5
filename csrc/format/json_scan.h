// JSON event lines into columns (columns.h): the tracer's JSON form, the text rows of the
// compact form, and the traces of DFTracer 1.x (string `ph`, `[` line) and 2.x (numeric `ph`: 1
// a complete event, 4 metadata; integer µs since the epoch; no `[`, no commas). One pass over
// each line, no allocation for lines without escapes. A line that is not one JSON object is
// counted as bad, never guessed at.
#pragma once
#include <stddef.h>

#include <string_view>

#include "columns.h"

namespace iot {

// Every line of a block of text (each line may end in `,` or `]`; `[` lines are skipped).
// `before_scan(ctx)`, when given, is called before a line that may add a row (any but a
// file-name line taken apart): the compact decoder's columns are then made exact for pushes.
void scan_lines(const char* p, size_t n, EventColumns& cols, void (*before_scan)(void*) = nullptr,
                void* ctx = nullptr);

// The args of one event: the known keys into their columns, the object itself into `args`
// when it holds others. `body` is the object's text without its braces (a span row's args);
// appends exactly one value to each args column.
void scan_args_body(std::string_view body, EventColumns& cols);

}  // namespace iot
