"""The facade's scripting methods (Redis's "scripting" group): redis-py 8.1's ScriptCommands
and FunctionCommands.

Owns `ScriptingCommands` (EVAL, EVALSHA and their read-only forms, SCRIPT, FUNCTION, FCALL)
and `Script`, what `register_script` returns: EVALSHA, and on NOSCRIPT SCRIPT LOAD and EVALSHA
again, as redis-py's Script does. Must not touch: anything but argv.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from streamkeep.engine.runtime.clients.base import NEVER_DECODE, ClientBase, DataError, sends
from streamkeep.engine.wire.errors import ReplyError


class ScriptingCommands(ClientBase):
    """redis-py 8.1's scripting and function methods."""

    __slots__ = ()

    # --- EVAL and the script cache ----------------------------------------------------------------

    @sends("eval")
    def eval(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVAL", script, numkeys, *keys_and_args)

    @sends("eval_ro")
    def eval_ro(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVAL_RO", script, numkeys, *keys_and_args)

    @sends("evalsha")
    def evalsha(self, sha: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    @sends("evalsha_ro")
    def evalsha_ro(self, sha: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVALSHA_RO", sha, numkeys, *keys_and_args)

    @sends("script|load")
    def script_load(self, script: Any) -> str:
        return self.execute_command("SCRIPT LOAD", script)

    @sends("script|exists")
    def script_exists(self, *args: Any) -> list[bool]:
        return self.execute_command("SCRIPT EXISTS", *args)

    @sends("script|flush")
    def script_flush(self, sync_type: str | None = None) -> bool:
        if sync_type not in ("SYNC", "ASYNC", None):
            raise DataError("SCRIPT FLUSH defaults to SYNC in redis > 6.2, or accepts "
                            "SYNC/ASYNC. For older versions, of redis leave as None.")
        return self.execute_command("SCRIPT FLUSH", *([sync_type] if sync_type else []))

    @sends("script|kill")
    def script_kill(self) -> bool:
        return self.execute_command("SCRIPT KILL")

    def register_script(self, script: str | bytes) -> Script:
        """redis-py's register_script: a callable running the script by its SHA1 (loading it
        first when the engine answers NOSCRIPT)."""
        return Script(self, script)

    # --- functions --------------------------------------------------------------------------------

    @sends("function|load")
    def function_load(self, code: Any, replace: bool | None = False) -> Any:
        return self.execute_command("FUNCTION LOAD", *(["REPLACE"] if replace else []), code)

    @sends("function|delete")
    def function_delete(self, library: Any) -> bool:
        return self.execute_command("FUNCTION DELETE", library)

    @sends("function|flush")
    def function_flush(self, mode: str = "SYNC") -> bool:
        return self.execute_command("FUNCTION FLUSH", mode)

    @sends("function|list")
    def function_list(self, library: Any = "*", withcode: bool | None = False) -> list:
        args: list[Any] = ["LIBRARYNAME", library, *(["WITHCODE"] if withcode else [])]
        return self.execute_command("FUNCTION LIST", *args)

    @sends("function|dump")
    def function_dump(self) -> bytes:
        return self.execute_command("FUNCTION DUMP", **{NEVER_DECODE: []})

    @sends("function|restore")
    def function_restore(self, payload: Any, policy: str | None = "APPEND") -> bool:
        return self.execute_command("FUNCTION RESTORE", payload, policy)

    @sends("function|stats")
    def function_stats(self) -> Any:
        return self.execute_command("FUNCTION STATS")

    @sends("function|kill")
    def function_kill(self) -> Any:
        return self.execute_command("FUNCTION KILL")

    @sends("fcall")
    def fcall(self, function: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("FCALL", function, numkeys, *keys_and_args)

    @sends("fcall_ro")
    def fcall_ro(self, function: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("FCALL_RO", function, numkeys, *keys_and_args)


class Script:
    """redis-py's `Script` (what `register_script` returns) over the facade: `script(keys,
    args)` runs EVALSHA, and on NOSCRIPT loads the script and runs it again."""

    def __init__(self, registered_client: ScriptingCommands, script: str | bytes) -> None:
        self.registered_client = registered_client
        self.script = script
        body = script.encode() if isinstance(script, str) else bytes(script)
        self.sha = hashlib.sha1(body).hexdigest()

    def __call__(self, keys: Sequence[Any] | None = None, args: Iterable[Any] | None = None,
                 client: ScriptingCommands | None = None) -> Any:
        keys = list(keys or [])
        args = list(args or [])
        if client is None:
            client = self.registered_client
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except ReplyError as err:
            if not err.line.startswith("NOSCRIPT"):
                raise
        self.sha = client.script_load(self.script)
        return client.evalsha(self.sha, len(keys), *keys, *args)
