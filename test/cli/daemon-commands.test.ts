// Which `weft` subcommands bin/weft runs with the daemon V8 tiering (src/cli/daemon-commands.ts).
import { describe, expect, test } from 'vitest';
import { DAEMON_COMMANDS, isDaemonCommand } from '../../src/cli/daemon-commands.js';
import { main } from '../../src/cli/weft.js';
import { captureIo } from './helpers.js';

describe('isDaemonCommand', () => {
  test('up and k8s are daemons, whatever follows', () => {
    expect(isDaemonCommand(['up', '-c', 'gateway.yaml'])).toBe(true);
    expect(isDaemonCommand(['k8s', '--role', 'gateway'])).toBe(true);
    expect(isDaemonCommand(['up'])).toBe(true);
  });

  test('the short-lived commands, no command and a daemon name in another position are not', () => {
    for (const c of ['show', 'version', 'genkey', 'pubkey', 'genpsk', 'demo', 'bench', 'help', '--help', '-V'])
      expect(isDaemonCommand([c]), c).toBe(false);
    expect(isDaemonCommand([])).toBe(false);
    expect(isDaemonCommand(['help', 'up'])).toBe(false);
    expect(isDaemonCommand(['show', 'up'])).toBe(false);
    expect(isDaemonCommand(['UP'])).toBe(false);
  });

  test('every daemon command is a command of weft (a renamed command fails here)', async () => {
    expect(DAEMON_COMMANDS.length).toBeGreaterThan(0);
    for (const c of DAEMON_COMMANDS) {
      const io = captureIo();
      expect(await main([c, '--help'], io), c).toBe(0);
      expect(io.stdout, c).toMatch(new RegExp(`^Usage: weft ${c}\\b`));
    }
  });
});
