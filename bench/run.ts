/**
 * `npm run bench`: runs every in-process benchmark in one process, one after the other, and
 * prints each table (every table carries its own anchor measured in the same run, so the
 * ratios are comparable across machines). `npm run bench -- crypto nat` runs a subset.
 * The tunnel comparison against wireguard-go in network namespaces is `npm run bench:tunnel`.
 */
interface BenchModule {
  name: string;
  load: () => Promise<() => Promise<string>>;
}

const modules: BenchModule[] = [
  { name: 'crypto', load: async () => (await import('./crypto.js')).runCryptoBench },
  { name: 'wireguard', load: async () => (await import('./wireguard.js')).runWireguardBench },
  { name: 'handshake', load: async () => (await import('./handshake.js')).runHandshakeBench },
  { name: 'route', load: async () => (await import('./route.js')).runRouteBench },
  { name: 'nat', load: async () => (await import('./nat.js')).runNatBench },
  { name: 'router', load: async () => (await import('./router.js')).runRouterBench },
  { name: 'geneve', load: async () => (await import('./geneve.js')).runGeneveBench },
  { name: 'io', load: async () => (await import('./io.js')).runIoBench },
];

async function main(): Promise<number> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((w) => !modules.some((m) => m.name === w));
  if (unknown.length > 0) {
    console.error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${modules.map((m) => m.name).join(', ')}`);
    return 2;
  }
  console.log(`# weft bench — node ${process.version}, ${new Date().toISOString()}`);
  for (const m of modules) {
    if (wanted.length > 0 && !wanted.includes(m.name)) continue;
    console.log(`\n## ${m.name}\n`);
    const run = await m.load();
    console.log(await run());
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
