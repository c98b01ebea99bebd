"""The columns evtime adds to the rows it carries, and the bit layout of an arrival number:
the one vocabulary the readers (``evtime.io``), the operators (``evtime.engine``) and the
writer share.  Names only; what fills them is the readers' and the operators' business."""

from __future__ import annotations

# the row's time in int64 ns, the number of its file, its row in that file, its arrival
# number (file in the high bits, row in the low ones) and its chunk (row group or text span)
T, FILE, ROW, SEQ, CHUNK = "_evt_t", "_evt_file", "_evt_row", "_evt_seq", "_evt_chunk"
SEQ_FILE_SHIFT = 40  # SEQ = file << SEQ_FILE_SHIFT | row
CHUNK_SHIFT = 20  # rows of one chunk share SEQ >> CHUNK_SHIFT
BAD = "_evt_bad"  # --bad-rows discard: why the row cannot be used (null: a good row)
PART = "_evt_part"  # the output part of a row (engine.scan.sort_in_parts; the writer)
SPAN = "_evt_span"  # (while reading spans of big text files: which one; -1 - it: malformed)
TEXT = "_evt_text_"  # + a column's name: its text, as written (Layout.texts)
ROUTE = "_evt_route"  # which sink a row goes to ('' = counted, written nowhere)
