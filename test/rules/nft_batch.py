"""Loads rule sets into the kernel one transaction each, in one process (libnftables, the library
behind the nft command: the same parser and the same netlink batch as `nft -f`).

Reads a JSON list of rule-set texts on stdin; prints a JSON list with, for each, null when the
kernel loaded it or nft's error text when it was refused. Runs in the namespace it is started in.
"""
import ctypes
import json
import sys

lib = ctypes.CDLL('libnftables.so.1')
lib.nft_ctx_new.restype = ctypes.c_void_p
lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.nft_ctx_free.argtypes = [ctypes.c_void_p]

out = []
for text in json.load(sys.stdin):
    ctx = lib.nft_ctx_new(0)
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_buffer_error(ctx)
    rc = lib.nft_run_cmd_from_buffer(ctx, text.encode())
    out.append(None if rc == 0 else (lib.nft_ctx_get_error_buffer(ctx) or b'').decode(errors='replace') or 'refused')
    lib.nft_ctx_free(ctx)
print(json.dumps(out))
