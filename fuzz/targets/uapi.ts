/**
 * Fuzz target: the UAPI text codec (src/wireguard/uapi.ts) — what `wg set`/`wg setconf` and any
 * local client write to the UAPI socket — and its application to a Device.
 *
 * Input: byte 0 bit 0 picks the grammar (0: a `set=1` body, 1: a `get=1` reply), the rest is the
 * text (latin1, one character per byte).
 * Invariants: parsing either succeeds or throws UapiError (never another exception); a parsed
 * set body formats back to text that parses to the same operations and formats identically
 * (canonical round trip); its plan applies to a fresh device or is refused with a
 * WireGuardConfigError/UapiError, and the device's get=1 answer then parses and formats back to
 * itself; a parsed get reply formats and re-parses to the same text.
 */
import { Device, WireGuardConfigError } from '../../src/wireguard/device.js';
import { UapiError, planSet } from '../../src/wireguard/uapi.js';
import { formatSet, parseSet } from '../../src/wireguard/uapi-set.js';
import { formatGet, parseGet } from '../../src/wireguard/uapi-get.js';
import { must, onlyTyped } from '../lib/check.js';
import { backend } from '../lib/wg.js';

const NOW = 1_700_000_000_000;

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  const text = Buffer.from(data.buffer, data.byteOffset + 1, data.length - 1).toString('latin1');
  if ((data[0]! & 1) === 0) {
    const ops = onlyTyped(() => parseSet(text), [UapiError], 'parseSet');
    if (ops === undefined) return;
    const t1 = formatSet(ops);
    const ops2 = onlyTyped(() => parseSet(t1), [], 'parseSet of formatSet');
    must(ops2 !== undefined && formatSet(ops2) === t1, `set round trip: ${JSON.stringify(t1)}`);
    const plan = onlyTyped(() => planSet(ops), [UapiError, WireGuardConfigError], 'planSet');
    if (plan === undefined) return;
    const d = new Device({ backend: backend() });
    const applied = onlyTyped(
      () => {
        d.applyUapiPlan(plan, NOW);
        return true;
      },
      [UapiError, WireGuardConfigError],
      'applyUapiPlan',
    );
    if (applied === undefined) return;
    const g = formatGet(d.uapiSnapshot());
    const back = onlyTyped(() => parseGet(g), [], "parseGet of the device's own get=1");
    must(back !== undefined && formatGet(back) === g, `get round trip: ${JSON.stringify(g)}`);
  } else {
    const snap = onlyTyped(() => parseGet(text), [UapiError], 'parseGet');
    if (snap === undefined) return;
    const g = onlyTyped(() => formatGet(snap), [], 'formatGet of a parsed reply');
    must(g !== undefined, 'formatGet');
    const again = onlyTyped(() => parseGet(g), [], 'parseGet of formatGet');
    must(again !== undefined && formatGet(again) === g, `get round trip: ${JSON.stringify(g)}`);
  }
}
