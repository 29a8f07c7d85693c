"""Exec layer: the command machinery. The command table, the per-command context, blocking
waiters, transactions, the config registry and the interfaces through which the engine reaches
persistence (streamkeep.engine.exec.interfaces).

May import wire and model (and the AOF/snapshot file formats); never a command module, the
runtime, or a persistence service's implementation.
"""
