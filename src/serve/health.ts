// /livez and /readyz in the apiserver's format: "ok", or with ?verbose one line per check.
// Levee answers these itself: they describe this gateway, not the apiserver behind it.

export type Check = () => boolean;

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
      const ok = safe(check);
      failed ||= !ok;
      lines.push(ok ? `[+]${name} ok` : `[-]${name} failed: reason withheld`);
    }
    if (failed) return { code: 500, body: `${lines.join('\n')}\nreadyz check failed\n` };
    return { code: 200, body: verbose ? `${lines.join('\n')}\nreadyz check passed\n` : 'ok' };
  }
}

function safe(check: Check): boolean {
  try {
    return check();
  } catch {
    return false;
  }
}
