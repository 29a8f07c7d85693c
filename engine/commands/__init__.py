"""The command layer: every command handler, each module registering its commands in the
command table (streamkeep.engine.exec.table) on import.

Importing this package imports every module of this folder (a new command module needs no line
here, and cannot be forgotten), so the table is complete. Must not hold any command itself, and
nothing below this layer (wire, model, exec) may import it.
"""

import importlib
import pkgutil

from streamkeep.engine.exec import transactions  # noqa: F401  (MULTI/EXEC/WATCH)

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
