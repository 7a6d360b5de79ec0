// Where `npm run electron:native` (scripts/electron-native.mjs) puts a better_sqlite3.node built for
// Electron's ABI. Only development runs use it: a packaged app's node_modules were rebuilt by electron-builder.
import { join } from "node:path";

export const DEV_NATIVE_DIR = join(".cache", "electron-native");

/** The folder for one Electron version, platform and architecture (the script writes the same layout). */
export function devNativeBindingPath(appRoot: string, electronVersion: string, platform: string = process.platform, arch: string = process.arch): string {
  return join(appRoot, DEV_NATIVE_DIR, `${electronVersion}-${platform}-${arch}`, "better_sqlite3.node");
}

/** The binding to pass to the store, if any: only when not packaged and the script has built one. */
export function chooseNativeBinding(options: { appRoot: string; electronVersion: string; isPackaged: boolean; exists: (path: string) => boolean }): string | undefined {
  if (options.isPackaged) return undefined;
  const path = devNativeBindingPath(options.appRoot, options.electronVersion);
  return options.exists(path) ? path : undefined;
}
