/**
 * `weft genkey`, `weft pubkey`, `weft genpsk`: byte-for-byte what wg(8) prints.
 *
 * - genkey: base64 of a fresh clamped X25519 private key and "\n"; like wg, a warning on stderr
 *   when stdout is a regular file other users can read (the umask hint).
 * - pubkey: reads a base64 private key on stdin with wg's rule (the first 44 characters are the
 *   key, only whitespace may follow), prints its public key and "\n". A malformed key: wg's
 *   messages on stderr, exit 1 (wg's code, so scripts written for wg keep working).
 * - genpsk: base64 of 32 random bytes and "\n".
 * WEFT_CRYPTO picks the backend (same as everywhere else); every backend gives the same bytes.
 */
import { getCryptoBackend, parseCryptoBackendName } from '../../crypto/select.js';
import {
  generatePresharedKeyBase64,
  generatePrivateKeyBase64,
  KEY_BASE64_LEN,
  KeyFormatError,
  publicKeyBase64,
} from '../../crypto/keys.js';
import { EXIT_FAILURE, EXIT_OK, fail, parseArgs, UsageError, type CliIo } from './common.js';

export const GENKEY_HELP = `Usage: weft genkey

Prints a new base64 WireGuard private key (as \`wg genkey\`). Example:
  umask 077; weft genkey > private.key
`;
export const PUBKEY_HELP = `Usage: weft pubkey < private.key

Reads a base64 private key on stdin and prints its public key (as \`wg pubkey\`).
`;
export const GENPSK_HELP = `Usage: weft genpsk

Prints a new base64 preshared key (as \`wg genpsk\`).
`;

type KeyCommand = 'genkey' | 'pubkey' | 'genpsk';
const HELP: Record<KeyCommand, string> = { genkey: GENKEY_HELP, pubkey: PUBKEY_HELP, genpsk: GENPSK_HELP };

export async function runKeyCommand(cmd: KeyCommand, argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const args = parseArgs(argv, []);
    if (args.help) {
      io.out(HELP[cmd]);
      return EXIT_OK;
    }
    if (args.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
    const backend = getCryptoBackend(parseCryptoBackendName(io.env['WEFT_CRYPTO']));
    switch (cmd) {
      case 'genkey':
        if (io.stdoutWorldReadable()) {
          io.err('Warning: writing to world accessible file.\nConsider setting the umask to 077 and trying again.\n');
        }
        io.out(`${generatePrivateKeyBase64(backend)}\n`);
        return EXIT_OK;
      case 'genpsk':
        if (io.stdoutWorldReadable()) {
          io.err('Warning: writing to world accessible file.\nConsider setting the umask to 077 and trying again.\n');
        }
        io.out(`${generatePresharedKeyBase64(backend)}\n`);
        return EXIT_OK;
      case 'pubkey': {
        // wg's reading rule: the key is the first 44 characters; what follows may only be
        // whitespace (so leading whitespace is an error, a trailing newline is not).
        const text = await io.readStdin();
        const key = text.slice(0, KEY_BASE64_LEN);
        if (!/^[ \t\n\v\f\r]*$/.test(text.slice(KEY_BASE64_LEN))) {
          io.err('weft: Trailing characters found after key\n');
          return EXIT_FAILURE;
        }
        let pub: string;
        try {
          if (key.length !== KEY_BASE64_LEN) throw new KeyFormatError('short');
          pub = publicKeyBase64(backend, key);
        } catch (e) {
          if (!(e instanceof KeyFormatError)) throw e;
          io.err('weft: Key is not the correct length or format\n');
          return EXIT_FAILURE;
        }
        io.out(`${pub}\n`);
        return EXIT_OK;
      }
    }
  } catch (e) {
    return fail(io, cmd, e, HELP[cmd]);
  }
}
