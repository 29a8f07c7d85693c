"""`streamkeep crashbench`: the crash-recovery test bench (issue 15).

Runs a seeded stream workload against a target (an in-process Engine on the fault-injecting
file layer, a `streamkeep serve` child, or a real redis-server), crashes it (a power loss at the
N-th file operation, an I/O error, or SIGKILL), recovers, and checks invariants against the
history of what was acknowledged. Modules: `target` (the interface every target implements),
`faultfs` (the power-loss and I/O-error file layer), `workload` (the seeded operations;
`types_workload` and `lists_workload` the other value types', `workloads` each by name),
`history` (one step: a command run and its outcome recorded), `model` (the canonical state
and the reference), `invariants` (the checks), `powerloss`, `sigkill` and `ioerrors` (the
crash modes; `client` and `moments` for real processes, which tools.servers starts;
`cluster` the sigkill mode against a cluster of nodes, with its own workload and checks), `runs`,
`report` and `cli`.
`planted` holds the known bugs the bench must find (off unless a test plants them): every
engine the power-loss and I/O-error modes run is opened through it.
Must not touch: the engine's, the AOF's or the snapshot's internals (but `planted`, whose
mutants are such bugs); a target is driven only through commands and a data directory
only through the file-layer seam.
"""
