"""Every effect a handler emits is one its command declares (`command(..., logs=...)`).

`install()` wraps each handler of the command table, before any engine copies the table's
handlers into its dispatch, with a check that the effects the handler appended to its context
are named in its declaration's `logs` (a declaration of `ANY_EFFECTS`, EXEC's and a script's,
is not checked itself: the commands it runs are, each by its own wrapper). Lazy expiry's DELs
are logged by the engine before a handler runs, so they are never the handler's. tests/conftest.py
installs it for the whole suite, so every in-process test, the differential and property suites
above all, checks the declarations as a side effect; a handler that logs an undeclared effect
fails the test that ran it with an `UndeclaredEffect` naming the command and the effect.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.exec.table import COMMANDS, CommandSpec, Handler, effect_command


class UndeclaredEffect(AssertionError):
    """A handler logged an effect its command's declaration does not name."""


def _checked(spec: CommandSpec, handler: Handler) -> Handler:
    allowed = spec.logs
    assert allowed is not None
    name = spec.name

    def checked(ctx: Any, argv: Any) -> Any:
        effects = ctx.effects
        before = len(effects)
        try:
            return handler(ctx, argv)
        finally:
            for effect in ctx.effects[before:] if ctx.effects is effects else ():
                logged = effect_command(effect)
                if logged not in allowed:
                    raise UndeclaredEffect(
                        f"{name} logged {logged} ({effect[:4]!r}...), which its declaration "
                        f"does not name (logs={sorted(allowed)})")

    checked.__wrapped__ = handler  # type: ignore[attr-defined]
    return checked


def install() -> None:
    """Wrap every handler whose declaration names its effects (once)."""
    import streamkeep.engine.commands  # noqa: F401  (the whole table)

    for top in COMMANDS.values():
        for spec in (top, *top.subcommands.values()):
            handler = spec.handler
            if handler is None or spec.logs is None or hasattr(handler, "__wrapped__"):
                continue
            spec.handler = _checked(spec, handler)


__all__ = ["UndeclaredEffect", "install"]
