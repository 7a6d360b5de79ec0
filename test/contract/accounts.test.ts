// The account flow through HTTP: the operator's service creates an account (temporary password and first key,
// shown once), its holder logs in to the console, must change the password, manages their own keys; sessions
// expire; CSRF, origin checks and login throttling; disabling and password resets; keys and sessions never
// stand in for each other.
import { afterEach, describe, expect, it } from "vitest";
import type { CreatedAccount } from "../../server/features/accounts/accounts-service.js";
import { LoginThrottle } from "../../server/features/accounts/login-throttle.js";
import { ConsoleClient } from "../support/console-client.js";
import { FakeEngine } from "../support/fake-engine.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

let t: TestApp;
let clock = Date.now();

afterEach(async () => {
  await t?.close();
});

async function app(options: { idleSeconds?: number; maxSeconds?: number } = {}): Promise<TestApp> {
  clock = Date.now();
  const now = () => clock;
  t = await buildTestApp(new FakeEngine(), {
    accounts: { now, session: { idleSeconds: options.idleSeconds ?? 1800, maxSeconds: options.maxSeconds ?? 43_200 }, throttle: new LoginThrottle(undefined, now) },
  });
  return t;
}

async function chat(key: string): Promise<number> {
  const res = await t.app.inject({
    method: "POST",
    url: "/v1/chat/completions",
    headers: { authorization: `Bearer ${key}` },
    payload: { messages: [{ role: "user", content: "hi" }] },
  });
  return res.statusCode;
}

/** Logs in with the temporary password and replaces it; returns the client and the new password. */
async function firstLogin(created: CreatedAccount): Promise<{ client: ConsoleClient; password: string }> {
  const client = new ConsoleClient(t.app);
  expect((await client.login(created.account.name, created.temporary_password)).statusCode).toBe(200);
  const password = "correct horse battery staple";
  const changed = await client.post("/v1/console/password", { current_password: created.temporary_password, new_password: password });
  expect(changed.statusCode, changed.body).toBe(200);
  return { client, password };
}

describe("accounts and the self-service console", () => {
  it("creates an account with a temporary password and a first key, forces a password change, then manages keys", async () => {
    await app();
    const created = await t.accounts.create("alice");
    expect(created.temporary_password).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){4}$/);
    expect(created.key.key).toMatch(/^sk-svc-[0-9a-f]{32}$/);
    expect(created.account).toMatchObject({ name: "alice", status: "active", can_log_in: true, must_change_password: true, active_keys: 1 });
    // The first key is active at once.
    expect(await chat(created.key.key)).toBe(200);
    // Only hashes are stored.
    const row = t.store.accounts.findByName("alice")!;
    expect(row.password_hash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(JSON.stringify(t.store.db.prepare("SELECT * FROM accounts").all())).not.toContain(created.temporary_password);

    const client = new ConsoleClient(t.app);
    const wrong = await client.login("alice", "not the password");
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toMatchObject({ error: { code: "invalid_credentials", type: "authentication_error" } });

    const login = await client.login("alice", created.temporary_password);
    expect(login.statusCode).toBe(200);
    expect(login.json()).toMatchObject({ object: "console.session", account: { name: "alice", must_change_password: true }, csrf_token: expect.any(String) });
    const cookie = String(login.headers["set-cookie"]);
    expect(cookie).toMatch(/^svc_session=[A-Za-z0-9_-]{43}; Path=\/v1\/console; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    // The cookie's value is stored only as a hash.
    const token = cookie.split(";")[0]!.split("=")[1]!;
    expect(JSON.stringify(t.store.db.prepare("SELECT * FROM console_sessions").all())).not.toContain(token);

    // Until the password is changed, nothing else is open.
    const keysBefore = await client.get("/v1/console/keys");
    expect(keysBefore.statusCode).toBe(403);
    expect(keysBefore.json()).toMatchObject({ error: { code: "password_change_required" } });
    expect((await client.post("/v1/console/keys", { name: "x" })).json()).toMatchObject({ error: { code: "password_change_required" } });

    const noCsrf = await client.post("/v1/console/password", { current_password: created.temporary_password, new_password: "a new long password" }, { csrf: null });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json()).toMatchObject({ error: { code: "invalid_csrf_token" } });
    const short = await client.post("/v1/console/password", { current_password: created.temporary_password, new_password: "short" });
    expect(short.statusCode).toBe(400);
    expect(short.json()).toMatchObject({ error: { code: "invalid_new_password", param: "new_password" } });
    const same = await client.post("/v1/console/password", { current_password: created.temporary_password, new_password: created.temporary_password });
    expect(same.json()).toMatchObject({ error: { code: "invalid_new_password" } });
    const badCurrent = await client.post("/v1/console/password", { current_password: "guess guess guess", new_password: "a new long password" });
    expect(badCurrent.json()).toMatchObject({ error: { code: "invalid_current_password" } });

    const changed = await client.post("/v1/console/password", { current_password: created.temporary_password, new_password: "a new long password" });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ account: { must_change_password: false } });
    // The temporary password is gone; the new one works.
    expect((await new ConsoleClient(t.app).login("alice", created.temporary_password)).statusCode).toBe(401);
    expect((await new ConsoleClient(t.app).login("alice", "a new long password")).statusCode).toBe(200);

    // Keys: the first key listed by its hint only.
    const list = await client.get("/v1/console/keys");
    expect(list.statusCode).toBe(200);
    expect(list.json()).toMatchObject({ object: "list", has_more: false, data: [{ id: created.key.id, hint: `sk-svc-…${created.key.key.slice(-4)}`, name: "first key" }] });
    expect(list.body).not.toContain(created.key.key);

    const made = await client.post("/v1/console/keys", { name: "laptop", reasoning_trace: true });
    expect(made.statusCode).toBe(200);
    const key = made.json() as { id: string; key: string; reasoning_trace: boolean; account: string };
    expect(key).toMatchObject({ account: "alice", reasoning_trace: true, key: expect.stringMatching(/^sk-svc-[0-9a-f]{32}$/) });
    expect(await chat(key.key)).toBe(200);
    expect((await client.get("/v1/console/keys")).body).not.toContain(key.key);

    const off = await client.post(`/v1/console/keys/${key.id}/reasoning_trace`, { enabled: false });
    expect(off.json()).toMatchObject({ id: key.id, reasoning_trace: false });
    expect(t.keys.get(key.id).reasoning_trace).toBe(false);
    expect((await client.post(`/v1/console/keys/${key.id}/reasoning_trace`, { enabled: "yes" })).statusCode).toBe(400);

    const revoked = await client.post(`/v1/console/keys/${key.id}/revoke`);
    expect(revoked.json()).toMatchObject({ id: key.id, revoked_at: expect.any(Number) });
    // Revoked: 401 on its next request, no restart.
    expect(await chat(key.key)).toBe(401);
    expect(await chat(created.key.key)).toBe(200);

    // Another account's key is unknown here.
    const other = await t.accounts.create("bob");
    const foreign = await client.post(`/v1/console/keys/${other.key.id}/revoke`);
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toMatchObject({ error: { code: "key_not_found" } });
    expect(await chat(other.key.key)).toBe(200);

    // Logout ends the session.
    expect((await client.post("/v1/console/logout")).statusCode).toBe(200);
    expect((await client.get("/v1/console/keys")).statusCode).toBe(401);
  });

  it("keeps keys and console sessions apart", async () => {
    await app();
    const created = await t.accounts.create("carol");
    const { client } = await firstLogin(created);
    // An API key reaches no console action.
    for (const headers of [{ authorization: `Bearer ${created.key.key}` }, { "x-api-key": created.key.key }]) {
      const res = await t.app.inject({ method: "GET", url: "/v1/console/keys", headers: { accept: "application/json", ...headers } });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ error: { code: "console_login_required" } });
      const post = await t.app.inject({ method: "POST", url: "/v1/console/keys", headers: { "content-type": "application/json", ...headers }, payload: "{}" });
      expect(post.statusCode).toBe(401);
    }
    // A console session cannot call the model, on any surface.
    const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    for (const url of ["/v1/chat/completions", "/v1/responses", "/v1/messages"]) {
      const res = await t.app.inject({ method: "POST", url, headers: { cookie, "x-csrf-token": client.csrf! }, payload: { model: "svc", max_tokens: 5, messages: [{ role: "user", content: "hi" }], input: "hi" } });
      expect(res.statusCode, url).toBe(401);
    }
    expect((await t.app.inject({ method: "GET", url: "/v1/audit", headers: { cookie } })).statusCode).toBe(401);
  });

  it("ends sessions after the idle timeout and after their lifetime", async () => {
    await app({ idleSeconds: 600, maxSeconds: 1800 });
    const created = await t.accounts.create("dave");
    const { client } = await firstLogin(created);
    clock += 599_000;
    expect((await client.get("/v1/console/keys")).statusCode).toBe(200);
    clock += 599_000; // used a moment ago: still alive
    expect((await client.get("/v1/console/keys")).statusCode).toBe(200);
    clock += 601_000; // idle too long
    const idle = await client.get("/v1/console/keys");
    expect(idle.statusCode).toBe(401);
    expect(idle.json()).toMatchObject({ error: { code: "console_login_required" } });
    // The expired cookie is cleared; a page load goes to the login page and says why.
    const page = await client.page("/v1/console");
    expect(page.statusCode).toBe(303);
    expect(page.headers.location).toBe("/v1/console/login");

    const again = new ConsoleClient(t.app);
    expect((await again.login("dave", "correct horse battery staple")).statusCode).toBe(200);
    for (let i = 0; i < 5; i++) {
      clock += 300_000;
      expect((await again.get("/v1/console/keys")).statusCode).toBe(200);
    }
    clock += 300_001; // 30 minutes after login, however busy
    expect((await again.get("/v1/console/keys")).statusCode).toBe(401);
    expect(t.store.db.prepare("SELECT COUNT(*) AS n FROM console_sessions").get()).toEqual({ n: 0 });
  });

  it("refuses state changes from other origins and without the CSRF token", async () => {
    await app();
    const created = await t.accounts.create("erin");
    const { client } = await firstLogin(created);
    const cases: Array<[Record<string, string>, string | null, string]> = [
      [{ origin: "http://localhost:3000" }, client.csrf, "cross_origin_request"],
      [{ origin: "null" }, client.csrf, "cross_origin_request"],
      [{ "sec-fetch-site": "cross-site" }, client.csrf, "cross_origin_request"],
      [{ "sec-fetch-site": "same-site" }, client.csrf, "cross_origin_request"],
      [{}, null, "invalid_csrf_token"],
      [{}, "forged-token", "invalid_csrf_token"],
    ];
    for (const [headers, csrf, code] of cases) {
      const res = await client.post("/v1/console/keys", { name: "evil" }, { csrf, headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(403);
      expect(res.json()).toMatchObject({ error: { code } });
    }
    // A form post without the hidden token field.
    const form = await client.form("/v1/console/keys", { name: "evil" });
    expect(form.statusCode).toBe(403);
    expect(form.headers["content-type"]).toContain("text/html");
    expect(t.keys.list("erin").map((k) => k.name)).toEqual(["first key"]);
    // Logging in from another origin is refused too (login CSRF).
    const foreignLogin = await new ConsoleClient(t.app).post("/v1/console/login", { account: "erin", password: "correct horse battery staple" }, { csrf: null, headers: { origin: "http://localhost:3000" } });
    expect(foreignLogin.statusCode).toBe(403);
  });

  it("throttles failed logins per account and per address", async () => {
    await app();
    const created = await t.accounts.create("frank");
    const { password } = await firstLogin(created);
    const client = new ConsoleClient(t.app);
    for (let i = 0; i < 5; i++) expect((await client.login("frank", `wrong ${i}`)).statusCode).toBe(401);
    // Blocked: the right password does not help, and the answer says when to come back.
    const blocked = await client.login("frank", password);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json()).toMatchObject({ error: { code: "too_many_login_attempts", type: "rate_limit_error" } });
    expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(800);
    expect(Number(blocked.headers["retry-after"])).toBeLessThanOrEqual(900);
    // Another account from the same address is not blocked by frank's count...
    const other = await t.accounts.create("grace");
    expect((await new ConsoleClient(t.app).login("grace", other.temporary_password)).statusCode).toBe(200);
    // ...until the address itself has failed too often (20 in the window), whatever the account name.
    for (let i = 0; i < 15; i++) expect((await client.login(`nobody${i}`, "x")).statusCode).toBe(401);
    const byAddress = await new ConsoleClient(t.app).login("grace", other.temporary_password);
    expect(byAddress.statusCode).toBe(429);
    // The window slides: 15 minutes later both may try again.
    clock += 15 * 60_000 + 1000;
    expect((await new ConsoleClient(t.app).login("frank", password)).statusCode).toBe(200);
  });

  it("disables an account: its keys get 401 at once and its sessions end; enabling restores the keys", async () => {
    await app();
    const created = await t.accounts.create("heidi");
    const { client, password } = await firstLogin(created);
    expect(await chat(created.key.key)).toBe(200);
    const disabled = t.accounts.disable("heidi");
    expect(disabled).toMatchObject({ status: "disabled", disabled_at: expect.any(Number) });
    expect(await chat(created.key.key)).toBe(401);
    expect((await client.get("/v1/console/keys")).statusCode).toBe(401);
    const login = await new ConsoleClient(t.app).login("heidi", password);
    expect(login.statusCode).toBe(403);
    expect(login.json()).toMatchObject({ error: { code: "account_disabled" } });
    t.accounts.enable("heidi");
    expect(await chat(created.key.key)).toBe(200);
    expect((await new ConsoleClient(t.app).login("heidi", password)).statusCode).toBe(200);
  });

  it("resets a password: sessions end and the next login must change it again", async () => {
    await app();
    const created = await t.accounts.create("ivan");
    const { client, password } = await firstLogin(created);
    const reset = await t.accounts.resetPassword("ivan");
    expect(reset.temporary_password).not.toBe(created.temporary_password);
    expect(reset.account.must_change_password).toBe(true);
    expect((await client.get("/v1/console/keys")).statusCode).toBe(401);
    expect((await new ConsoleClient(t.app).login("ivan", password)).statusCode).toBe(401);
    const next = new ConsoleClient(t.app);
    expect((await next.login("ivan", reset.temporary_password)).json()).toMatchObject({ account: { must_change_password: true } });
    expect((await next.get("/v1/console/keys")).statusCode).toBe(403);
    // The keys were not touched by the reset.
    expect(await chat(created.key.key)).toBe(200);
  });

  it("refuses bad and duplicate account names", async () => {
    await app();
    await expect(t.accounts.create("has space")).rejects.toMatchObject({ code: "invalid_account" });
    await t.accounts.create("judy");
    await expect(t.accounts.create("judy")).rejects.toMatchObject({ code: "account_exists" });
    expect(() => t.accounts.disable("nobody")).toThrow(/No account named 'nobody'/);
    // The default account has no console password until the operator gives it one.
    expect(t.accounts.get("local")).toMatchObject({ can_log_in: false });
    expect((await new ConsoleClient(t.app).login("local", "")).statusCode).toBe(401);
  });
});

describe("the console's HTML pages", () => {
  it("logs in through forms, forces the password change, shows a new key once", async () => {
    await app();
    const created = await t.accounts.create("kim");
    const browser = new ConsoleClient(t.app);
    const home = await browser.page("/v1/console");
    expect(home.statusCode).toBe(303);
    expect(home.headers.location).toBe("/v1/console/login");

    const loginPage = await browser.page("/v1/console/login");
    expect(loginPage.statusCode).toBe(200);
    expect(loginPage.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(loginPage.headers["content-security-policy"]).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]+'; .*form-action 'self'; frame-ancestors 'none'/);
    expect(loginPage.headers["cache-control"]).toBe("no-store");
    expect(loginPage.headers["x-frame-options"]).toBe("DENY");
    expect(loginPage.body).not.toMatch(/<script|https?:\/\/(?!127)/);
    const loginToken = /name="csrf_token" value="([^"]+)"/.exec(loginPage.body)![1]!;
    expect(browser.cookies.get("svc_login")).toBe(loginToken);

    // Without the login form's token (a post from elsewhere), nothing happens.
    const forged = await browser.form("/v1/console/login", { account: "kim", password: created.temporary_password });
    expect(forged.statusCode).toBe(403);
    expect(forged.body).toContain("The login form expired");

    const token2 = /name="csrf_token" value="([^"]+)"/.exec(forged.body)![1]!;
    const wrong = await browser.form("/v1/console/login", { csrf_token: token2, account: "kim", password: "nope" });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain("Incorrect account name or password.");
    expect(wrong.body).toContain('value="kim"');
    expect(wrong.body).not.toContain("nope");

    const token3 = /name="csrf_token" value="([^"]+)"/.exec(wrong.body)![1]!;
    const ok = await browser.form("/v1/console/login", { csrf_token: token3, account: "kim", password: created.temporary_password });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe("/v1/console/password");
    expect((await browser.page("/v1/console")).headers.location).toBe("/v1/console/password");

    const passwordPage = await browser.page("/v1/console/password");
    expect(passwordPage.body).toContain("Your password is a temporary one");
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(passwordPage.body)![1]!;
    const mismatch = await browser.form("/v1/console/password", { csrf_token: csrf, current_password: created.temporary_password, new_password: "a long new password", new_password_again: "another one" });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.body).toContain("The two new passwords differ.");
    const changed = await browser.form("/v1/console/password", { csrf_token: csrf, current_password: created.temporary_password, new_password: "a long new password", new_password_again: "a long new password" });
    expect(changed.statusCode).toBe(303);
    expect(changed.headers.location).toBe("/v1/console?notice=password_changed");

    const console = await browser.page("/v1/console?notice=password_changed");
    expect(console.statusCode).toBe(200);
    expect(console.body).toContain("Your password is changed.");
    expect(console.body).toContain(`sk-svc-…${created.key.key.slice(-4)}`);
    expect(console.body).not.toContain(created.key.key);

    const made = await browser.form("/v1/console/keys", { csrf_token: csrf, name: "<b>editor</b>", reasoning_trace: "on" });
    expect(made.statusCode).toBe(200);
    const key = /data-testid="created-key">(sk-svc-[0-9a-f]{32})</.exec(made.body)![1]!;
    expect(made.body).toContain("&lt;b&gt;editor&lt;/b&gt;");
    expect(await chat(key)).toBe(200);
    const after = await browser.page("/v1/console");
    expect(after.body).not.toContain(key);
    expect(after.body).not.toContain("<b>editor</b>");

    const id = t.keys.list("kim").find((k) => k.name === "<b>editor</b>")!.id;
    const revoked = await browser.form(`/v1/console/keys/${id}/revoke`, { csrf_token: csrf });
    expect(revoked.headers.location).toBe("/v1/console?notice=key_revoked");
    expect(await chat(key)).toBe(401);

    const logout = await browser.form("/v1/console/logout", { csrf_token: csrf });
    expect(logout.headers.location).toBe("/v1/console/login?notice=logged_out");
    expect(browser.cookies.has("svc_session")).toBe(false);
  });
});
