// The operator's window (the Audit page, the accounts section of the Keys page) and the account holders'
// self-service console, in Chromium against the real server and engine. Screenshots land in
// test/.artifacts/screenshots.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SCREENSHOTS, startUiHarness, uiSkipReason, type UiHarness } from "./harness.js";

const skip = uiSkipReason();

describe.skipIf(skip !== null)("accounts and audit in the browser", () => {
  let ui: UiHarness;

  beforeAll(async () => {
    ui = await startUiHarness(inject("tinyModelPath"));
  });

  afterAll(async () => {
    await ui?.close();
  });

  async function post(path: string, headers: Record<string, string>, body: unknown): Promise<Response> {
    return fetch(`${ui.server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  }

  const chatBody = { model: "svc", messages: [{ role: "user", content: "hi" }], reasoning_effort: "none", max_tokens: 5 };
  const chat = async (key: string) => (await post("/v1/chat/completions", { authorization: `Bearer ${key}` }, chatBody)).status;

  describe("the Audit page", () => {
    it("shows the window account's requests with a chart and filters, and erases a record", async () => {
      const key = await ui.service.windowKey();
      const auth = { authorization: `Bearer ${key}` };
      const sent: Record<string, string> = {};
      const remember = (name: string, res: Response) => (sent[name] = res.headers.get("x-request-id")!);
      remember("chat", await post("/v1/chat/completions", auth, { ...chatBody, session_id: "ui-session" }));
      remember("responses", await post("/v1/responses", auth, { model: "svc", input: "hi", reasoning: { effort: "low" }, max_output_tokens: 12 }));
      remember("messages", await post("/v1/messages", { "x-api-key": key }, { model: "claude-haiku", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }));
      remember("bad", await post("/v1/chat/completions", auth, { ...chatBody, n: 3 }));

      await ui.open("audit");
      const rows = ui.page.getByTestId("audit-row");
      await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(4);
      expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-request-id")))).toEqual([sent.bad, sent.messages, sent.responses, sent.chat]);
      expect(await ui.page.getByTestId("audit-summary-requests").textContent()).toBe("4");
      expect(await ui.page.getByTestId("audit-summary-errors").textContent()).toBe("25.0 %");
      // Today's bar counts the four requests; the token chart has a bar for today too.
      const today = new Intl.DateTimeFormat("en-CA", { timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(new Date());
      const requestBars = ui.page.getByTestId("audit-chart-requests").getByTestId("audit-bar");
      expect(await requestBars.count()).toBe(14);
      expect(await ui.page.getByTestId("audit-chart-requests").locator(`[data-date="${today}"]`).getAttribute("data-value")).toBe("4");
      expect(Number(await ui.page.getByTestId("audit-chart-tokens").locator(`[data-date="${today}"]`).getAttribute("data-value"))).toBeGreaterThan(0);
      expect(await ui.page.getByTestId("audit-chart-requests").locator(`[data-date="${today}"] rect`).count()).toBe(2);
      const first = rows.first();
      expect(await first.textContent()).toContain("unsupported_value");
      await ui.screenshot("audit");

      await ui.page.getByTestId("audit-filter-surface").selectOption("messages");
      await expect.poll(() => rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-request-id")))).toEqual([sent.messages]);
      await ui.page.getByTestId("audit-filter-surface").selectOption("");
      await ui.page.getByTestId("audit-filter-status").selectOption("error");
      await expect.poll(() => rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-request-id")))).toEqual([sent.bad]);
      await ui.page.getByTestId("audit-filter-status").selectOption("");
      await ui.page.getByTestId("audit-filter-session").fill("ui-session");
      await expect.poll(() => rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-request-id")))).toEqual([sent.chat]);
      await ui.screenshot("audit-filtered");
      await ui.page.getByTestId("audit-filter-session").fill("");
      await expect.poll(() => rows.count()).toBe(4);

      // Erase the failed request: gone from the table, the figures and the API.
      const bad = ui.page.locator(`[data-testid="audit-row"][data-request-id="${sent.bad}"]`);
      await bad.getByTestId("audit-erase").click();
      await bad.getByTestId("audit-erase-confirm").click();
      await expect.poll(() => rows.count()).toBe(3);
      await expect.poll(() => ui.page.getByTestId("audit-summary-errors").textContent()).toBe("0.0 %");
      const gone = await fetch(`${ui.server.url}/v1/audit/${sent.bad}`, { headers: auth });
      expect(gone.status).toBe(404);
    });
  });

  describe("the accounts section", () => {
    it("creates an account with a temporary password and first key shown once, disables, enables and resets it", async () => {
      await ui.open("keys");
      await ui.page.getByTestId("account-name").fill("team-a");
      await ui.page.getByTestId("account-create").click();
      const password = (await ui.page.getByTestId("account-temp-password").textContent())!.trim();
      const key = (await ui.page.getByTestId("account-first-key").textContent())!.trim();
      expect(password).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){4}$/);
      expect(key).toMatch(/^sk-svc-[0-9a-f]{32}$/);
      expect(await ui.page.getByTestId("account-console-url").textContent()).toBe(`${ui.apiUrl}/v1/console`);
      await ui.screenshot("accounts-created");

      // What the holder gets works: the key at once, the temporary password for a first login.
      expect(await chat(key)).toBe(200);
      const login = await post("/v1/console/login", {}, { account: "team-a", password });
      expect(login.status).toBe(200);
      expect(await login.json()).toMatchObject({ account: { must_change_password: true } });

      await ui.page.getByTestId("account-created-done").click();
      expect(await ui.page.content()).not.toContain(password);
      expect(await ui.page.content()).not.toContain(key);
      const row = ui.page.locator('[data-testid="account-row"][data-account="team-a"]');
      await expect.poll(() => row.textContent()).toContain("temporary password");
      expect(await row.textContent()).toContain(`sk-svc-…${key.slice(-4)}`);

      await row.getByTestId("account-disable").click();
      await row.getByTestId("account-disable-confirm").click();
      await expect.poll(() => row.getAttribute("data-status")).toBe("disabled");
      expect(await chat(key)).toBe(401);
      await row.getByTestId("account-enable").click();
      await expect.poll(() => row.getAttribute("data-status")).toBe("active");
      expect(await chat(key)).toBe(200);

      await row.getByTestId("account-reset-password-button").click();
      const fresh = (await ui.page.getByTestId("account-reset-password").textContent())!.trim();
      expect(fresh).not.toBe(password);
      expect((await post("/v1/console/login", {}, { account: "team-a", password })).status).toBe(401);
      expect((await post("/v1/console/login", {}, { account: "team-a", password: fresh })).status).toBe(200);
      await ui.screenshot("accounts");
      await ui.page.getByTestId("account-reset-done").click();

      // The window's own account stays enabled: its chat depends on it, so Disable is not offered there.
      const local = ui.page.locator('[data-testid="account-row"][data-account="local"]');
      expect(await local.getByTestId("account-disable").count()).toBe(0);
      expect(await local.getByTestId("account-window-note").textContent()).toBe("Holds the window's key");
      expect(await local.getAttribute("data-status")).toBe("active");
    });
  });

  describe("the account holders' console", () => {
    it("logs in, forces the password change, makes, flags and revokes keys, and shows the holder's own audit", async () => {
      const created = await ui.server.accounts.create("holder");
      const context = await ui.browser.newContext({ viewport: { width: 1100, height: 900 } });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (err) => errors.push(err.message));
      // CSP violations (a blocked style, say) show here; a 401 on the wrong password is the page working.
      page.on("console", (msg) => msg.type() === "error" && !msg.text().startsWith("Failed to load resource") && errors.push(msg.text()));
      try {
        await page.goto(`${ui.server.url}/v1/console`);
        expect(new URL(page.url()).pathname).toBe("/v1/console/login");
        await page.screenshot({ path: join(SCREENSHOTS, "console-login.png"), fullPage: true });
        await page.getByTestId("login-account").fill("holder");
        await page.getByTestId("login-password").fill("wrong password");
        await page.getByTestId("login-submit").click();
        expect(await page.getByTestId("console-error").textContent()).toContain("Incorrect account name or password.");
        expect(await page.getByTestId("login-account").inputValue()).toBe("holder");
        await page.getByTestId("login-password").fill(created.temporary_password);
        await page.getByTestId("login-submit").click();

        expect(new URL(page.url()).pathname).toBe("/v1/console/password");
        const cookie = (await context.cookies()).find((c) => c.name === "svc_session")!;
        expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/v1/console" });
        await page.screenshot({ path: join(SCREENSHOTS, "console-password.png"), fullPage: true });
        // Nothing else opens before the change.
        await page.goto(`${ui.server.url}/v1/console`);
        expect(new URL(page.url()).pathname).toBe("/v1/console/password");
        await page.getByTestId("password-current").fill(created.temporary_password);
        await page.getByTestId("password-new").fill("my own long password");
        await page.getByTestId("password-again").fill("my own long password");
        await page.getByTestId("password-submit").click();
        expect(new URL(page.url()).pathname).toBe("/v1/console");
        expect(await page.getByTestId("console-notice").textContent()).toBe("Your password is changed.");
        expect(await page.getByTestId("console-account").textContent()).toBe("holder");
        expect(await page.getByTestId("console-key-row").count()).toBe(1);

        // The first key's requests show up in the holder's own audit and usage.
        expect(await chat(created.key.key)).toBe(200);
        expect(await chat(created.key.key)).toBe(200);
        await page.reload();
        expect(await page.getByTestId("console-audit-row").count()).toBe(2);
        expect(await page.getByTestId("usage-requests").textContent()).toBe("2");

        await page.getByTestId("console-key-name").fill("my laptop");
        await page.getByTestId("console-key-create").click();
        const key = (await page.getByTestId("created-key").textContent())!.trim();
        expect(key).toMatch(/^sk-svc-[0-9a-f]{32}$/);
        await page.screenshot({ path: join(SCREENSHOTS, "console-key-created.png"), fullPage: true });
        expect(await chat(key)).toBe(200);
        await page.getByTestId("created-key-done").click();
        expect(await page.content()).not.toContain(key);

        const row = page.getByTestId("console-key-row").filter({ hasText: "my laptop" });
        expect(await row.textContent()).toContain(`sk-svc-…${key.slice(-4)}`);
        expect(await row.getByTestId("console-key-trace").textContent()).toBe("off");
        await row.getByTestId("console-key-trace-toggle").click();
        expect(await page.getByTestId("console-notice").textContent()).toContain("reasoning trace is on");
        expect(await page.getByTestId("console-key-row").filter({ hasText: "my laptop" }).getByTestId("console-key-trace").textContent()).toBe("on");
        expect(ui.server.keys.list("holder").find((k) => k.name === "my laptop")!.reasoning_trace).toBe(true);
        await page.screenshot({ path: join(SCREENSHOTS, "console.png"), fullPage: true });

        await page.getByTestId("console-key-row").filter({ hasText: "my laptop" }).getByTestId("console-key-revoke").click();
        expect(await page.getByTestId("console-notice").textContent()).toContain("The key is revoked");
        expect(await page.getByTestId("console-key-row").filter({ hasText: "my laptop" }).count()).toBe(0);
        expect(await chat(key)).toBe(401);

        // Erase one of the holder's records from the console.
        const record = page.getByTestId("console-audit-row").first();
        const id = (await record.getAttribute("data-request-id"))!;
        await record.getByTestId("console-audit-erase").click();
        expect(await page.getByTestId("console-notice").textContent()).toBe("The audit record is erased.");
        expect(await page.locator(`[data-request-id="${id}"]`).count()).toBe(0);

        await page.getByTestId("console-logout").click();
        expect(new URL(page.url()).pathname).toBe("/v1/console/login");
        await page.goto(`${ui.server.url}/v1/console`);
        expect(new URL(page.url()).pathname).toBe("/v1/console/login");
        expect(errors).toEqual([]);
      } finally {
        await context.close();
      }
    });
  });
});
