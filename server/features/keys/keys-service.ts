// API keys: sk-svc- followed by 32 lowercase hex characters (39 in all). Shown once at creation; only the
// SHA-256 is stored, and a presented key is compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { AppError } from "../../core/errors.js";
import type { Principal } from "../../core/request-context.js";
import { newId, nowSeconds } from "../../core/ids.js";
import { DEFAULT_ACCOUNT_NAME } from "../../store/accounts-repository.js";
import type { ApiKeyRow } from "../../store/keys-repository.js";
import type { Store } from "../../store/store.js";

export const KEY_PREFIX = "sk-svc-";
const KEY_PATTERN = /^sk-svc-[0-9a-f]{32}$/;

export interface KeyInfo {
  id: string;
  account_id: string;
  account: string;
  name: string | null;
  /** e.g. "sk-svc-…3f9a": enough to recognise a key, not to use it. */
  hint: string;
  reasoning_trace: boolean;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface CreatedKey extends KeyInfo {
  /** The key itself; returned only here, never again. */
  key: string;
}

/** Who a request is from, once its key checked out. */
export type { Principal };

export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

export function invalidKeyError(): AppError {
  return new AppError("authentication", "Incorrect API key provided. Create a key with `svc keys create`.", {
    code: "invalid_api_key",
  });
}

export class KeysService {
  constructor(private readonly store: Store) {}

  create(options: { account?: string; name?: string; reasoningTrace?: boolean } = {}): CreatedKey {
    const account = this.store.accounts.ensure(options.account ?? DEFAULT_ACCOUNT_NAME);
    const key = KEY_PREFIX + randomBytes(16).toString("hex");
    const row: ApiKeyRow = {
      id: newId("key_"),
      account_id: account.id,
      name: options.name ?? null,
      key_hash: hashKey(key),
      last_four: key.slice(-4),
      reasoning_trace: options.reasoningTrace ? 1 : 0,
      created_at: nowSeconds(),
      last_used_at: null,
      revoked_at: null,
    };
    this.store.keys.insert(row);
    return { ...this.describe(row), key };
  }

  list(account?: string): KeyInfo[] {
    const accountId = account === undefined ? undefined : this.store.accounts.findByName(account)?.id;
    if (account !== undefined && accountId === undefined) return [];
    return this.store.keys.list(accountId).map((row) => this.describe(row));
  }

  get(id: string): KeyInfo {
    const row = this.store.keys.findById(id);
    if (!row) throw new AppError("not_found", `No API key with id '${id}'.`, { code: "key_not_found" });
    return this.describe(row);
  }

  revoke(id: string): KeyInfo {
    const row = this.store.keys.findById(id);
    if (!row) throw new AppError("not_found", `No API key with id '${id}'.`, { code: "key_not_found" });
    this.store.keys.revoke(id, nowSeconds());
    return this.get(id);
  }

  setReasoningTrace(id: string, enabled: boolean): KeyInfo {
    if (!this.store.keys.setReasoningTrace(id, enabled)) throw new AppError("not_found", `No API key with id '${id}'.`, { code: "key_not_found" });
    return this.get(id);
  }

  /** Checks a presented key; throws 401 invalid_api_key for a missing, malformed, unknown or revoked key. */
  authenticate(presented: string | undefined): Principal {
    if (!presented || !KEY_PATTERN.test(presented)) throw invalidKeyError();
    const hash = hashKey(presented);
    const row = this.store.keys.findByHash(hash);
    if (!row || !timingSafeEqual(Buffer.from(row.key_hash, "hex"), Buffer.from(hash, "hex")) || row.revoked_at !== null)
      throw invalidKeyError();
    const account = this.store.accounts.findById(row.account_id);
    if (!account || account.status !== "active") throw invalidKeyError();
    const now = nowSeconds();
    // A write per request is wasteful; a minute's precision is enough for "last used".
    if (row.last_used_at === null || now - row.last_used_at >= 60) this.store.keys.touch(row.id, now);
    return { keyId: row.id, accountId: row.account_id, reasoningTrace: row.reasoning_trace === 1 };
  }

  private describe(row: ApiKeyRow): KeyInfo {
    const account = this.store.accounts.findById(row.account_id);
    return {
      id: row.id,
      account_id: row.account_id,
      account: account?.name ?? row.account_id,
      name: row.name,
      hint: `${KEY_PREFIX}…${row.last_four}`,
      reasoning_trace: row.reasoning_trace === 1,
      created_at: row.created_at,
      last_used_at: row.last_used_at,
      revoked_at: row.revoked_at,
    };
  }
}
