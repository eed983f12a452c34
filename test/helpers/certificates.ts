/**
 * Test certificates made with the `openssl` command line in a directory of the test's own:
 * a CA, and leaf certificates it signs for 127.0.0.1 and localhost, usable as TLS server
 * and client certificates. EC P-256 keys: quick to make. Nothing here is for production.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

export interface Authority {
  readonly name: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export interface Leaf {
  readonly certFile: string;
  readonly keyFile: string;
}

function openssl(dir: string, args: readonly string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA named `name`, valid two days. */
export function makeAuthority(dir: string, name: string): Authority {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  openssl(dir, ['req', '-x509', ...EC, '-keyout', keyFile, '-out', certFile, '-days', '2',
    '-subj', `/CN=${name}`]);
  return { name, certFile, keyFile };
}

/** A certificate for `name` at 127.0.0.1 and localhost, signed by `authority`. */
export function makeLeaf(dir: string, authority: Authority, name: string): Leaf {
  const keyFile = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const certFile = join(dir, `${name}.pem`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' +
    'extendedKeyUsage=serverAuth,clientAuth\n');
  openssl(dir, ['req', ...EC, '-keyout', keyFile, '-out', csr, '-subj', `/CN=${name}`]);
  openssl(dir, ['x509', '-req', '-in', csr, '-CA', authority.certFile, '-CAkey',
    authority.keyFile, '-CAcreateserial', '-out', certFile, '-days', '2', '-extfile', ext]);
  return { certFile, keyFile };
}

/** One HTTPS call that trusts `caPem`; resolves with the status and parsed JSON body. */
export function httpsCall(url: string, caPem: Buffer, method: string, path: string,
  body?: unknown): Promise<{ status: number; body: any }> { // eslint-disable-line
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = request(new URL(path, url), { method, ca: caPem,
      headers: text === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const raw = Buffer.concat(chunks).toString();
        let parsed: unknown;
        try {
          parsed = JSON.parse(raw);
        } catch {
          parsed = raw;
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(text);
  });
}
