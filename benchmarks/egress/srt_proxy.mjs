// The peer of the egress benchmark: Anthropic's sandbox-runtime HTTP proxy (npm
// @anthropic-ai/sandbox-runtime), allowing every destination, on 127.0.0.1.
// Usage: node srt_proxy.mjs PACKAGE_DIR   (prints the port, serves until killed)
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const dir = process.argv[2];
const { createHttpProxyServer } = await import(pathToFileURL(join(dir, 'dist/sandbox/http-proxy.js')).href);
const server = createHttpProxyServer({ filter: () => true });
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
