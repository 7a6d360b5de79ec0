// Accounts: the one service behind the operator's consoles (the desktop window and `svc accounts`) and the
// account holders' self-service console. The operator creates an account and hands its holder a temporary
// password (shown once) and its first key (shown once); the holder's first login must replace the password.
// Disabling an account ends its console sessions and makes its keys fail at once (KeysService.authenticate
// reads the account on every request).
import { createHash, randomBytes } from "node:crypto";
import { AppError } from "../../core/errors.js";
import type { AccountRow } from "../../store/accounts-repository.js";
import type { Store } from "../../store/store.js";
import type { CreatedKey, KeyInfo, KeysService } from "../keys/keys-service.js";
import { LoginThrottle } from "./login-throttle.js";
import { burnPasswordCheck, hashPassword, passwordProblem, temporaryPassword, verifyPassword } from "./passwords.js";

export const ACCOUNT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const FIRST_KEY_NAME = "first key";

export interface AccountInfo {
  id: string;
  name: string;
  status: "active" | "disabled";
  created_at: number;
  /** Whether the account has a console password (accounts made by creating a key for them have none). */
  can_log_in: boolean;
  /** The password is a temporary one: the next login must change it. */
  must_change_password: boolean;
  password_changed_at: number | null;
  last_login_at: number | null;
  disabled_at: number | null;
  active_keys: number;
}

export interface CreatedAccount {
  account: AccountInfo;
  /** Shown once: only its hash is stored. */
  temporary_password: string;
  /** The account's first active key, shown once. */
  key: CreatedKey;
}

export interface PasswordReset {
  account: AccountInfo;
  temporary_password: string;
}

export interface ConsoleSession {
  account: AccountInfo;
  /** Sent back with every form and state-changing request. */
  csrfToken: string;
  /** Epoch seconds: the later of these ends the session. */
  expiresAt: number;
  idleExpiresAt: number;
  tokenHash: string;
}

export interface SessionPolicy {
  /** A session unused this long ends. */
  idleSeconds: number;
  /** A session ends this long after login, used or not. */
  maxSeconds: number;
}

export const DEFAULT_SESSION_POLICY: SessionPolicy = { idleSeconds: 30 * 60, maxSeconds: 12 * 60 * 60 };

export interface AccountsServiceOptions {
  session?: Partial<SessionPolicy>;
  throttle?: LoginThrottle;
  /** Epoch ms; tests move it. */
  now?: () => number;
}

function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

function notFound(name: string): AppError {
  return new AppError("not_found", `No account named '${name}'.`, { code: "account_not_found" });
}

export function invalidCredentials(): AppError {
  return new AppError("authentication", "Incorrect account name or password.", { code: "invalid_credentials" });
}

export class AccountsService {
  readonly session: SessionPolicy;
  readonly throttle: LoginThrottle;
  private readonly now: () => number;

  constructor(
    private readonly store: Store,
    private readonly keys: KeysService,
    options: AccountsServiceOptions = {},
  ) {
    this.session = { ...DEFAULT_SESSION_POLICY, ...options.session };
    this.now = options.now ?? Date.now;
    this.throttle = options.throttle ?? new LoginThrottle(undefined, this.now);
  }

  private seconds(): number {
    return Math.floor(this.now() / 1000);
  }

  private describe(row: AccountRow): AccountInfo {
    const keys = this.store.keys.list(row.id);
    return {
      id: row.id,
      name: row.name,
      status: row.status === "disabled" ? "disabled" : "active",
      created_at: row.created_at,
      can_log_in: row.password_hash !== null,
      must_change_password: row.must_change_password === 1,
      password_changed_at: row.password_changed_at,
      last_login_at: row.last_login_at,
      disabled_at: row.disabled_at,
      active_keys: keys.filter((k) => k.revoked_at === null).length,
    };
  }

  private row(nameOrId: string): AccountRow {
    const row = this.store.accounts.findByName(nameOrId) ?? this.store.accounts.findById(nameOrId);
    if (!row) throw notFound(nameOrId);
    return row;
  }

  // The operator's side.

  list(): AccountInfo[] {
    return this.store.accounts.list().map((row) => this.describe(row));
  }

  get(nameOrId: string): AccountInfo {
    return this.describe(this.row(nameOrId));
  }

  /** A new active account with a temporary password and its first key, both shown only in this result. */
  async create(name: string, options: { keyName?: string } = {}): Promise<CreatedAccount> {
    const trimmed = String(name ?? "").trim();
    if (!ACCOUNT_NAME_PATTERN.test(trimmed))
      throw new AppError("invalid_request", "An account name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit.", {
        code: "invalid_account",
        param: "name",
      });
    const password = temporaryPassword();
    const hash = await hashPassword(password);
    const row = this.store.accounts.insert(trimmed, hash, true, this.seconds());
    if (!row) throw new AppError("conflict", `An account named '${trimmed}' exists already.`, { code: "account_exists", param: "name" });
    const key = this.keys.create({ account: row.name, name: options.keyName?.trim() || FIRST_KEY_NAME });
    return { account: this.describe(row), temporary_password: password, key };
  }

  /** A new temporary password (the next login must change it); the account's console sessions end. */
  async resetPassword(nameOrId: string): Promise<PasswordReset> {
    const row = this.row(nameOrId);
    const password = temporaryPassword();
    this.store.accounts.setPassword(row.id, await hashPassword(password), true, this.seconds());
    this.store.consoleSessions.deleteForAccount(row.id);
    return { account: this.get(row.id), temporary_password: password };
  }

  /** Its keys get 401 from the next request on, and its console sessions end. */
  disable(nameOrId: string): AccountInfo {
    const row = this.row(nameOrId);
    if (row.status !== "disabled") this.store.accounts.setStatus(row.id, "disabled", this.seconds());
    this.store.consoleSessions.deleteForAccount(row.id);
    return this.get(row.id);
  }

  enable(nameOrId: string): AccountInfo {
    const row = this.row(nameOrId);
    if (row.status !== "active") this.store.accounts.setStatus(row.id, "active", this.seconds());
    return this.get(row.id);
  }

  // The account holder's side (the self-service console).

  /**
   * Checks the password and opens a session; the caller sets its token as a cookie. Throttled per account
   * name and per address: once blocked, the password is not even checked (429 with Retry-After).
   */
  async login(name: string, password: string, address: string): Promise<{ token: string; session: ConsoleSession }> {
    const accountName = String(name ?? "").trim();
    const wait = this.throttle.retryAfter(accountName, address);
    if (wait > 0)
      throw new AppError("rate_limit", `Too many failed logins. Try again in ${wait} seconds.`, { code: "too_many_login_attempts", retryAfter: wait });
    const row = ACCOUNT_NAME_PATTERN.test(accountName) ? this.store.accounts.findByName(accountName) : undefined;
    const ok = row?.password_hash ? await verifyPassword(String(password ?? ""), row.password_hash) : await burnPasswordCheck(String(password ?? ""));
    if (!row || !ok) {
      this.throttle.fail(accountName, address);
      throw invalidCredentials();
    }
    if (row.status === "disabled")
      throw new AppError("permission", "This account is disabled. Ask the operator of this server to enable it.", { code: "account_disabled" });
    this.throttle.succeed(accountName);
    const now = this.seconds();
    this.store.consoleSessions.deleteExpired(now, this.session.idleSeconds);
    const token = randomBytes(32).toString("base64url");
    const sessionRow = {
      token_hash: hashToken(token),
      account_id: row.id,
      csrf_token: randomBytes(24).toString("base64url"),
      created_at: now,
      last_seen_at: now,
      expires_at: now + this.session.maxSeconds,
    };
    this.store.consoleSessions.insert(sessionRow);
    this.store.accounts.touchLogin(row.id, now);
    return { token, session: this.sessionOf(sessionRow.token_hash)! };
  }

  /** The live session a cookie names, or null (unknown, expired, idle too long, or its account disabled). */
  resume(token: string | undefined): ConsoleSession | null {
    if (!token) return null;
    const hash = hashToken(token);
    const session = this.sessionOf(hash);
    if (session) this.store.consoleSessions.touch(hash, this.seconds());
    return session;
  }

  private sessionOf(tokenHash: string): ConsoleSession | null {
    const row = this.store.consoleSessions.find(tokenHash);
    if (!row) return null;
    const now = this.seconds();
    const account = this.store.accounts.findById(row.account_id);
    if (row.expires_at <= now || row.last_seen_at + this.session.idleSeconds <= now || !account || account.status !== "active") {
      this.store.consoleSessions.delete(tokenHash);
      return null;
    }
    return {
      account: this.describe(account),
      csrfToken: row.csrf_token,
      expiresAt: row.expires_at,
      idleExpiresAt: Math.min(row.expires_at, now + this.session.idleSeconds),
      tokenHash,
    };
  }

  logout(session: ConsoleSession): void {
    this.store.consoleSessions.delete(session.tokenHash);
  }

  /** Replaces the password (the temporary one included); the account's other sessions end. */
  async changePassword(session: ConsoleSession, current: string, next: string): Promise<AccountInfo> {
    const row = this.row(session.account.id);
    if (!row.password_hash || !(await verifyPassword(String(current ?? ""), row.password_hash)))
      throw new AppError("invalid_request", "The current password is not correct.", { code: "invalid_current_password", param: "current_password" });
    const problem = passwordProblem(String(next ?? ""), String(current));
    if (problem) throw new AppError("invalid_request", problem, { code: "invalid_new_password", param: "new_password" });
    this.store.accounts.setPassword(row.id, await hashPassword(String(next)), false, this.seconds());
    this.store.consoleSessions.deleteForAccount(row.id, session.tokenHash);
    return this.get(row.id);
  }

  listKeys(accountId: string): KeyInfo[] {
    return this.keys.list(this.row(accountId).name);
  }

  createKey(accountId: string, options: { name?: string; reasoningTrace?: boolean }): CreatedKey {
    const name = options.name?.trim() || undefined;
    if (name && name.length > 100) throw new AppError("invalid_request", "A key name has at most 100 characters.", { code: "invalid_name", param: "name" });
    return this.keys.create({ account: this.row(accountId).name, name, reasoningTrace: options.reasoningTrace === true });
  }

  /** Another account's key is as unknown as a key that does not exist. */
  private ownKey(accountId: string, keyId: string): KeyInfo {
    const key = this.keys.list(this.row(accountId).name).find((k) => k.id === keyId);
    if (!key) throw new AppError("not_found", `No API key with id '${keyId}'.`, { code: "key_not_found" });
    return key;
  }

  revokeKey(accountId: string, keyId: string): KeyInfo {
    this.ownKey(accountId, keyId);
    return this.keys.revoke(keyId);
  }

  setKeyTrace(accountId: string, keyId: string, enabled: boolean): KeyInfo {
    this.ownKey(accountId, keyId);
    return this.keys.setReasoningTrace(keyId, enabled);
  }
}
