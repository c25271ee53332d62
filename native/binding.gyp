{
  "targets": [
    {
      "target_name": "weft_io",
      "sources": ["weft_io.c", "weft_poll.c", "weft_udp.c", "weft_aead.c", "weft_offload.c", "weft_gso.c", "weft_gro.c"],
      "cflags": ["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "weft_crypto",
      "sources": ["weft_crypto_addon.c", "weft_crypto.c", "weft_x25519.c", "weft_noise.c"],
      "cflags": ["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
