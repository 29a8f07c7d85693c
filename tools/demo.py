"""``streamkeep demo``: Redis Streams consumer groups, embedded, as documentation by example.

Owns the demo script only: an in-memory Engine (no server, no files), a stream of orders, one
consumer group with two consumers that read in turns and acknowledge most of what they get, then
the introspection commands (XPENDING summary and extended, XINFO STREAM / GROUPS / CONSUMERS)
printed with bytes decoded. Every call goes through ``Engine.execute``, so each line reads like the
Redis command it is. Must not touch: engine internals.
"""

from __future__ import annotations

from typing import Any

from streamkeep import Engine

STREAM = "orders"
GROUP = "shipping"
CONSUMERS = ("alice", "bob")
ITEMS = ("kettle", "teapot", "mug", "whisk", "ladle")
N_ORDERS = 20
BATCH = 5
MANUAL_REVIEW_QTY = 5  # orders this big are left unacknowledged, waiting for a human


def _s(value: Any) -> Any:
    """Decode bytes (recursively) for printing."""
    if isinstance(value, bytes):
        return value.decode(errors="backslashreplace")
    if isinstance(value, list):
        return [_s(v) for v in value]
    return value


def _pairs(flat: list[Any]) -> dict[str, Any]:
    """A RESP2 flat map (``k1 v1 k2 v2 ...``) as a dict with str keys."""
    return {_s(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def _entry(entry: list[Any] | None) -> str:
    """``[id, [f1, v1, ...]]`` as ``id {f1=v1 ...}``."""
    if not entry:
        return "(none)"
    entry_id, fields = entry
    body = " ".join(f"{k}={_s(v)}" for k, v in _pairs(fields).items())
    return f"{_s(entry_id)} {{{body}}}"


def _show(title: str, mapping: dict[str, Any], indent: str = "  ") -> None:
    print(title)
    width = max(len(k) for k in mapping)
    for key, value in mapping.items():
        if key in ("first-entry", "last-entry"):
            value = _entry(value)
        print(f"{indent}{key:<{width}}  {_s(value)}")


def main() -> int:
    e = Engine.open()  # in memory: no server, no files

    print(f"== produce: {N_ORDERS} orders with XADD {STREAM} * item <item> qty <n>")
    for i in range(N_ORDERS):
        item, qty = ITEMS[i % len(ITEMS)], i % MANUAL_REVIEW_QTY + 1
        entry_id = e.execute("XADD", STREAM, "*", "item", item, "qty", qty)
        if i < 3 or i == N_ORDERS - 1:
            print(f"  {_s(entry_id)}  item={item} qty={qty}")
        elif i == 3:
            print("  ...")
    print(f"  XLEN {STREAM} -> {e.execute('XLEN', STREAM)}")

    print(f"\n== consume: group {GROUP!r} reads from the start (id 0)")
    print(f"  XGROUP CREATE {STREAM} {GROUP} 0 -> {e.execute('XGROUP', 'CREATE', STREAM, GROUP, '0')}")
    print(f"  {' and '.join(CONSUMERS)} take turns: XREADGROUP GROUP {GROUP} <name> COUNT {BATCH} "
          f"STREAMS {STREAM} >")
    print(f"  each XACKs what it shipped; orders with qty >= {MANUAL_REVIEW_QTY} wait for review "
          "(stay pending)")
    delivered = acked = 0
    turn = 0
    while True:
        consumer = CONSUMERS[turn % len(CONSUMERS)]
        turn += 1
        reply = e.execute("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", BATCH,
                          "STREAMS", STREAM, ">")
        if not reply:  # nil: nothing new for the group, the stream is drained
            print(f"  {consumer:<5} read nothing: the stream is drained")
            break
        _key, entries = reply[0]
        delivered += len(entries)
        # Ship the small orders (XACK); big ones stay pending until someone reviews them.
        done = [eid for eid, fields in entries if int(_pairs(fields)["qty"]) < MANUAL_REVIEW_QTY]
        n_acked = e.execute("XACK", STREAM, GROUP, *done) if done else 0
        acked += n_acked
        print(f"  {consumer:<5} read {len(entries)} ({_s(entries[0][0])} .. {_s(entries[-1][0])}), "
              f"XACK {n_acked}, left {len(entries) - n_acked} pending")
    print(f"  delivered {delivered}, acked {acked}, pending {delivered - acked}")

    print(f"\n== XPENDING {STREAM} {GROUP}  (summary)")
    total, lowest, highest, per_consumer = e.execute("XPENDING", STREAM, GROUP)
    print(f"  total pending: {total}")
    print(f"  id range:      {_s(lowest)} .. {_s(highest)}")
    for name, count in per_consumer or []:
        print(f"  consumer {_s(name):<6} {_s(count)} pending")

    print(f"\n== XPENDING {STREAM} {GROUP} - + 10  (extended)")
    print(f"  {'id':<18} {'consumer':<8} {'idle ms':>8} {'deliveries':>10}")
    for entry_id, consumer, idle_ms, deliveries in e.execute("XPENDING", STREAM, GROUP,
                                                             "-", "+", 10):
        print(f"  {_s(entry_id):<18} {_s(consumer):<8} {idle_ms:>8} {deliveries:>10}")

    print()
    _show(f"== XINFO STREAM {STREAM}", _pairs(e.execute("XINFO", "STREAM", STREAM)))

    print(f"\n== XINFO GROUPS {STREAM}")
    for group in e.execute("XINFO", "GROUPS", STREAM):
        _show(f"  group {_s(_pairs(group)['name'])}", _pairs(group), indent="    ")

    print(f"\n== XINFO CONSUMERS {STREAM} {GROUP}")
    for consumer in e.execute("XINFO", "CONSUMERS", STREAM, GROUP):
        _show(f"  consumer {_s(_pairs(consumer)['name'])}", _pairs(consumer), indent="    ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
