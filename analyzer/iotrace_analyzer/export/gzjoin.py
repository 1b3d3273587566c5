"""One gzip member out of pieces deflated in parallel.

Perfetto decodes only the first gzip member of a file, so the export cannot
simply concatenate .gz files. Each worker instead writes a raw deflate stream
ended by a sync flush (byte-aligned, not final); such streams concatenate into
one deflate stream. The gzip trailer needs the CRC-32 of the whole text, which
`crc32_combine` computes from the pieces' CRCs and lengths.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from typing import BinaryIO

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, unknown OS


class DeflatePiece:
    """Raw deflate of a piece of text, with the CRC and length of that text."""

    def __init__(self, out: BinaryIO, level: int = 6):
        self.out = out
        self.z = zlib.compressobj(level, zlib.DEFLATED, -15)
        self.crc = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.out.write(self.z.compress(data))

    def close(self, final: bool = False) -> None:
        self.out.write(self.z.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH))


class GzipJoiner:
    """Writes one gzip member: header, pieces in order, trailer."""

    def __init__(self, out: BinaryIO):
        self.out = out
        self.crc = 0
        self.size = 0
        out.write(GZIP_HEADER)

    def add_file(self, path: str, crc: int, size: int) -> None:
        """Append a piece that a worker wrote to `path` (DeflatePiece, not final)."""
        with open(path, "rb") as f:
            shutil.copyfileobj(f, self.out, 1 << 20)
        self._account(crc, size)

    def add_text(self, data: bytes, final: bool = False) -> None:
        piece = DeflatePiece(self.out)
        piece.write(data)
        piece.close(final)
        self._account(piece.crc, piece.size)

    def finish(self, tail: bytes) -> None:
        """The last text, closing the deflate stream, and the gzip trailer."""
        self.add_text(tail, final=True)
        self.out.write(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))

    def _account(self, crc: int, size: int) -> None:
        self.crc = crc32_combine(self.crc, crc, size)
        self.size += size


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc(A), crc(B) and len(B) (zlib's crc32_combine, compiled: a part
    per task, and there can be thousands)."""
    from .. import _export

    return _export.crc32_combine(crc1, crc2, len2)
