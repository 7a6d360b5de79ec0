// Drives the account holders' console through app.inject as a browser or script would: a cookie jar, the
// CSRF token from the session, and the page's own Origin on posts.
import type { FastifyInstance, LightMyRequestResponse } from "fastify";

export const ORIGIN = "http://127.0.0.1";

export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  csrf: string | null = null;

  constructor(private readonly app: FastifyInstance) {}

  private cookieHeader(): string | undefined {
    if (this.cookies.size === 0) return undefined;
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  private remember(res: LightMyRequestResponse): void {
    const set = res.headers["set-cookie"];
    for (const line of Array.isArray(set) ? set : set ? [set] : []) {
      const [pair] = line.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (value === "" || /Max-Age=0\b/.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const cookie = this.cookieHeader();
    const res = await this.app.inject({ method: "GET", url, headers: { accept: "application/json", ...(cookie ? { cookie } : {}), ...headers } });
    this.remember(res);
    return res;
  }

  async page(url: string): Promise<LightMyRequestResponse> {
    return this.get(url, { accept: "text/html" });
  }

  /** A JSON post with the session's CSRF token (unless csrf: null) from the console's own origin. */
  async post(url: string, body: unknown = {}, options: { csrf?: string | null; headers?: Record<string, string> } = {}): Promise<LightMyRequestResponse> {
    const cookie = this.cookieHeader();
    const csrf = options.csrf === undefined ? this.csrf : options.csrf;
    const res = await this.app.inject({
      method: "POST",
      url,
      headers: {
        "content-type": "application/json",
        host: "127.0.0.1",
        origin: ORIGIN,
        ...(cookie ? { cookie } : {}),
        ...(csrf ? { "x-csrf-token": csrf } : {}),
        ...options.headers,
      },
      payload: JSON.stringify(body),
    });
    this.remember(res);
    return res;
  }

  /** A form post, as the HTML pages send it. */
  async form(url: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const cookie = this.cookieHeader();
    const res = await this.app.inject({
      method: "POST",
      url,
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        host: "127.0.0.1",
        origin: ORIGIN,
        "sec-fetch-site": "same-origin",
        accept: "text/html",
        ...(cookie ? { cookie } : {}),
        ...headers,
      },
      payload: new URLSearchParams(fields).toString(),
    });
    this.remember(res);
    return res;
  }

  async login(account: string, password: string): Promise<LightMyRequestResponse> {
    const res = await this.post("/v1/console/login", { account, password }, { csrf: null });
    if (res.statusCode === 200) this.csrf = (res.json() as { csrf_token: string }).csrf_token;
    return res;
  }
}
