// Sizes as people read them, one way everywhere: the CLI (`svc models list`, the download bar) and the desktop
// window import this same function, so a model is "3.60 MB" in both. Pure and dependency-free, so the
// renderer can bundle it.

/** Decimal units, as download sites and file managers show sizes (a "2.5 GB" model is 2.5e9 bytes). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "?";
  if (bytes < 1000) return `${Math.round(bytes)} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 999.5 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} ${units[unit]}`;
}
