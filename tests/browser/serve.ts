// Serves the repository's test page, built library and case bundle to a Playwright page without a
// server: requests to http://localhost/ (a secure context, so navigator.gpu exists) are answered
// from disk by route interception.
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import type { Page } from '@playwright/test';

const ROOT = process.cwd();
const TYPES: Record<string, string> = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.map': 'application/json',
  '.json': 'application/json', '.css': 'text/css', '.svg': 'image/svg+xml', '.wgsl': 'text/plain',
};

export const ORIGIN = 'http://localhost';

/** Serves files under `roots` (relative to the repository) at http://localhost/, and the shared folder
 *  beside the checkout (goldens, …) at /shared/ when 'shared' is among them. */
export async function serveRepo(page: Page, roots: string[], index: string): Promise<void> {
  await page.route(`${ORIGIN}/**`, async (route) => {
    let path = decodeURIComponent(new URL(route.request().url()).pathname);
    if (path === '/') path = index;
    const rel = normalize(path).replace(/^\/+/, '');
    if (!roots.some((r) => rel === r || rel.startsWith(`${r}/`)) || rel.includes('..')) {
      await route.fulfill({ status: 404, body: `not served: ${rel}` });
      return;
    }
    try {
      const body = await readFile(rel.startsWith('shared/') ? join(ROOT, '..', rel) : join(ROOT, rel));
      await route.fulfill({ status: 200, body, contentType: TYPES[extname(rel)] ?? 'application/octet-stream' });
    } catch {
      await route.fulfill({ status: 404, body: `missing: ${rel}` });
    }
  });
}
