// /livez and /readyz in the apiserver's format: "ok", or with ?verbose one line per check.
// Levee answers these itself: they describe this gateway, not the apiserver behind it.

/** A check's verdict, with a note for ?verbose when it passes with something worth knowing. */
export type Check = () => boolean | { ok: boolean; note?: string | undefined };

export class Health {
  readonly #readyChecks = new Map<string, Check>();

  /** Adds a readiness check (for example: a resource's cache has synced). */
  addReadyCheck(name: string, check: Check): void {
    this.#readyChecks.set(name, check);
  }

  livez(verbose: boolean): { code: number; body: string } {
    return { code: 200, body: verbose ? '[+]ping ok\nlivez check passed\n' : 'ok' };
  }

  readyz(verbose: boolean): { code: number; body: string } {
    const lines = ['[+]ping ok'];
    let failed = false;
    for (const [name, check] of this.#readyChecks) {
      const { ok, note } = safe(check);
      failed ||= !ok;
      // As the apiserver, a failure's reason is withheld: /readyz answers anyone.
      lines.push(ok ? `[+]${name} ok${note ? ` (${note})` : ''}` : `[-]${name} failed: reason withheld`);
    }
    if (failed) return { code: 500, body: `${lines.join('\n')}\nreadyz check failed\n` };
    return { code: 200, body: verbose ? `${lines.join('\n')}\nreadyz check passed\n` : 'ok' };
  }
}

function safe(check: Check): { ok: boolean; note?: string | undefined } {
  try {
    const r = check();
    return typeof r === 'boolean' ? { ok: r } : r;
  } catch {
    return { ok: false };
  }
}
