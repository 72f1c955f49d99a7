// The serving certificate, its key and the client CA, read from files and read again when they
// change: cert-manager and kubelet rotate Secrets in place (an atomic symlink swap), and a gateway
// that only reads them at start serves an expired certificate until someone restarts it.
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';

export interface CertificateFiles {
  certFile: string;
  keyFile: string;
  clientCAFile?: string | undefined;
}

// Polling (stat) rather than inotify: a Secret volume swaps a symlink, which inotify on the file's
// old inode never reports. Two seconds bounds how long an old certificate is served.
const POLL_MS = 2_000;

export function readCertificates(files: CertificateFiles): SecureContextOptions {
  const opts: SecureContextOptions = { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
  if (files.clientCAFile) opts.ca = readFileSync(files.clientCAFile);
  return opts;
}

/**
 * Calls `apply` with the new material whenever one of the files changes and all of them together
 * still make a valid context. A half-written rotation (new certificate, old key) is skipped; the
 * next change, when the key arrives, applies both. Returns a function that stops watching.
 */
export function watchCertificates(
  files: CertificateFiles,
  apply: (opts: SecureContextOptions) => void,
  onError: (err: Error) => void,
): () => void {
  const paths = [files.certFile, files.keyFile, ...(files.clientCAFile ? [files.clientCAFile] : [])];
  const changed = (cur: Stats, prev: Stats): void => {
    if (cur.mtimeMs === prev.mtimeMs && cur.ino === prev.ino && cur.size === prev.size) return;
    try {
      const opts = readCertificates(files);
      createSecureContext(opts); // throws on a mismatched key or a malformed PEM
      apply(opts);
    } catch (err) {
      onError(err instanceof Error ? err : new Error(String(err)));
    }
  };
  for (const p of paths) watchFile(p, { interval: POLL_MS, persistent: false }, changed);
  return () => {
    for (const p of paths) unwatchFile(p, changed);
  };
}
