/**
 * Counts the frames of a capture that match each of several tshark display filters in one
 * dissection pass (`-z io,stat,0,FILTER,…`: one interval spanning the whole capture, one column
 * per filter), instead of one `tshark -Y FILTER` per filter. A frame counts for a filter exactly
 * when `tshark -Y FILTER` would print it.
 */
import { execFile } from 'node:child_process';

/**
 * How long a tshark just started may take to say "Capturing on": it loads every dissector first,
 * 2–5 s on an idle machine and over 10 s with both cores busy (the suite's two lanes at once).
 */
export const TSHARK_START_MS = 30_000;

/**
 * Frames of `pcap` matching each of `filters` (same order). `options` go before the statistics
 * (`-d …`, `-o …`). A filter must not contain a comma (io,stat separates its columns with them).
 */
export async function tsharkCounts(
  pcap: string,
  filters: readonly string[],
  options: readonly string[] = [],
): Promise<number[]> {
  for (const f of filters) if (f.includes(',')) throw new Error(`tsharkCounts: a filter has a comma: ${f}`);
  if (filters.length === 0) return [];
  const args = ['-r', pcap, '-q', ...options, '-z', `io,stat,0,${filters.join(',')}`];
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile('tshark', args, { encoding: 'utf8', timeout: 120_000, maxBuffer: 1 << 20 }, (err, out, stderr) => {
      if (err) reject(new Error(`tshark ${args.join(' ')} failed: ${String(err)} ${stderr}`));
      else resolve(out);
    });
  });
  // The one data row: "| <start> <> <end> | frames | bytes | frames | bytes | …".
  const row = stdout.split('\n').find((l) => /^\|\s*[\d.]+\s*<>\s*([\d.]+|Dur)\s*\|/.test(l));
  if (row === undefined) throw new Error(`tshark io,stat printed no interval row:\n${stdout}`);
  // (tshark pads the row to the header's width: empty cells may follow the last column.)
  const cells = row
    .split('|')
    .slice(2)
    .map((c) => c.trim());
  while (cells.length > 0 && cells[cells.length - 1] === '') cells.pop();
  if (cells.length !== 2 * filters.length || cells.some((c) => !/^\d+$/.test(c)))
    throw new Error(`tshark io,stat row does not have ${filters.length} columns: ${row}`);
  return filters.map((_, i) => Number(cells[2 * i]));
}
