/* The weft_crypto addon's entry point: weft_crypto.c's primitives first (the X25519 selection
 * the noise steps use), then weft_noise.c's handshake steps. Kept apart so neither file calls
 * into the other's set-up. */
#include "weft_crypto.h"

static napi_value init(napi_env env, napi_value exports) {
  weft_crypto_register(env, exports);
  weft_noise_register(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
