"""Top layer (with the tools): the network server (network: RESP over TCP in front of one
Engine), its connections' output buffers (client_output), its descriptor arithmetic (limits)
and the server's side of shared mode and Unix sockets (shared_mode).
"""
