// The store: one database, a repository per aggregate.
import { AccountRepository } from "./accounts-repository.js";
import { FileRepository } from "./files-repository.js";
import { openDatabase, type DatabaseOptions, type Db } from "./database.js";
import { MIGRATIONS } from "./migrations/index.js";
import { KeyRepository } from "./keys-repository.js";
import { ModelFileRepository } from "./model-files-repository.js";
import { SettingsRepository } from "./settings-repository.js";

export class Store {
  readonly accounts: AccountRepository;
  readonly keys: KeyRepository;
  readonly settings: SettingsRepository;
  readonly modelFiles: ModelFileRepository;
  readonly files: FileRepository;

  private constructor(readonly db: Db) {
    this.accounts = new AccountRepository(db);
    this.keys = new KeyRepository(db);
    this.settings = new SettingsRepository(db);
    this.modelFiles = new ModelFileRepository(db);
    this.files = new FileRepository(db);
  }

  static open(dataDir: string, options: DatabaseOptions = {}): Store {
    return new Store(openDatabase(dataDir, MIGRATIONS, options));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
