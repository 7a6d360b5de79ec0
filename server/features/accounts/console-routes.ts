// The account holders' self-service console under /v1/console: log in with account and password, change
// the temporary password, manage their own keys, see their own audit and usage. HTML pages for browsers,
// JSON for scripts, on the same routes (a form post gets a page or a redirect; a JSON request gets JSON).
//
// Browser safety: the session is an HttpOnly, SameSite=Strict cookie scoped to /v1/console whose value is
// stored only as a hash; every state-changing request must come from this origin (Origin, Sec-Fetch-Site)
// and carry the session's CSRF token (a hidden form field or X-CSRF-Token); the login form carries a token
// of its own. API keys are never read here, and the session cookie is never read by the key endpoints: a key
// cannot act in the console and a session cannot call the model. Passwords travel only in POST bodies,
// which are never logged.
import { timingSafeEqual, randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../../core/errors.js";
import { parseTimezone } from "../../http/auth.js";
import type { ServerDeps } from "../server-deps.js";
import { sendError, type ErrorLog } from "../../http/errors.js";
import { fastifyErrorToAppError } from "../../http/fastify-errors.js";
import { parseAuditFilter, parseAuditListQuery } from "../audit/audit-query.js";
import type { CreatedKey, KeyInfo } from "../keys/keys-service.js";
import type { AccountsService, ConsoleSession } from "./accounts-service.js";
import { CONSOLE_CSP, errorPage, homePage, keyCreatedPage, loginPage, passwordPage } from "./console-pages.js";

export const CONSOLE_PATH = "/v1/console";
export const SESSION_COOKIE = "svc_session";
const LOGIN_COOKIE = "svc_login";
const LOGIN_PATH = `${CONSOLE_PATH}/login`;
const PASSWORD_PATH = `${CONSOLE_PATH}/password`;
const USAGE_DAYS = 30;

/** Thrown to send a browser elsewhere (303): the scope's error handler turns it into the redirect. */
class Redirect extends Error {
  constructor(readonly location: string) {
    super(`See ${location}`);
  }
}

const NOTICES: Record<string, string> = {
  logged_out: "You are logged out.",
  session_ended: "Your session ended. Log in again.",
  password_changed: "Your password is changed.",
  key_revoked: "The key is revoked: requests with it get 401 from now on.",
  trace_on: "The reasoning trace is on for that key.",
  trace_off: "The reasoning trace is off for that key.",
  record_erased: "The audit record is erased.",
};

/** Whether the request carries a live console session (a connection beyond its client's share still serves it). */
export function hasConsoleSession(request: FastifyRequest, accounts: AccountsService): boolean {
  return accounts.resume(parseCookies(request)[SESSION_COOKIE]) !== null;
}

function parseCookies(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (request.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 1) continue;
    const name = part.slice(0, eq).trim();
    if (!(name in out)) out[name] = part.slice(eq + 1).trim();
  }
  return out;
}

function setCookie(request: FastifyRequest, reply: FastifyReply, name: string, value: string, path: string, maxAgeSeconds: number): void {
  const secure = request.protocol === "https" ? "; Secure" : "";
  reply.header("set-cookie", `${name}=${value}; Path=${path}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure}`);
}

function clearCookie(request: FastifyRequest, reply: FastifyReply, name: string, path: string): void {
  setCookie(request, reply, name, "", path, 0);
}

/** The pages; every other GET answers JSON. */
const PAGES = new Set([CONSOLE_PATH, LOGIN_PATH, PASSWORD_PATH]);

/** Page loads and form posts get HTML (pages, redirects); everything else JSON. */
function wantsHtml(request: FastifyRequest): boolean {
  if (request.method === "GET" || request.method === "HEAD") return PAGES.has(request.url.split("?")[0]!);
  const type = request.headers["content-type"] ?? "";
  return type.includes("application/x-www-form-urlencoded") || type.includes("multipart/form-data");
}

function same(a: string | undefined, b: string): boolean {
  if (typeof a !== "string") return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function forbidden(message: string, code: string): AppError {
  return new AppError("permission", message, { code });
}

/** A state-changing request must come from the console's own pages, or from a non-browser client. */
function checkOrigin(request: FastifyRequest): void {
  const site = request.headers["sec-fetch-site"];
  if (site === "cross-site" || site === "same-site") throw forbidden("Console actions are only accepted from the console's own pages.", "cross_origin_request");
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== `${request.protocol}://${request.headers.host}`)
    throw forbidden("Console actions are only accepted from the console's own pages.", "cross_origin_request");
}

function body(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function field(request: FastifyRequest, name: string): string {
  const value = body(request)[name];
  return typeof value === "string" ? value : "";
}

function checkCsrf(request: FastifyRequest, session: ConsoleSession): void {
  checkOrigin(request);
  const header = request.headers["x-csrf-token"];
  const token = typeof header === "string" ? header : field(request, "csrf_token");
  if (!same(token, session.csrfToken))
    throw forbidden("The request's CSRF token is missing or wrong. Reload the console page and try again.", "invalid_csrf_token");
}

function sessionJson(session: ConsoleSession) {
  return {
    object: "console.session",
    account: session.account,
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt,
    idle_expires_at: session.idleExpiresAt,
  };
}

function keyList(keys: KeyInfo[]) {
  return { object: "list", data: keys, has_more: false, first_id: keys[0]?.id ?? null, last_id: keys.at(-1)?.id ?? null };
}

function zoneOf(request: FastifyRequest): string {
  const fromQuery = (request.query as Record<string, unknown> | undefined)?.tz;
  try {
    return parseTimezone(typeof fromQuery === "string" ? fromQuery : request.headers["x-timezone"]);
  } catch {
    return "UTC";
  }
}

export async function registerConsoleRoutes(app: FastifyInstance, deps: ServerDeps, logError: ErrorLog): Promise<void> {
  const accounts = deps.accounts;

  // HTML forms post url-encoded bodies (the app parses every other body as JSON).
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_request, text, done) => {
    const out: Record<string, string> = {};
    for (const [key, value] of new URLSearchParams(String(text))) if (!(key in out)) out[key] = value;
    done(null, out);
  });

  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("cache-control", "no-store");
    reply.header("content-security-policy", CONSOLE_CSP);
    reply.header("x-content-type-options", "nosniff");
    reply.header("x-frame-options", "DENY");
    // Not no-referrer: with it, browsers send "Origin: null" on the console's own form posts.
    reply.header("referrer-policy", "same-origin");
    return payload;
  });

  app.setErrorHandler((error: Error, request, reply) => {
    if (error instanceof Redirect) return reply.redirect(error.location, 303);
    const appError = fastifyErrorToAppError(error);
    if (appError.status >= 500) logError(request, error, appError);
    if (!wantsHtml(request)) return sendError(request, reply, appError, "openai");
    if (appError.retryAfter !== undefined) reply.header("retry-after", String(Math.ceil(appError.retryAfter)));
    request.ctx.errorCode = appError.code ?? appError.kind;
    return reply.code(appError.status).type("text/html; charset=utf-8").send(errorPage(appError.status, appError.message));
  });

  /**
   * The request's live session. Without one: a page load goes to the login page, anything else is 401.
   * While the password is a temporary one, only the password page, the session and logout are open.
   */
  function need(request: FastifyRequest, reply: FastifyReply, options: { duringPasswordChange?: boolean } = {}): ConsoleSession {
    const token = parseCookies(request)[SESSION_COOKIE];
    const session = accounts.resume(token);
    if (!session) {
      if (token) clearCookie(request, reply, SESSION_COOKIE, CONSOLE_PATH);
      if (wantsHtml(request)) throw new Redirect(token ? `${LOGIN_PATH}?notice=session_ended` : LOGIN_PATH);
      throw new AppError("authentication", "Log in to the console first (POST /v1/console/login). API keys do not work here.", {
        code: "console_login_required",
      });
    }
    if (session.account.must_change_password && !options.duringPasswordChange) {
      if (wantsHtml(request)) throw new Redirect(PASSWORD_PATH);
      throw new AppError("permission", "Change the temporary password first (POST /v1/console/password).", { code: "password_change_required" });
    }
    return session;
  }

  function renderLogin(request: FastifyRequest, reply: FastifyReply, options: { status?: number; error?: string | null; notice?: string | null; account?: string } = {}) {
    const token = randomBytes(24).toString("base64url");
    setCookie(request, reply, LOGIN_COOKIE, token, LOGIN_PATH, 3600);
    return reply
      .code(options.status ?? 200)
      .type("text/html; charset=utf-8")
      .send(loginPage({ csrf: token, account: options.account, error: options.error, notice: options.notice }));
  }

  function renderHome(request: FastifyRequest, reply: FastifyReply, session: ConsoleSession, options: { status?: number; error?: string | null } = {}) {
    const accountId = session.account.id;
    const timeZone = zoneOf(request);
    const notice = (request.query as Record<string, unknown> | undefined)?.notice;
    const html = homePage({
      account: session.account,
      csrf: session.csrfToken,
      keys: accounts.listKeys(accountId),
      stats: deps.audit.stats({ accountId, sinceMs: Date.now() - USAGE_DAYS * 86_400_000 }, timeZone),
      records: deps.audit.list({ filter: { accountId }, limit: 20 }).data,
      timeZone,
      retentionDays: deps.audit.retentionDays,
      notice: typeof notice === "string" ? (NOTICES[notice] ?? null) : null,
      error: options.error,
    });
    return reply.code(options.status ?? 200).type("text/html; charset=utf-8").send(html);
  }

  /** Runs a form action: its AppError is shown on the console page; success redirects with a notice. */
  async function formAction(request: FastifyRequest, reply: FastifyReply, session: ConsoleSession, action: () => unknown, notice: string) {
    try {
      await action();
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      return renderHome(request, reply, session, { status: err.status, error: err.message });
    }
    throw new Redirect(`${CONSOLE_PATH}?notice=${notice}`);
  }

  // Pages

  app.get(CONSOLE_PATH, async (request, reply) => renderHome(request, reply, need(request, reply)));

  app.get(LOGIN_PATH, async (request, reply) => {
    const notice = (request.query as Record<string, unknown> | undefined)?.notice;
    if (accounts.resume(parseCookies(request)[SESSION_COOKIE])) throw new Redirect(CONSOLE_PATH);
    return renderLogin(request, reply, { notice: typeof notice === "string" ? (NOTICES[notice] ?? null) : null });
  });

  app.get(PASSWORD_PATH, async (request, reply) => {
    const session = need(request, reply, { duringPasswordChange: true });
    return reply.type("text/html; charset=utf-8").send(passwordPage({ account: session.account, csrf: session.csrfToken }));
  });

  // Session

  app.post(LOGIN_PATH, async (request, reply) => {
    checkOrigin(request);
    const html = wantsHtml(request);
    const account = field(request, "account");
    if (html && !same(field(request, "csrf_token"), parseCookies(request)[LOGIN_COOKIE] ?? "\0"))
      return renderLogin(request, reply, { status: 403, account, error: "The login form expired. Try again." });
    let result;
    try {
      result = await accounts.login(account, field(request, "password"), request.ip);
    } catch (err) {
      if (!html || !(err instanceof AppError) || err.status >= 500) throw err;
      if (err.retryAfter !== undefined) reply.header("retry-after", String(Math.ceil(err.retryAfter)));
      request.ctx.errorCode = err.code ?? err.kind;
      return renderLogin(request, reply, { status: err.status, account, error: err.message });
    }
    setCookie(request, reply, SESSION_COOKIE, result.token, CONSOLE_PATH, accounts.session.maxSeconds);
    if (!html) return sessionJson(result.session);
    clearCookie(request, reply, LOGIN_COOKIE, LOGIN_PATH);
    throw new Redirect(result.session.account.must_change_password ? PASSWORD_PATH : CONSOLE_PATH);
  });

  app.post(`${CONSOLE_PATH}/logout`, async (request, reply) => {
    const session = need(request, reply, { duringPasswordChange: true });
    checkCsrf(request, session);
    accounts.logout(session);
    clearCookie(request, reply, SESSION_COOKIE, CONSOLE_PATH);
    if (wantsHtml(request)) throw new Redirect(`${LOGIN_PATH}?notice=logged_out`);
    return { object: "console.session", logged_out: true };
  });

  app.get(`${CONSOLE_PATH}/session`, async (request, reply) => sessionJson(need(request, reply, { duringPasswordChange: true })));

  app.post(PASSWORD_PATH, async (request, reply) => {
    const session = need(request, reply, { duringPasswordChange: true });
    checkCsrf(request, session);
    const html = wantsHtml(request);
    try {
      const next = field(request, "new_password");
      if (html && next !== field(request, "new_password_again"))
        throw new AppError("invalid_request", "The two new passwords differ.", { code: "invalid_new_password", param: "new_password_again" });
      await accounts.changePassword(session, field(request, "current_password"), next);
    } catch (err) {
      if (!html || !(err instanceof AppError) || err.status >= 500) throw err;
      request.ctx.errorCode = err.code ?? err.kind;
      const fresh = accounts.resume(parseCookies(request)[SESSION_COOKIE]) ?? session;
      return reply.code(err.status).type("text/html; charset=utf-8").send(passwordPage({ account: fresh.account, csrf: fresh.csrfToken, error: err.message }));
    }
    if (html) throw new Redirect(`${CONSOLE_PATH}?notice=password_changed`);
    return sessionJson(need(request, reply));
  });

  // Keys

  app.get(`${CONSOLE_PATH}/keys`, async (request, reply) => keyList(accounts.listKeys(need(request, reply).account.id)));

  app.post(`${CONSOLE_PATH}/keys`, async (request, reply) => {
    const session = need(request, reply);
    checkCsrf(request, session);
    const raw = body(request);
    const trace = raw.reasoning_trace === true || raw.reasoning_trace === "on";
    const create = (): CreatedKey =>
      accounts.createKey(session.account.id, { name: typeof raw.name === "string" ? raw.name : undefined, reasoningTrace: trace });
    if (!wantsHtml(request)) return create();
    let created: CreatedKey;
    try {
      created = create();
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      return renderHome(request, reply, session, { status: err.status, error: err.message });
    }
    return reply.type("text/html; charset=utf-8").send(keyCreatedPage({ account: session.account, csrf: session.csrfToken, key: created }));
  });

  app.post<{ Params: { key_id: string } }>(`${CONSOLE_PATH}/keys/:key_id/revoke`, async (request, reply) => {
    const session = need(request, reply);
    checkCsrf(request, session);
    const revoke = () => accounts.revokeKey(session.account.id, request.params.key_id);
    if (!wantsHtml(request)) return revoke();
    return formAction(request, reply, session, revoke, "key_revoked");
  });

  app.post<{ Params: { key_id: string } }>(`${CONSOLE_PATH}/keys/:key_id/reasoning_trace`, async (request, reply) => {
    const session = need(request, reply);
    checkCsrf(request, session);
    const value = body(request).enabled;
    const enabled = value === true || value === "on" || value === "true";
    if (!wantsHtml(request)) {
      if (typeof value !== "boolean") throw new AppError("invalid_request", "Send {\"enabled\": true} or {\"enabled\": false}.", { code: "invalid_request", param: "enabled" });
      return accounts.setKeyTrace(session.account.id, request.params.key_id, enabled);
    }
    return formAction(request, reply, session, () => accounts.setKeyTrace(session.account.id, request.params.key_id, enabled), enabled ? "trace_on" : "trace_off");
  });

  // The account's own audit and usage (the same bodies as /v1/audit and /v1/audit/stats).

  app.get(`${CONSOLE_PATH}/audit`, async (request, reply) => {
    const session = need(request, reply);
    const timeZone = parseTimezone(request.headers["x-timezone"]);
    return deps.audit.list(parseAuditListQuery((request.query ?? {}) as Record<string, unknown>, session.account.id, timeZone));
  });

  app.get(`${CONSOLE_PATH}/audit/stats`, async (request, reply) => {
    const session = need(request, reply);
    const timeZone = parseTimezone(request.headers["x-timezone"]);
    return deps.audit.stats(parseAuditFilter((request.query ?? {}) as Record<string, unknown>, session.account.id, timeZone), timeZone);
  });

  app.post<{ Params: { request_id: string } }>(`${CONSOLE_PATH}/audit/:request_id/erase`, async (request, reply) => {
    const session = need(request, reply);
    checkCsrf(request, session);
    const erase = () => deps.audit.erase(session.account.id, request.params.request_id);
    if (!wantsHtml(request)) return erase();
    return formAction(request, reply, session, erase, "record_erased");
  });
}
