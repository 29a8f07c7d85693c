"""The claim step over a packed PEL, pure Python: the reference of `_pel_claim_c.pyx`.

A claim (XAUTOCLAIM, XCLAIM) works on many pending IDs at once: `scan` picks them from the
group's PEL chunks (ms, seq, delivery time, count, owner columns, as `pel_store.PendingTable`
keeps them), `claim` rewrites their rows in place, and `remove_sorted` takes a batch of IDs out
of a consumer's packed set (ms, seq columns, `pel_store.PackedIDs`) in one pass a chunk.
Must not touch: anything but those columns (what the rows mean, the delivery-time buckets and
the consumers are `engine.model.consumer_groups`'s).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable

from streamkeep.engine.model.pel_search import find

_LOW = (1 << 64) - 1
NO_OWNER = -1  # the owner column of an entry XNACK released (pel_store.NO_OWNER)


def _check_ids(ms: array, seq: array) -> None:
    if ms.typecode != "Q" or seq.typecode != "Q" or len(ms) != len(seq):
        raise TypeError("a packed chunk wants two array('Q') ID columns of one length")


def _check_row(chunk: tuple[array, ...]) -> None:
    ms, seq, times, counts, owners = chunk
    _check_ids(ms, seq)
    if (times.typecode != "q" or counts.typecode != "Q" or owners.typecode != "i"
            or not len(times) == len(counts) == len(owners) == len(ms)):
        raise TypeError("a PEL chunk wants q, Q and i columns as long as its IDs")


def scan(maxes: list[int], chunks: list[tuple[array, ...]], start: int, min_idle: int,
         now: int, count: int, attempts: int, inc: int,
         get: Callable[[int], object | None],
         ) -> tuple[list[int], list[int], list[object | None], int | None]:
    """XAUTOCLAIM's walk: from the first pending ID >= `start`, look at up to `attempts` rows
    and pick up to `count` of them: those whose entry is gone (`get` of the ID is None), then
    those idle for at least `min_idle` (0: all) at `now`, and those XNACK released (no owner)
    whatever their idle time. Returns the picked IDs, their delivery counts plus `inc`, what
    `get` gave for each (None: gone), and the ID after the last row looked at (None: the
    end)."""
    sids: list[int] = []
    counts: list[int] = []
    got: list[object | None] = []
    c = bisect_left(maxes, start)
    if c == len(chunks):
        return sids, counts, got, None
    _check_ids(chunks[c][0], chunks[c][1])
    j = find(chunks[c][0], chunks[c][1], start >> 64, start & _LOW)
    if j < 0:
        j = -1 - j
    # idle >= min_idle is now - time >= min_idle, written so no difference can overflow
    oldest = now - min_idle
    while c < len(chunks):
        _check_row(chunks[c])
        ms, seq, times, cnts, owners = chunks[c]
        for k in range(j, len(ms)):
            sid = ms[k] << 64 | seq[k]
            if not (attempts and count):
                return sids, counts, got, sid
            attempts -= 1
            fields = get(sid)
            if (fields is not None and min_idle and times[k] > oldest
                    and owners[k] != NO_OWNER):
                continue
            sids.append(sid)
            counts.append(cnts[k] + inc)
            got.append(fields)
            count -= 1
        c += 1
        j = 0
    return sids, counts, got, None


def claim(maxes: list[int], chunks: list[tuple[array, ...]], sids: list[int], time_ms: int,
          counts: list[int],
          owner: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Give each of `sids` (ascending, all pending) delivery time `time_ms`, its count from
    `counts` and owner `owner`, in place. Returns the IDs as ms and seq lists, and the rows'
    former owners and delivery times (which say what moves between consumers and buckets)."""
    if len(counts) != len(sids):
        raise ValueError("claim wants one count an ID")
    out_ms: list[int] = []
    out_seq: list[int] = []
    old_owners: list[int] = []
    old_times: list[int] = []
    c = -1
    top = -1
    chunk: tuple[array, ...] = ()
    for sid, count in zip(sids, counts, strict=True):
        m, s = sid >> 64, sid & _LOW
        if sid > top:
            c = bisect_left(maxes, sid)
            if c == len(chunks):
                raise KeyError(sid)
            chunk, top = chunks[c], maxes[c]
            _check_row(chunk)
        j = find(chunk[0], chunk[1], m, s)
        if j < 0:
            raise KeyError(sid)
        out_ms.append(m)
        out_seq.append(s)
        old_times.append(chunk[2][j])
        old_owners.append(chunk[4][j])
        chunk[2][j] = time_ms
        chunk[3][j] = count
        chunk[4][j] = owner
    return out_ms, out_seq, old_owners, old_times


def remove_sorted(maxes: list[int], chunks: list[tuple[array, ...]], ms: list[int],
                  seq: list[int]) -> int:
    """Remove the IDs (ms and seq lists, ascending) from a packed set's chunks, every column
    alike, one pass a chunk; emptied chunks go, `maxes` follows. Returns how many were there."""
    return _remove_sorted(maxes, chunks, ms, seq, None, 0)


def pop_sorted(maxes: list[int], chunks: list[tuple[array, ...]], ms: list[int],
               seq: list[int], column: int) -> list[int | None]:
    """`remove_sorted`, returning each ID's value in the chunk column `column` (None for an ID
    that was not there, a repeated one included): an XACK of a read's IDs, in one pass."""
    out: list[int | None] = [None] * len(ms)
    _remove_sorted(maxes, chunks, ms, seq, out, column)
    return out


def pop_one(maxes: list[int], chunks: list[tuple[array, ...]], m: int, s: int,
            column: int) -> int | None:
    """Remove the ID (m, s) from a packed set's chunks if it is there, every column alike (an
    emptied chunk goes, `maxes` follows; its columns are left empty, for the caller to use
    again, and the compiled twin frees a column's buffer that had room for many rows): its
    row's value in the chunk column `column`, None when it was not there. An XACK of one ID, a
    queue's, without `pop_sorted`'s lists."""
    c = bisect_left(maxes, m << 64 | s)
    if c == len(chunks):
        return None
    chunk = chunks[c]
    cms, cseq = chunk[0], chunk[1]
    _check_ids(cms, cseq)
    if any(len(col) != len(cms) for col in chunk[2:]):
        raise TypeError("a packed chunk's columns are as long as its IDs")
    if not 0 <= column < len(chunk):
        raise IndexError("pop_one's column is not one of the chunk's")
    j = find(cms, cseq, m, s)
    if j < 0:
        return None
    value: int = chunk[column][j]
    for col in chunk:
        del col[j]
    if not cms:
        del chunks[c]
        del maxes[c]
        return value
    if j == len(cms):  # (the chunk's last ID went: a new last ID)
        maxes[c] = cms[-1] << 64 | cseq[-1]
    return value


def _remove_sorted(maxes: list[int], chunks: list[tuple[array, ...]], ms: list[int],
                   seq: list[int], out: list[int | None] | None, column: int) -> int:
    if len(ms) != len(seq):
        raise ValueError("remove_sorted wants ms and seq lists of one length")
    removed = 0
    i, n = 0, len(ms)
    c = 0
    while i < n and c < len(chunks):
        sid = ms[i] << 64 | seq[i]
        c = bisect_left(maxes, sid, c)
        if c == len(chunks):
            break
        chunk = chunks[c]
        cms, cseq = chunk[0], chunk[1]
        _check_ids(cms, cseq)
        if any(len(col) != len(cms) for col in chunk[2:]):
            raise TypeError("a packed chunk's columns are as long as its IDs")
        keep: list[int] = []  # the chunk's rows that stay
        k = 0
        size = len(cms)
        top = maxes[c]
        while k < size:
            if i < n and (ms[i] << 64 | seq[i]) <= top:
                probe = ms[i] << 64 | seq[i]
                here = cms[k] << 64 | cseq[k]
                if here < probe:
                    keep.append(k)
                    k += 1
                elif here == probe:
                    if out is not None:
                        out[i] = chunk[column][k]
                    k += 1
                    i += 1
                else:  # not in the set
                    i += 1
            else:
                keep.append(k)
                k += 1
        while i < n and (ms[i] << 64 | seq[i]) <= top:  # (absent IDs past the chunk's rows)
            i += 1
        gone = size - len(keep)
        if not gone:
            c += 1
            continue
        removed += gone
        if not keep:
            del chunks[c]
            del maxes[c]
            continue
        for col in chunk:
            kept = array(col.typecode, [col[k] for k in keep])
            col[:] = kept
        maxes[c] = cms[-1] << 64 | cseq[-1]
        c += 1
    return removed


def extend_above(maxes: list[int], chunks: list[tuple[array, ...]], ms: list[int],
                 seq: list[int], values: tuple[int, ...], codes: tuple[str, ...],
                 cap: int) -> None:
    """Append IDs (ms and seq lists, ascending, above every ID) to a packed set's chunks, each
    with the same `values` in the value columns (typecodes `codes`): the last chunk filled up
    to `cap` IDs, then new chunks allocated at their size (no slack); `maxes` follows."""
    if len(ms) != len(seq) or len(values) != len(codes):
        raise ValueError("extend_above wants ms and seq lists of one length, a value a column")
    done, n = 0, len(ms)
    while done < n:
        if not chunks or len(chunks[-1][0]) >= cap:
            take = min(n - done, cap)
            chunks.append((array("Q", ms[done:done + take]), array("Q", seq[done:done + take]),
                           *[array(code, [v]) * take
                             for code, v in zip(codes, values, strict=True)]))
            maxes.append(0)
        else:
            chunk = chunks[-1]
            take = min(n - done, cap - len(chunk[0]))
            # The rows as columns first: a value its column cannot hold is refused before
            # the chunk changes.
            rows = (array("Q", ms[done:done + take]), array("Q", seq[done:done + take]),
                    *[array(col.typecode, [v]) * take
                      for col, v in zip(chunk[2:], values, strict=True)])
            for col, part in zip(chunk, rows, strict=True):
                col.extend(part)
        chunk = chunks[-1]
        done += take
        maxes[-1] = chunk[0][-1] << 64 | chunk[1][-1]
