"""Wire layer: the bottom of the engine. Error lines, reply values, the RESP codec, argument
parsing and command-syntax specs: pure functions over bytes and values.

Must not import anything of the project above it (model, exec, commands, runtime, aof, snapshot).
"""
