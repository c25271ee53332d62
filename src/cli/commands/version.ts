/**
 * `weft version`: the version line scripts parse ("weft 0.1.0"), then the runtime and the crypto
 * backend 'auto' resolves to here (detection loads koffi; --short skips it).
 */
import { autoBackendName } from '../../crypto/select.js';
import { WEFT_VERSION } from '../../daemon/version.js';
import { EXIT_OK, fail, optFlag, parseArgs, UsageError, type CliIo } from './common.js';

export const VERSION_HELP = `Usage: weft version [--short]

Prints "weft VERSION", then the Node.js version and the crypto backend that 'auto' selects.
  --short   only "weft VERSION"
`;

export function runVersion(argv: readonly string[], io: CliIo): number {
  try {
    const args = parseArgs(argv, [{ name: 'short', value: false }]);
    if (args.help) {
      io.out(VERSION_HELP);
      return EXIT_OK;
    }
    if (args.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
    io.out(`weft ${WEFT_VERSION}\n`);
    if (!optFlag(args, 'short')) {
      io.out(`node ${process.version} (${process.platform}-${process.arch})\ncrypto auto = ${autoBackendName()}\n`);
    }
    return EXIT_OK;
  } catch (e) {
    return fail(io, 'version', e, VERSION_HELP);
  }
}
