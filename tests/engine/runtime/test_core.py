"""The engine core's one command path (engine.runtime.core: EngineCore.run_command, and the
write gate it asks).

Every way a command runs goes through EngineCore.run_command, which asks the one write gate
(EngineState.write_gate). Two checks: the gate closed (a replica's read-only line) is seen by
a client's command, a queued command at EXEC, a batch and a blocked read's re-run, while a
replayed record still applies; and, on the interpreted build (in a child process, since a
compiled method cannot be patched), a planted change to the gate and a planted change to the
path are seen on every entry point.
"""

from __future__ import annotations

import os

import pytest

from streamkeep import Engine, Record, ReplyError, Session

GATE = "READONLY You can't write against a read only replica."


def test_the_gate_is_seen_on_every_way_a_command_runs() -> None:
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    client, primary = engine.session, engine.primary_session()

    # A blocked XREADGROUP (a write: it moves the group) waits; then the engine becomes a
    # replica, and the primary's XADD wakes it: its re-run is refused by the gate.
    blocked, _ = engine.submit(client, (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0",
                                        b"STREAMS", b"s", b">"))
    from streamkeep.engine.exec.blocking import Waiter

    assert type(blocked) is Waiter
    # A transaction queued while writes were allowed, its EXEC after the gate closed.
    queued = Session()
    for argv in [(b"MULTI",), (b"XADD", b"s", b"*", b"f", b"queued")]:
        engine.submit(queued, argv)
    engine.read_only = GATE
    try:
        engine.submit(primary, (b"XADD", b"s", b"*", b"f", b"primary"))
        assert blocked.done and isinstance(blocked.result, ReplyError)
        assert blocked.result.line == GATE
        with pytest.raises(ReplyError, match="READONLY"):
            engine.execute("XADD", "s", "*", "f", "client")
        reply, _ = engine.submit(queued, (b"EXEC",))
        assert isinstance(reply[0], ReplyError) and reply[0].line == GATE
        with pytest.raises(ReplyError, match="READONLY"):  # a batch is refused whole
            engine.batches.execute_batch(client, [(b"XADD", b"s", b"*", b"f", b"batch")])
        # A record applied (replay, a replica's stream) is never gated.
        engine.replay.apply(Record(0, 1, 0, [[b"XADD", b"s", b"9999999999999-0", b"f", b"replayed"]]))
    finally:
        engine.read_only = None
    values = [fields[1] for _id, fields in engine.execute("XRANGE", "s", "-", "+")]
    assert values == [b"primary", b"replayed"]
    stats = dict(line.split(":", 1) for line in
                 engine.execute("INFO", "commandstats").decode().split("\r\n")[1:] if line)
    # The client's XADD was rejected, the queued one failed; the re-run XREADGROUP failed
    # once, when its wait ended.
    assert "rejected_calls=1,failed_calls=1" in stats["cmdstat_xadd"]
    assert "failed_calls=1" in stats["cmdstat_xreadgroup"]


PLANTED = r'''
from streamkeep import Engine, Record, ReplyError, Session
from streamkeep.engine.runtime import core
from streamkeep.engine.wire.compiled import running

assert not running(core), "the child must run the interpreted build"
seen = set()
original_path, original_gate = core.EngineCore.run_command, core.EngineCore.write_gate
def run_command(self, ctx, entry, argv, handler=None):
    seen.add((type(ctx).__name__, entry.name))
    return original_path(self, ctx, entry, argv, handler)
planted = [False]
def write_gate(self, session):
    if planted[0] and not session.from_primary:
        return "ERR planted gate"
    return original_gate(self, session)
core.EngineCore.run_command = run_command
core.EngineCore.write_gate = write_gate

engine = Engine()
engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
blocked, _ = engine.submit(engine.session, (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK",
                                            b"0", b"STREAMS", b"s", b">"))
other = Session()
engine.submit(other, (b"MULTI",))
engine.submit(other, (b"XADD", b"s", b"*", b"f", b"queued"))
planted[0] = True
engine.submit(engine.primary_session(), (b"XADD", b"s", b"*", b"f", b"v"))
replies = []
try:
    engine.execute("XADD", "s", "*", "f", "client")
except ReplyError as err:
    replies.append(err.line)
replies.append(engine.submit(other, (b"EXEC",))[0][0].line)
try:
    engine.batches.execute_batch(engine.session, [(b"XADD", b"s", b"*", b"f", b"b")])
except ReplyError as err:
    replies.append(err.line)
engine.replay.apply(Record(0, 1, 0, [[b"XADD", b"s", b"9999999999999-0", b"f", b"replayed"]]))
print(repr((blocked.result.line, replies, sorted(seen))))
'''


def test_a_planted_gate_and_path_are_seen_on_every_entry_point() -> None:
    import ast
    import subprocess
    import sys

    env = {**os.environ, "STREAMKEEP_NO_EXTENSIONS": "1"}
    env.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    out = subprocess.run([sys.executable, "-c", PLANTED], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    rerun_line, replies, seen = ast.literal_eval(out.strip().splitlines()[-1])
    assert rerun_line == "ERR planted gate"  # the blocked read's re-run
    # The client's command, the queued one at EXEC, the batch (refused whole).
    assert replies == ["ERR planted gate"] * 3
    assert ("RerunCtx", "xreadgroup") in seen  # the re-run went through the path
    assert ("ReplayCtx", "xadd") in seen  # the replayed record too
    assert ("Ctx", "xadd") in seen and ("MultiCtx", "xadd") in seen
