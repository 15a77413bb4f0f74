#!/usr/bin/env node
// `npx webinfer <command>`: the package's command line in Node. Each command lives in dist/ and is
// loaded only when asked for; `serve` is dist/serve.js (src/serve/cli.ts), which Deno runs directly.
const USAGE = `Usage: webinfer <command> [arguments]

Commands:
  serve <checkpoint folder | file.gguf> [options]   serve a model over HTTP with OpenAI's API

webinfer <command> --help describes a command.
`;

const [command, ...rest] = process.argv.slice(2);
if (command === undefined || command === '-h' || command === '--help') {
  (command === undefined ? process.stderr : process.stdout).write(USAGE);
  process.exit(command === undefined ? 2 : 0);
}
if (command !== 'serve') {
  process.stderr.write(`webinfer: command: expected one of serve, got '${command}'\n\n${USAGE}`);
  process.exit(2);
}
// Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid or not set" when the variable names no
// usable folder (a container, a CI job, `su`): give the process a private one so they stay quiet.
{
  const { existsSync, mkdirSync, statSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = process.env.XDG_RUNTIME_DIR;
  let ok = false;
  try { ok = !!dir && statSync(dir).isDirectory(); } catch { ok = false; }
  if (!ok) {
    const mine = `${tmpdir()}/webinfer-runtime-${process.getuid?.() ?? 'user'}`;
    try {
      if (!existsSync(mine)) mkdirSync(mine, { mode: 0o700 });
      process.env.XDG_RUNTIME_DIR = mine;
    } catch { /* the drivers' notice is harmless */ }
  }
}
let cli;
try {
  cli = await import('../dist/serve.js');
} catch (e) {
  process.stderr.write(`webinfer: dist/serve.js: expected the built command, got an error loading it (${e.message}); in a checkout, run npm run build first\n`);
  process.exit(1);
}
// dawn.node keeps the process alive after the engine is destroyed: exit with main's code.
process.exit(await cli.main(rest));
