// The account holders' console as small HTML pages: no scripts, no external assets (the server is offline),
// one inline stylesheet allowed by its hash. Every value is escaped; every form posts with a CSRF token.
import { createHash } from "node:crypto";
import type { AuditRecord, AuditStats } from "../audit/audit-service.js";
import type { CreatedKey, KeyInfo } from "../keys/keys-service.js";
import type { AccountInfo } from "./accounts-service.js";
import { MIN_PASSWORD_LENGTH } from "./passwords.js";

const STYLE = `
:root { color-scheme: light dark; --bg: #f7f7f8; --panel: #fff; --text: #1d1d1f; --muted: #6e6e73; --border: #d9d9de;
  --accent: #2f6fed; --danger: #c9372c; --code-bg: #f0f0f3; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 14px; }
@media (prefers-color-scheme: dark) { :root { --bg: #1b1b1f; --panel: #24242a; --text: #ececf1; --muted: #9a9aa3; --border: #3a3a42; --code-bg: #2d2d34; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
header { display: flex; justify-content: space-between; align-items: center; padding: 12px 20px; background: var(--panel); border-bottom: 1px solid var(--border); }
header .brand { font-weight: 700; font-size: 18px; }
main { max-width: 1040px; margin: 0 auto; padding: 16px 20px; display: flex; flex-direction: column; gap: 12px; }
main.narrow { max-width: 480px; margin-top: 48px; }
.card { background: var(--panel); border: 1px solid var(--border); border-radius: 8px; padding: 12px 14px; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 15px; margin: 0 0 8px; }
label { display: block; margin: 8px 0; } label span { display: block; color: var(--muted); margin-bottom: 2px; }
input[type=text], input[type=password] { width: 100%; font: inherit; color: inherit; background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: 6px 8px; }
button { font: inherit; color: inherit; background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: 4px 10px; cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { border-color: var(--danger); color: var(--danger); }
form.inline { display: inline; margin: 0; }
.row { display: flex; gap: 10px; align-items: end; flex-wrap: wrap; } .row label { margin: 0; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--border); }
th { color: var(--muted); font-weight: 500; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.secret { display: block; background: var(--code-bg); padding: 8px 10px; border-radius: 6px; user-select: all; word-break: break-all; font-size: 15px; }
.spaced { margin-top: 12px; }
.muted { color: var(--muted); } .error { color: var(--danger); }
.notice { background: #e7f0ff; color: #123a7a; padding: 8px 10px; border-radius: 6px; }
.warn { background: #fff4d6; color: #5c4400; padding: 8px 10px; border-radius: 6px; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 8px; }
.figure { border: 1px solid var(--border); border-radius: 6px; padding: 8px; } .figure b { display: block; font-size: 18px; }
`;

/** For the Content-Security-Policy: the one inline stylesheet, and nothing else. */
export const STYLE_HASH = `sha256-${createHash("sha256").update(STYLE, "utf8").digest("base64")}`;

export const CONSOLE_CSP = `default-src 'none'; style-src '${STYLE_HASH}'; img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

export function escapeHtml(value: unknown): string {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

function layout(title: string, body: string, options: { account?: AccountInfo; csrf?: string; narrow?: boolean } = {}): string {
  const signedIn = options.account
    ? `<div><span class="muted">Signed in as</span> <b data-testid="console-account">${escapeHtml(options.account.name)}</b>
       <form class="inline" method="post" action="/v1/console/logout">${csrfField(options.csrf)}<button type="submit" data-testid="console-logout">Log out</button></form></div>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · svc console</title><style>${STYLE}</style></head>
<body><header><div class="brand">svc console</div>${signedIn}</header>
<main${options.narrow ? ' class="narrow"' : ""}>${body}</main></body></html>`;
}

function csrfField(token: string | undefined): string {
  return token ? `<input type="hidden" name="csrf_token" value="${escapeHtml(token)}">` : "";
}

function message(kind: "error" | "notice" | "warn", text: string | null | undefined): string {
  return text ? `<p class="${kind}" data-testid="console-${kind}" role="${kind === "error" ? "alert" : "status"}">${escapeHtml(text)}</p>` : "";
}

export function loginPage(options: { csrf: string; account?: string; error?: string | null; notice?: string | null }): string {
  return layout(
    "Log in",
    `<div class="card"><h1>Log in</h1>
${message("notice", options.notice)}${message("error", options.error)}
<form method="post" action="/v1/console/login" data-testid="login-form">${csrfField(options.csrf)}
<label><span>Account</span><input type="text" name="account" autocomplete="username" required value="${escapeHtml(options.account ?? "")}" data-testid="login-account"></label>
<label><span>Password</span><input type="password" name="password" autocomplete="current-password" required data-testid="login-password"></label>
<button type="submit" class="primary" data-testid="login-submit">Log in</button></form>
<p class="muted">Your account and a temporary password come from the operator of this server.</p></div>`,
    { narrow: true },
  );
}

export function passwordPage(options: { account: AccountInfo; csrf: string; error?: string | null }): string {
  const forced = options.account.must_change_password;
  return layout(
    "Change password",
    `<div class="card"><h1>${forced ? "Choose your password" : "Change password"}</h1>
${forced ? message("warn", "Your password is a temporary one from the operator. Choose your own before you continue.") : ""}
${message("error", options.error)}
<form method="post" action="/v1/console/password" data-testid="password-form">${csrfField(options.csrf)}
<label><span>${forced ? "Temporary password" : "Current password"}</span><input type="password" name="current_password" autocomplete="current-password" required data-testid="password-current"></label>
<label><span>New password (at least ${MIN_PASSWORD_LENGTH} characters)</span><input type="password" name="new_password" autocomplete="new-password" required minlength="${MIN_PASSWORD_LENGTH}" data-testid="password-new"></label>
<label><span>New password again</span><input type="password" name="new_password_again" autocomplete="new-password" required data-testid="password-again"></label>
<button type="submit" class="primary" data-testid="password-submit">Save password</button>
${forced ? "" : ' <a href="/v1/console">Cancel</a>'}</form></div>`,
    { account: options.account, csrf: options.csrf, narrow: true },
  );
}

export function keyCreatedPage(options: { account: AccountInfo; csrf: string; key: CreatedKey }): string {
  return layout(
    "New key",
    `<div class="card"><h1>Your new key</h1>
<p class="warn"><b>Copy this key now.</b> It is shown once; the server keeps only its hash and cannot show it again.</p>
<code class="secret" data-testid="created-key">${escapeHtml(options.key.key)}</code>
<p class="muted">${escapeHtml(options.key.name ?? "unnamed")} · reasoning trace ${options.key.reasoning_trace ? "on" : "off"}. Use it as
<code>Authorization: Bearer …</code> (Chat Completions, Responses) or <code>x-api-key: …</code> (Messages).</p>
<p><a href="/v1/console" data-testid="created-key-done">I have copied it: back to the console</a></p></div>`,
    { account: options.account, csrf: options.csrf, narrow: true },
  );
}

export interface HomeView {
  account: AccountInfo;
  csrf: string;
  keys: KeyInfo[];
  stats: AuditStats;
  records: AuditRecord[];
  timeZone: string;
  retentionDays: number;
  notice?: string | null;
  error?: string | null;
}

function when(seconds: number | null, timeZone: string): string {
  if (seconds === null) return "never";
  return new Intl.DateTimeFormat("en-GB", { timeZone, dateStyle: "medium", timeStyle: "medium" }).format(seconds * 1000);
}

const int = (n: number | null | undefined) => (n === null || n === undefined ? "–" : n.toLocaleString("en-US"));

function keyRows(view: HomeView): string {
  const active = view.keys.filter((k) => k.revoked_at === null);
  if (active.length === 0) return `<tr><td colspan="6" class="muted">No active keys. Create one below.</td></tr>`;
  return active
    .map(
      (k) => `<tr data-testid="console-key-row" data-key-id="${escapeHtml(k.id)}">
<td><code>${escapeHtml(k.hint)}</code></td><td>${k.name ? escapeHtml(k.name) : '<span class="muted">unnamed</span>'}</td>
<td>${escapeHtml(when(k.created_at, view.timeZone))}</td><td>${escapeHtml(when(k.last_used_at, view.timeZone))}</td>
<td><form class="inline" method="post" action="/v1/console/keys/${encodeURIComponent(k.id)}/reasoning_trace">${csrfField(view.csrf)}
<input type="hidden" name="enabled" value="${k.reasoning_trace ? "off" : "on"}">
<span data-testid="console-key-trace">${k.reasoning_trace ? "on" : "off"}</span> <button type="submit" data-testid="console-key-trace-toggle">Turn ${k.reasoning_trace ? "off" : "on"}</button></form></td>
<td><form class="inline" method="post" action="/v1/console/keys/${encodeURIComponent(k.id)}/revoke">${csrfField(view.csrf)}
<button type="submit" class="danger" data-testid="console-key-revoke">Revoke</button></form></td></tr>`,
    )
    .join("\n");
}

function recordRows(view: HomeView): string {
  if (view.records.length === 0) return `<tr><td colspan="9" class="muted">No requests recorded yet.</td></tr>`;
  return view.records
    .map(
      (r) => `<tr data-testid="console-audit-row" data-request-id="${escapeHtml(r.id)}">
<td>${escapeHtml(when(r.created_at, view.timeZone))}</td><td>${escapeHtml(r.surface)}</td><td><code>${escapeHtml(r.method)} ${escapeHtml(r.path)}</code></td>
<td>${escapeHtml(r.model ?? "–")}${r.mode ? ` <span class="muted">(${escapeHtml(r.mode)})</span>` : ""}</td>
<td>${r.status}${r.error_code ? ` <span class="muted">${escapeHtml(r.error_code)}</span>` : ""}${r.aborted ? ' <span class="muted">cut</span>' : ""}</td>
<td class="num">${int(r.usage.input_tokens)} / ${int(r.usage.output_tokens)}</td><td class="num">${int(r.latency_ms)} ms</td>
<td><code class="muted">${escapeHtml(r.id)}</code></td>
<td><form class="inline" method="post" action="/v1/console/audit/${encodeURIComponent(r.id)}/erase">${csrfField(view.csrf)}
<button type="submit" data-testid="console-audit-erase">Erase</button></form></td></tr>`,
    )
    .join("\n");
}

export function homePage(view: HomeView): string {
  const s = view.stats;
  const figure = (label: string, value: string, id: string) => `<div class="figure"><span class="muted">${label}</span><b data-testid="usage-${id}">${value}</b></div>`;
  const days = s.days
    .slice(-14)
    .reverse()
    .map(
      (d) =>
        `<tr><td>${escapeHtml(d.date)}</td><td class="num">${int(d.requests)}</td><td class="num">${int(d.errors)}</td><td class="num">${int(d.tokens.input)}</td><td class="num">${int(d.tokens.output)}</td><td class="num">${int(d.latency_ms.p50)} ms</td></tr>`,
    )
    .join("");
  return layout(
    "Console",
    `${message("notice", view.notice)}${message("error", view.error)}
<section class="card" data-testid="console-keys"><h2>Your keys</h2>
<table><thead><tr><th>Key</th><th>Name</th><th>Created</th><th>Last used</th><th>Reasoning trace</th><th></th></tr></thead>
<tbody>${keyRows(view)}</tbody></table>
<form method="post" action="/v1/console/keys" class="row spaced" data-testid="console-new-key">${csrfField(view.csrf)}
<label><span>New key name</span><input type="text" name="name" maxlength="100" placeholder="e.g. my IDE" data-testid="console-key-name"></label>
<label><input type="checkbox" name="reasoning_trace" value="on" data-testid="console-key-trace-new"> Reasoning trace</label>
<button type="submit" class="primary" data-testid="console-key-create">Create key</button></form>
<p class="muted">Keys are shown once, when they are made. The reasoning trace adds the model's thought to Responses output for that key.</p></section>
<section class="card" data-testid="console-usage"><h2>Usage, last 30 days <span class="muted">(${escapeHtml(view.timeZone)})</span></h2>
<div class="figures">${figure("Requests", int(s.requests), "requests")}${figure("Input tokens", int(s.tokens.input), "input")}${figure("Output tokens", int(s.tokens.output), "output")}${figure("Error rate", `${(s.error_rate * 100).toFixed(1)} %`, "error-rate")}${figure("Latency p50 / p95", `${int(s.latency_ms.p50)} / ${int(s.latency_ms.p95)} ms`, "latency")}</div>
${days ? `<table class="spaced"><thead><tr><th>Day</th><th class="num">Requests</th><th class="num">Errors</th><th class="num">Input tokens</th><th class="num">Output tokens</th><th class="num">Latency p50</th></tr></thead><tbody>${days}</tbody></table>` : ""}</section>
<section class="card" data-testid="console-audit"><h2>Recent requests</h2>
<table><thead><tr><th>Time</th><th>Surface</th><th>Request</th><th>Model</th><th>Status</th><th class="num">Tokens in / out</th><th class="num">Latency</th><th>Request id</th><th></th></tr></thead>
<tbody>${recordRows(view)}</tbody></table>
<p class="muted">The audit keeps no content: no prompts, answers or files. Records are removed after ${view.retentionDays} days; Erase removes one now.</p></section>
<p><a href="/v1/console/password" data-testid="console-change-password">Change password</a></p>`,
    { account: view.account, csrf: view.csrf },
  );
}

export function errorPage(status: number, text: string): string {
  return layout("Error", `<div class="card"><h1>${status}</h1>${message("error", text)}<p><a href="/v1/console">Back to the console</a></p></div>`, { narrow: true });
}
