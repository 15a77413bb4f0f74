// What serve() and `webinfer serve` both check of an address or an origin, before listening. Pure
// functions with no imports: the CLI's bundle (dist/serve.js) may carry its own copy of them.

/** An origin as a CORS header names it (scheme://host[:port], no path), or '*'. */
export function isCorsOrigin(s: string): boolean {
  return s === '*' || /^[a-z][a-z0-9+.-]*:\/\/[^\s/]+$/i.test(s);
}

/** Four dotted numbers with one above 255 ('256.1.1.1'): an address no machine has. */
export function isBadIPv4(s: string): boolean {
  return /^\d+\.\d+\.\d+\.\d+$/.test(s) && !s.split('.').every((o) => Number(o) <= 255);
}
